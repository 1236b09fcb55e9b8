"""The support bot with the fix: a constant system prompt (cached), the current time in the newest user
message only. Copy over ../support_app.py to see the test pass."""
from __future__ import annotations

from datetime import datetime

import anthropic

RULES = ("You are the support agent of Acme Outdoor. Answer briefly. Refunds are handled within thirty days "
         "of purchase with the original receipt; otherwise offer store credit. ") * 40


class SupportBot:
    def __init__(self, client: anthropic.Anthropic) -> None:
        self.client = client
        self.history: list[dict] = []

    def ask(self, question: str) -> str:
        # the time travels with this turn, and stays in the history exactly as it was sent
        self.history.append({"role": "user", "content": f"(sent {datetime.now().isoformat()})\n{question}"})
        reply = self.client.messages.create(
            model="claude-sonnet-4-5", max_tokens=256,
            system=[{"type": "text", "text": RULES, "cache_control": {"type": "ephemeral"}}],
            messages=self.history)
        text = reply.content[0].text
        self.history.append({"role": "assistant", "content": text})
        return text
