"""Every shell command in README.md either runs here, as written, or says why it cannot and which test
covers it instead. Commands run in README order in one working directory, with the machine's few
differences substituted: the providers' URLs become a loopback upstream that answers with recorded
responses, fixed ports become free ones, and `your_app.py` is a small app with the real anthropic SDK.
Servers (the proxy, mitmdump) are started, must come up listening, and stop at the end of their block.
A new README command fails this test until it is given a place below."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow   # starts proxies; about 30-60 s on 2 busy cores

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
LEGACY = "openllmetry/test_prompt_caching_test_anthropic_prompt_caching_legacy"

# Commands that do not run here: (regex on the command, why, and what covers it).
NOT_HERE = [
    (r"^bash \.ci/venv-run prefixguard demo", "the demo itself (~60 s): tests/test_e2e_demo.py runs it"),
    (r"^bash \.ci/venv-run pytest", "the whole test suite, this test included"),
    (r"^pip install ", "installs into the environment from the package index; tests/test_install.py installs "
                      "prefixguard outside the checkout"),
    (r"^prefixguard (lint|rules?)\b", "the lint block: tests/test_lint_readme.py runs it verbatim, in order"),
    (r"--index redis://10\.0\.0\.7", "needs Redis and PostgreSQL at those addresses; tests/test_fleet_e2e.py runs "
                                     "fleet mode on local servers"),
    (r"--target engine", "starts torch and the engine (tens of seconds here); tests/test_replay_engine.py"),
    (r"^docker ", "no Docker daemon on the test machines; tests/test_docker.py checks the image's extras and "
                  "runs its entrypoint"),
    (r"^prefixguard engine serve", "starts torch and a model server; tests/test_server_cli.py starts it"),
    (r"^export LITELLM_MASTER_KEY|litellm --config", "LiteLLM's proxy server (litellm[proxy]) is no dependency "
                                                     "here; tests/test_litellm.py runs the callback in LiteLLM"),
]
SERVERS = re.compile(r"^(prefixguard proxy|mitmdump) ")
EXIT = [(r"^prefixguard diff ", {1}), (r"^prefixguard check ", {0, 1}), (r"^prefixguard replay ", {0, 1})]

APP = '''"""The README's your_app.py: two turns of an agent whose system prompt holds the time."""
import json, os, sys
import anthropic
body = json.load(open(sys.argv[1]))
client = anthropic.Anthropic(base_url=os.environ["ANTHROPIC_BASE_URL"], api_key="sk-ant-readme", max_retries=0)
for stamp in ("2026-12-02T16:00:00Z", "2026-12-02T16:00:07Z"):
    turn = json.loads(json.dumps(body))
    turn["system"][0]["text"] = f"Current time: {stamp}. " + turn["system"][0]["text"]
    client.messages.create(**turn)
