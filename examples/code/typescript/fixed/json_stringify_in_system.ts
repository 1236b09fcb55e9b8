// The user's profile, loaded from the database, written into the system prompt as JSON (OpenAI responses).
import OpenAI from "openai";

const openai = new OpenAI();

// keys in sorted order at every level: the same profile is always the same text
const sortedKeys = (_key: string, value: unknown) =>
  value && typeof value === "object" && !Array.isArray(value)
    ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    : value;

export async function reply(profile: Record<string, unknown>, question: string) {
  const instructions = `You are Acme's assistant. The user's profile:\n${JSON.stringify(profile, sortedKeys)}`;
  return openai.responses.create({ model: "gpt-4.1", instructions, input: question });
}
