// An agent whose enabled tools are collected in a Set (OpenAI).
import OpenAI from "openai";

const openai = new OpenAI();
const SCHEMAS: Record<string, object> = { search: { type: "object" }, weather: { type: "object" } };

export async function run(enabled: Set<string>, question: string) {
  const tools = [];
  for (const name of [...enabled].sort()) {
    tools.push({ type: "function" as const, function: { name, parameters: SCHEMAS[name] } });
  }
  return openai.chat.completions.create({
    model: "gpt-4o", tools, messages: [{ role: "user", content: question }],
  });
}
