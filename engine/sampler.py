"""Next-token choice: greedy at temperature 0, else sampling from softmax(logits / T)."""

from __future__ import annotations

import torch


def sample(logits: torch.Tensor, temperatures: list[float], generators: list[torch.Generator | None]) -> list[int]:
    """logits: [B, vocab] float32, one row per sequence."""
    out = logits.argmax(dim=-1).tolist()
    for i, t in enumerate(temperatures):
        if t > 0:
            probs = torch.softmax(logits[i] / t, dim=-1)
            out[i] = int(torch.multinomial(probs, 1, generator=generators[i]).item())
    return out
