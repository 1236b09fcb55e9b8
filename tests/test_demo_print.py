"""The demo's summary prints what came from the capture (cause names, code places, fixes) as text: rich
markup in them is shown as written, never read, and control characters reach the terminal escaped."""
from __future__ import annotations

from typing import Any

import pytest

from prefixguard.cli.demo import _print


def _side() -> dict[str, Any]:
    requests = [{"run": 1, "request": 1, "api": "anthropic", "verdict": "cold", "causes": [], "cache_read": 0,
                 "prompt_tokens": 100},
                {"run": 1, "request": 2, "api": "openai-chat", "verdict": "miss_prefix_changed",
                 "causes": ["[red]tools[/red]"], "cache_read": 40, "prompt_tokens": 100}]
    return {"requests": requests, "hit_rate": 0.2, "ttft_mean_s": 0.2, "prefill_s": 1.5, "input_cost_usd": 0.01}


def test_user_text_is_never_markup(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    _print({"before": _side(), "after": _side(),
            "causes": [{"cause": "[bold]tools_reordered[/bold]", "where": ["app.py:3", "[link=x]y[/link]"],
                        "requests": 2, "reprefill_tokens": 10, "fix": "sort the tools\x1b[2J"}],
            "provider_diagnostics": {"compared": 2, "agreed": 1}, "seconds": 3.2})
    out = capsys.readouterr().out
    assert "- [bold]tools_reordered[/bold] at app.py:3, [link=x]y[/link]: 2 requests" in out
    assert "[red]tools[/red]" in out
    assert "sort the tools\\x1b[2J" in out and "\x1b" not in out
    assert "gpt turn 2" in out and "What fixing it bought" in out
