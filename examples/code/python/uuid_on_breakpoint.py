"""A session id put in the very block that carries the cache breakpoint (Anthropic)."""
import uuid

import anthropic

client = anthropic.Anthropic()
RULES = "You are a coding agent. Follow the repository's conventions."


def step(task: str) -> str:
    session = uuid.uuid4().hex
    reply = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=1024,
        system=[{"type": "text", "text": RULES},
                {"type": "text", "text": f"Session {session}", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": task}])
    return reply.content[0].text
