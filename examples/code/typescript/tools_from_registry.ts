// Tools registered by plugins at start-up, sent in registration order (Anthropic).
import Anthropic from "@anthropic-ai/sdk";

const client = new Anthropic();
const registry: Record<string, { description: string; schema: object }> = {};

export function register(name: string, description: string, schema: object) {
  registry[name] = { description, schema };
}

export async function run(question: string) {
  const tools = Object.entries(registry).map(([name, tool]) => ({
    name, description: tool.description, input_schema: tool.schema,
  }));
  return client.messages.create({
    model: "claude-sonnet-4-5", max_tokens: 1024, tools,
    messages: [{ role: "user", content: question }],
  });
}
