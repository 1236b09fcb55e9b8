// A route handler (JavaScript, Vercel AI SDK) that puts the trace id of the run in the system prompt.
import { generateText } from "ai";
import { openai } from "@ai-sdk/openai";

export async function POST(req) {
  const { question } = await req.json();
  const { text } = await generateText({
    model: openai("gpt-4o"),
    system: "You are Acme's assistant.",
    prompt: question,
    headers: { "x-trace-id": process.env.TRACE_ID ?? "" },
  });
  return Response.json({ text });
}
