"""The GitHub Action (action.yml) and the proxy's Dockerfile name only flags the CLI really has, and the
action's lint step, run as GitHub runs it (bash, its env), writes a SARIF report."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import click
import yaml

from prefixguard.cli import lint, proxy
from helpers.processes import prefixguard_on_path

ROOT = Path(__file__).resolve().parents[1]


def flags(command: click.Command) -> set[str]:
    """The option names a command takes."""
    return {name for param in command.params for name in (*param.opts, *param.secondary_opts) if name[0] == "-"}


def action() -> dict:
    return yaml.safe_load((ROOT / "action.yml").read_text("utf-8"))


def test_action_is_composite_and_uploads_sarif():
    doc = action()
    assert doc["runs"]["using"] == "composite"
    steps = doc["runs"]["steps"]
    uses = [s.get("uses", "") for s in steps]
    assert any(u.startswith("actions/setup-python@") for u in uses)
    assert any(u.startswith("github/codeql-action/upload-sarif@") for u in uses)
    setup = next(s for s in steps if s.get("uses", "").startswith("actions/setup-python@"))
    assert setup["with"]["python-version"] == "${{ inputs.python-version }}"
    assert doc["inputs"]["python-version"]["default"] == "3.12"
    upload = next(s for s in steps if "upload-sarif" in s.get("uses", ""))
    assert upload["with"]["sarif_file"] == "${{ inputs.sarif-file }}"
    assert all(s.get("shell") == "bash" for s in steps if "run" in s)   # composite run steps need a shell


def test_action_inputs_are_declared_and_used():
    doc = action()
    text = (ROOT / "action.yml").read_text("utf-8")
    used = set(re.findall(r"\$\{\{[^}]*inputs\.([\w-]+)", text))
    assert used == set(doc["inputs"]), (used, set(doc["inputs"]))


def test_action_uses_only_real_lint_flags():
    known = flags(lint.lint)
    runs = [s["run"] for s in action()["runs"]["steps"] if "run" in s]
    lint_runs = [r for r in runs if "prefixguard lint" in r]
    assert len(lint_runs) == 2
    used = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", "\n".join(lint_runs)))
    assert {"--output-format", "--output-file", "--baseline", "--select", "--fail-on"} <= used
    assert used <= known, used - known
    formats = set(re.findall(r"--output-format (\w+)", "\n".join(lint_runs)))
    choices = next(p.type.choices for p in lint.lint.params if "--output-format" in p.opts)
    assert formats == {"sarif", "github"} and formats <= set(choices)


def test_action_sarif_step_runs(tmp_path: Path):
    """The SARIF step's script under bash, with the env GitHub gives it and `prefixguard` on PATH."""
    step = next(s for s in action()["runs"]["steps"] if s.get("id") == "sarif")
    path = prefixguard_on_path(tmp_path / "bin")
    env = {**os.environ, "PATH": path,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "PG_PATHS": "examples/lint", "PG_BASELINE": "", "PG_SELECT": "", "PG_SARIF": str(tmp_path / "out.sarif")}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", step["run"]], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    sarif = json.loads((tmp_path / "out.sarif").read_text("utf-8"))
    assert sarif["version"] == "2.1.0"
    assert sarif["runs"][0]["results"], "examples/lint holds findings: the report must list them"


def dockerfile() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text("utf-8").replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_runs_the_proxy_with_real_flags():
    lines = dockerfile()
    assert lines[0] == ("FROM", "python:3.12-slim")
    assert any(w == "RUN" and "pip install '.[proxy," in r for w, r in lines)   # and the extras its flags need: test_docker.py
    entry = json.loads(next(r for w, r in lines if w == "ENTRYPOINT"))
    cmd = json.loads(next(r for w, r in lines if w == "CMD"))
    assert entry[:3] == ["docker-entrypoint.sh", "prefixguard", "proxy"]   # the wrapper drops root (docker-entrypoint.sh)
    entry = entry[1:]
    args = entry[2:] + cmd
    known = flags(proxy.proxy)
    assert {a for a in args if a.startswith("--")} <= known
    port = args[args.index("--port") + 1]
    assert ("EXPOSE", port) in lines
    # The package data the proxy reads at run time is copied in (rules/ is a package of its own).
    copied = {r.split()[0] for w, r in lines if w == "COPY"}
    assert {"prefixguard", "rules", "engine"} <= copied
    for name in copied - {"pyproject.toml"}:
        assert (ROOT / name).exists(), name
