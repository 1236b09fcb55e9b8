"""A session id put in the very block that carries the cache breakpoint (Anthropic): fixed by hand, the
breakpoint on the last block that stays the same and the id in the latest user message."""
import uuid

import anthropic

client = anthropic.Anthropic()
RULES = "You are a coding agent. Follow the repository's conventions."


def step(task: str) -> str:
    session = uuid.uuid4().hex
    reply = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=1024,
        system=[{"type": "text", "text": RULES, "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": f"Session {session}\n\n{task}"}])
    return reply.content[0].text
