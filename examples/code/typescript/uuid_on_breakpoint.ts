// A session id in the block that carries the cache breakpoint (Anthropic).
import Anthropic from "@anthropic-ai/sdk";
import { randomUUID } from "node:crypto";

const client = new Anthropic();
const RULES = "You are Acme's support agent. Follow the refund policy below. ...";

export async function answer(question: string) {
  const session = randomUUID();
  return client.messages.create({
    model: "claude-sonnet-4-5", max_tokens: 1024,
    system: [{ type: "text", text: `${RULES}\nSession: ${session}`, cache_control: { type: "ephemeral" } }],
    messages: [{ role: "user", content: question }],
  });
}
