"""A support bot that tells the model the time in its system prompt (Anthropic, automatic caching)."""
from datetime import datetime

import anthropic

client = anthropic.Anthropic()


def answer(question: str) -> str:
    now = datetime.now().isoformat(timespec="seconds")
    system = f"You are a support agent for Acme. Answer briefly. Current time: {now}"
    reply = client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, cache_control={"type": "ephemeral"},
                                   system=system, messages=[{"role": "user", "content": question}])
    return reply.content[0].text
