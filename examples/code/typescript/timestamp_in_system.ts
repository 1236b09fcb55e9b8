// A support bot that tells the model the time in its system prompt (Anthropic, automatic caching).
import Anthropic from "@anthropic-ai/sdk";

const client = new Anthropic();

export async function answer(question: string): Promise<string> {
  const now = new Date().toISOString();
  const system = `You are a support agent for Acme. Answer briefly. Current time: ${now}`;
  const reply = await client.messages.create({
    model: "claude-sonnet-4-5", max_tokens: 1024, cache_control: { type: "ephemeral" },
    system, messages: [{ role: "user", content: question }],
  });
  return reply.content[0].type === "text" ? reply.content[0].text : "";
}
