// A chat endpoint that puts the request id in the system message for tracing (OpenAI).
import OpenAI from "openai";

const openai = new OpenAI();

export async function chat(requestId: string, question: string) {
  const completion = await openai.chat.completions.create({
    model: "gpt-4o",
    messages: [
      { role: "system", content: "You are a helpful assistant for Acme." },
      { role: "user", content: `Request: ${requestId}\n\n${question}` },
    ],
  });
  return completion.choices[0].message.content;
}
