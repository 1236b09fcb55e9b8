// The user's profile, loaded from the database, written into the system prompt as JSON (OpenAI responses).
import OpenAI from "openai";

const openai = new OpenAI();

export async function reply(profile: Record<string, unknown>, question: string) {
  const instructions = `You are Acme's assistant. The user's profile:\n${JSON.stringify(profile)}`;
  return openai.responses.create({ model: "gpt-4.1", instructions, input: question });
}
