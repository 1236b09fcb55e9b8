"""Where a prompt's cache breakpoints are: the explicit ones its blocks carry, and the automatic one a
top-level marker puts on the last block that can carry one. Read by the policies, compare and lint."""

from __future__ import annotations

from collections.abc import Collection

from prefixguard.model.prompt import Prompt, Segment


def can_carry_breakpoint(seg: Segment, ineligible: Collection[str]) -> bool:
    """Whether the API accepts a breakpoint on this block: not on the kinds the contract names
    (thinking...), nor on an empty text block."""
    if seg.kind in ineligible:
        return False
    if seg.kind == "text":
        value = seg.value
        text = value if isinstance(value, str) else value.get("text") if isinstance(value, dict) else None
        return text != ""
    return True


def breakpoints(prompt: Prompt, ineligible: Collection[str]) -> dict[int, str]:
    """Segment index -> TTL of each breakpoint; the automatic one goes on the last block that can carry
    one (an explicit breakpoint already there keeps its TTL). Shared by compare and lint."""
    points = prompt.marked()
    if prompt.auto_breakpoint:
        last = next(
            (
                i
                for i in range(len(prompt.segments) - 1, -1, -1)
                if can_carry_breakpoint(prompt.segments[i], ineligible)
            ),
            None,
        )
        if last is not None:
            points.setdefault(last, prompt.auto_breakpoint)
    return points
