// A LangChain.js prompt that picks a persona at random on every call.
import { ChatPromptTemplate } from "@langchain/core/prompts";

const PERSONAS = ["cheerful", "formal", "concise"];

export function buildPrompt() {
  const persona = PERSONAS[Math.floor(Math.random() * PERSONAS.length)];
  return ChatPromptTemplate.fromMessages([
    ["system", `You are a ${persona} assistant for Acme.`],
    ["human", "{question}"],
  ]);
}
