"""A profile rendered with json.dumps into the system prompt (Anthropic, breakpoint on the system block)."""
import json

import anthropic

client = anthropic.Anthropic()


def answer(profile: dict, question: str) -> str:
    context = json.dumps(profile, indent=2)
    reply = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=1024,
        system=[{"type": "text", "text": "You are a concierge. The user's profile:\n" + context,
                 "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": question}])
    return reply.content[0].text
