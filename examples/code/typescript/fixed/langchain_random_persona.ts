// A LangChain.js prompt that picks a persona at random on every call.
import { ChatPromptTemplate } from "@langchain/core/prompts";

const PERSONAS = ["cheerful", "formal", "concise"];

export function buildPrompt(userId: number) {
  const persona = PERSONAS[userId % PERSONAS.length];   // one persona per user: the same prefix every call
  return ChatPromptTemplate.fromMessages([
    ["system", `You are a ${persona} assistant for Acme.`],
    ["human", "{question}"],
  ]);
}