'''


def readme_blocks() -> list[list[str]]:
    """Each sh block of README.md as its commands: continuation lines joined, comments dropped."""
    text = (ROOT / "README.md").read_text("utf-8")
    blocks = []
    for body in re.findall(r"```sh\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", "", body)
        commands = [re.sub(r"\s+#\s.*$", "", line).strip() for line in joined.splitlines()]
        blocks.append([c for c in commands if c and not c.startswith("#")])
    return blocks


def why_not(command: str) -> str | None:
    return next((why for pattern, why in NOT_HERE if re.search(pattern, command)), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Machine:
    """The working directory, environment and substitutions the README's commands run with."""

    def __init__(self, work: Path, upstream: str) -> None:
        self.work, self.upstream = work, upstream
        self.ports = {p: free_port() for p in ("8080", "9464", "4318", "8000")}
        home = work.parent / "home"
        self.env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "HOME": str(home),
                    "PYTHONPATH": str(ROOT / "tests"), "NO_COLOR": "1"}
        self.env.pop("CODEX_HOME", None)
        self.env.pop("GITHUB_STEP_SUMMARY", None)

    def substitute(self, command: str) -> str:
        for url in ("https://api.anthropic.com", "https://api.openai.com", "http://127.0.0.1:8000"):  # a server
            command = command.replace(url, self.upstream)
        for port, free in self.ports.items():
            command = re.sub(rf"(?<=[:\s]){port}\b", str(free), command)
        if command.startswith("prefixguard proxy") and "--port" not in command:
            command += f" --port {free_port()}"
        if command.startswith("mitmdump") and "--listen-port" not in command:
            command += f" --listen-port {free_port()}"
        if "python your_app.py" in command:
            command += f" {self.work / 'turn.json'}"
        return command

    def prepare(self, command: str) -> None:
        """Files a command reads that an earlier README command does not make here."""
        w = self.work
        if "A.json" in command and not (w / "A.json").exists():
            pair = ROOT / "examples/requests/anthropic/volatile_content"
            shutil.copy(pair / "a.json", w / "A.json")
            shutil.copy(pair / "b.json", w / "B.json")
        if "capture.jsonl" in command and not (w / "capture.jsonl").exists():
            self.run("prefixguard capture export capture.db > capture.jsonl")
        if "base.db" in command and not (w / "base.db").exists():
            shutil.copy(w / "capture.db", w / "base.db")
            shutil.copy(w / "capture.db", w / "new.db")
        if "live.db" in command and not (w / "live.db").exists():
            from prefixguard.capture.store import open_store   # the same traffic a week earlier, then as captured
            with open_store(w / "capture.db") as src:
                records = list(src.records())
            with open_store(w / "live.db", create=True) as live:
                for rec in records:
                    live.add(rec)
                for rec in records:
                    rec.id, rec.ts = rec.id + "-early", rec.ts - 7 * 86400
                    live.add(rec)

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", command], cwd=self.work, env=self.env, capture_output=True, text=True,
                              timeout=120)

    def start(self, command: str) -> subprocess.Popen[str]:
        port = int(re.search(r"--(?:listen-)?port (\d+)", command).group(1))
        proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=self.work, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"{command!r} exited {proc.returncode}: {proc.stdout.read()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return proc
            except OSError:
                time.sleep(0.2)
        proc.kill()
        raise AssertionError(f"{command!r} did not listen on {port} within 90 s")


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_every_readme_command_is_run_or_says_why_not() -> None:
    commands = [c for block in readme_blocks() for c in block]
    assert len(commands) >= 40
    # the rest run in test_readme_commands_run; each of these names what keeps it from running, and what covers it
    for pattern, _ in NOT_HERE:
        assert any(re.search(pattern, c) for c in commands), f"{pattern!r} matches no README command any more"


def test_readme_commands_run(shared_data: Path, tmp_path: Path) -> None:
    from helpers.upstream import Upstream

    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples", work / "examples")
    (work / "prefixguard").symlink_to(ROOT / "prefixguard")          # as in a clone: mitmdump -s prefixguard/...
    (tmp_path / "shared").symlink_to(shared_data.parent)            # ../shared/data/... as in the README
    home = tmp_path / "home"
    projects = home / ".claude" / "projects"
    shutil.copytree(ROOT / "tests/data/agent_logs/claude-code/projects", projects)
    shutil.copytree(projects / "-home-dev-shop", projects / "-home-me-shop")
    shutil.copytree(ROOT / "tests/data/agent_logs/codex/sessions", home / ".codex" / "sessions")
    (work / "your_app.py").write_text(APP)
    shutil.copy(shared_data / "recorded" / LEGACY / "0001.request.json", work / "turn.json")
    ran: list[str] = []
    started = time.monotonic()
    with Upstream(shared_data / "recorded") as up:
        machine = Machine(work, up.url)
        for block in readme_blocks():
            servers: list[subprocess.Popen[str]] = []
            try:
                for written in block:
                    if why_not(written):
                        continue
                    if "promtool" in written and shutil.which("promtool") is None:
                        continue   # tests/test_alerts.py runs it (and fails under CI without promtool)
                    command = machine.substitute(written)
                    machine.prepare(command)
                    if SERVERS.match(command):
                        servers.append(machine.start(command))
                    else:
                        done = machine.run(command)
                        allowed = next((codes for pattern, codes in EXIT if re.match(pattern, command)), {0})
                        assert done.returncode in allowed, (written, done.returncode, done.stderr[-2000:])
                        assert "Traceback" not in done.stderr, (written, done.stderr[-2000:])
                    ran.append(written)
            finally:
                for proc in servers:
                    stop(proc)
    took = time.monotonic() - started
    # what they made is what the README says they make
    assert json.loads((work / "spans.json").read_text())["resourceSpans"]
    with_rows = subprocess.run([str(BIN / "prefixguard"), "report", "capture.db", "-o", "json"], cwd=work,
                               capture_output=True, text=True, timeout=60)
    assert json.loads(with_rows.stdout)["requests"] == 2, with_rows.stderr
    assert (work / "report.html").stat().st_size > 1000 and (work / "agent-logs.html").exists()
    assert (work / "results.db").exists() and (work / "shop.db").exists()
    assert len(ran) >= 20, ran
    assert took < 120, took
