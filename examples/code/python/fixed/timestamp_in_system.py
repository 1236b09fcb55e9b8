"""A support bot that tells the model the time in its system prompt (Anthropic, automatic caching)."""
from datetime import datetime

import anthropic

client = anthropic.Anthropic()


def answer(question: str) -> str:
    now = datetime.now().isoformat(timespec="seconds")
    system = "You are a support agent for Acme. Answer briefly."
    reply = client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, cache_control={"type": "ephemeral"},
                                   system=system, messages=[{"role": "user", "content": f"Current time: {now}\n\n{question}"}])
    return reply.content[0].text
