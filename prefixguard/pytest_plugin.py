"""pytest plugin: record the LLM requests a test sends and fail it when they break their own prefix.

Loaded by the `pytest11` entry point when prefixguard is installed (or `-p prefixguard.pytest_plugin`).

- `prefix_recorder` fixture: a prefixguard.testing.Recorder named after the test. Hand
  `prefix_recorder.http_client()` (or `.async_http_client()`, `.transport(inner)`) to the anthropic or
  openai SDK client your app uses.
- `--prefixguard-record DIR`: write each test's requests to DIR/<test>.jsonl, for `prefixguard lint DIR`.
- `--prefixguard-fail-on-break` (or ini `prefixguard_fail_on_break = true`): a test whose recorded session
  breaks its prefix fails, with the explanation (the verdict, cause, where, before/after, reused and
  re-prefilled tokens, the fix). A break is a request whose verdict is miss_prefix_changed as the proxy
  and `diff` judge it (prefixguard.judge.verdict): a change that costs nothing, or a prompt below the model's
  minimum that nothing caches, fails no test.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import pluggy
import pytest

RECORDER = "prefix_recorder"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("prefixguard", "prompt-cache checks (prefixguard)")
    group.addoption(
        "--prefixguard-record",
        metavar="DIR",
        default=None,
        help="write the LLM requests each test sends to DIR/<test>.jsonl (for `prefixguard lint`)",
    )
    group.addoption(
        "--prefixguard-fail-on-break",
        action="store_true",
        default=None,
        help="fail a test whose recorded requests break their own cached prefix",
    )
    parser.addini(
        "prefixguard_fail_on_break",
        type="bool",
        default=False,
        help="fail a test whose recorded requests break their own cached prefix",
    )


def _fail_on_break(config: pytest.Config) -> bool:
    flag = config.getoption("--prefixguard-fail-on-break")
    return bool(flag) if flag is not None else bool(config.getini("prefixguard_fail_on_break"))


@pytest.fixture
def prefix_recorder(request: pytest.FixtureRequest) -> Iterator[Any]:
    from prefixguard.testing import Recorder  # httpx is needed only by tests that use the fixture

    recorder = Recorder(request.node.nodeid)
    yield recorder
    folder = request.config.getoption("--prefixguard-record")
    if folder:
        recorder.write(folder)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    outcome = yield
    report = outcome.get_result()
    recorder = getattr(item, "funcargs", {}).get(RECORDER)
    if report.when != "call" or report.failed or recorder is None or not _fail_on_break(item.config):
        return
    if recorder.breaks():
        report.outcome = "failed"
        report.longrepr = recorder.explain()
