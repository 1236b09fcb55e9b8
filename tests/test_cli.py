"""The CLI as a user meets it: every error is one line on stderr with a documented exit code."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PG = [str(Path(sys.executable).with_name("prefixguard"))]  # the installed console script


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PG, *args], capture_output=True, text=True, timeout=60, cwd=cwd)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("bad")
    (d / "empty.json").write_bytes(b"")
    (d / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (d / "text.jsonl").write_text("not json\n")
    (d / "list.json").write_text("[1, 2]")
    return {p.stem: str(p) for p in d.iterdir()} | {"dir": str(d), "missing": str(d / "missing.json")}


@pytest.mark.parametrize("argv", [
    ["diff", "--format", "xml", "{empty}", "{empty}"],
    ["diff", "{missing}", "{empty}"],
    ["diff", "{binary}", "{list}"],
    ["lint", "{binary}"],
    ["kv", "--model", "nosuch"],
    ["kv", "--memory", "abc", "--model", "llama-3-8b"],
    ["kv", "--config", "{binary}"],
    ["engine", "serve", "--model", "nosuch", "--port", "0"],
    ["replay", "{missing}"],
    ["replay", "{binary}"],
    ["report", "{missing}"],
    ["report", "{text}"],
    ["capture", "export", "{dir}"],
    ["rule", "PG999"],
    ["nosuchcommand"],
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], files: dict[str, str]) -> None:
    done = run(*[a.format(**files) for a in argv])
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("prefixguard: error: "), done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_a_missing_extra_names_the_install_command(tmp_path: Path) -> None:
    """On a core-only install the engine's commands say what to install (torch blocked here)."""
    code = ("import sys; sys.modules['torch'] = None; sys.argv = ['prefixguard', 'engine', 'serve', '--port', '0'];"
            "from prefixguard.cli import main; main()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == ("prefixguard: error: this command needs torch, which the engine extra brings: "
                                   "`pip install '.[engine]'` (or '.[all]') in a clone of the prefixguard repository")


def test_help_and_version_exit_0() -> None:
    assert run("--help").returncode == 0 and "lint" in run("--help").stdout
    assert run("--version").returncode == 0


@pytest.mark.parametrize("argv", [["lint", "--no-such-flag", "x.json"], ["diff", "--no-such-flag"],
                                  ["replay", "--no-such-flag"], ["rules", "--no-such-flag"]])
def test_usage_errors_of_every_command_point_to_its_help(argv: list[str]) -> None:
    """One error path for all commands: lint's usage errors get the same hint as the others'."""
    done = run(*argv)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().endswith(f"(see prefixguard {argv[0]} --help)"), done.stderr


@pytest.mark.parametrize("old,new", [
    (["diff", "--format", "json"], ["diff", "-o", "json"]),
    (["rules", "--format", "json"], ["rules", "--output-format", "json"]),
    (["kv", "--model", "llama-3-8b", "--format", "json"], ["kv", "--model", "llama-3-8b", "-o", "json"]),
])
def test_old_flag_names_are_hidden_aliases_for_one_release(old: list[str], new: list[str], tmp_path: Path) -> None:
    body = tmp_path / "a.json"
    body.write_text('{"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}')
    extra = [str(body), str(body)] if old[0] == "diff" else []
    was, now = run(*old, *extra), run(*new, *extra)
    assert was.returncode == now.returncode == 0 and was.stdout == now.stdout and now.stdout.startswith("{")
    assert old[-2] not in run(old[0], "--help").stdout.replace("--output-format", "")  # hidden


def test_unified_flags_in_help() -> None:
    for command in ("diff", "kv", "report", "replay", "rules", "lint", "demo"):
        assert "-o, --output-format" in run(command, "--help").stdout, command
    for command in (["proxy"], ["engine", "serve"], ["replay"]):
        # one choice per contract of rules/providers.toml (radix: the compatible one)
        choices = "auto|anthropic|bedrock|bedrock_mantle|deepseek|gemini|groq|minimax|mistral|moonshot|openai|qwen|radix|xai|zai"
        assert f"--policy [{choices}]" in " ".join(run(*command, "--help").stdout.split()), command


def test_engine_model_is_the_weights_and_model_the_api_name_everywhere() -> None:
    """--engine-model: the weights the local engine runs (engine serve, replay, demo); --model: the model
    name requests carry (replay, kv). engine serve's old --model is a hidden alias of --engine-model."""
    for command in (["engine", "serve"], ["replay"], ["demo"]):
        assert "--engine-model" in run(*command, "--help").stdout, command
    assert "--model " not in run("engine", "serve", "--help").stdout
    old, new = (run("engine", "serve", flag, "nosuch", "--port", "0") for flag in ("--model", "--engine-model"))
    assert old.returncode == new.returncode == 2 and "nosuch" in new.stderr and old.stderr == new.stderr


def test_no_command_prints_the_commands_and_exits_2() -> None:
    from prefixguard.cli import COMMANDS

    done = run()
    assert done.returncode == 2
    commands = done.stdout.split("\nCommands:\n")[1].split("\n\n")[0]
    listed = [line.split()[:2] for line in commands.splitlines() if not line.startswith("   ")]
    # every command, in the table's order, each with its line of help
    assert listed == [[name, summary.split()[0]] for name, (_, summary) in COMMANDS.items()]


def test_an_abbreviated_option_is_not_taken_for_the_whole_one() -> None:
    """`--no-tok` is not `--no-tokens`: a typo must not quietly mean another option (click suggests it)."""
    done = run("diff", "--no-tok", "a.json", "b.json")
    assert done.returncode == 2 and done.stderr == (
        "prefixguard: error: No such option '--no-tok'. Did you mean '--no-tokens'? (see prefixguard diff --help)\n")


def test_an_unknown_engine_model_is_named_before_torch_loads() -> None:
    """The name is checked first: with torch blocked, the error is still the unknown model, at once."""
    code = ("import sys; sys.modules['torch'] = None; sys.argv = ['prefixguard', 'engine', 'serve', "
            "'--engine-model', 'nosuch', '--port', '0']; from prefixguard.cli import main; main()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("prefixguard: error: --engine-model: unknown model preset 'nosuch'; known: tiny"), \
        done.stderr


def test_help_text_is_the_docstring_as_written() -> None:
    """A command's --help prints its docstring's lines as written (click would refill each paragraph):
    diff's table of token fields keeps its columns."""
    import inspect

    from prefixguard.cli.diff import diff

    shown = run("diff", "--help").stdout
    for line in inspect.cleandoc(diff.help or "").splitlines():
        assert f"  {line}".rstrip() in shown.splitlines(), line
    assert "    reused_tokens     what B can read of what A wrote (breakpoints and their" in shown


PAIR = Path(__file__).resolve().parent.parent / "examples" / "requests" / "anthropic" / "volatile_content"


@pytest.fixture(scope="module")
def pair_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A capture of the pair's two requests, as the proxy stores them."""
    from prefixguard.capture.store import Record, Store
    from prefixguard.model.usage import Usage
    db = tmp_path_factory.mktemp("capture") / "pair.db"
    with Store(db) as store:
        for i, name in enumerate(("a", "b")):
            body = (PAIR / f"{name}.json").read_text("utf-8")
            store.add(Record(f"r{i}", 1000.0 + i, "/v1/messages", api="anthropic", model="claude-sonnet-4-5",
                             request=body, status=200, usage=Usage(3000, 0, 3000, 0, 0, 5, True), ttft_s=0.2))
    return db


@pytest.mark.parametrize("argv", [["diff", "--no-tokens", str(PAIR / "a.json"), str(PAIR / "b.json")],
                                  ["lint", "--no-tokens", str(PAIR / "b.json")],
                                  ["report", "{capture}", "-o", "json"], ["report", "{capture}"]])
def test_diff_lint_and_a_json_report_never_load_rich(argv: list[str], pair_capture: Path, tmp_path: Path) -> None:
    """What keeps `diff` under cachelint's time and a small `lint` near 0.1 s (bench/startup.py): rich, the
    terminal idiom, costs more than a small lint's whole run, so only a command that draws a table or
    styles text loads it (report's text output does; its JSON does not). `dataclasses` is allowed: the
    typed contracts (contracts/tables.py) use it, and it costs at most 3 ms over the `inspect` click loads
    (bench/RESULTS.md has the figure). The second run, as a user's: the first read the prices
    (genai-prices) into the cache directory."""
    argv = [a.format(capture=pair_capture) for a in argv]
    code = ("import sys; from prefixguard.cli import run; "
            f"code = run({argv!r}); print(code, 'rich' in sys.modules)")
    env = {**os.environ, "PREFIXGUARD_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
            for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    # diff: the prefix breaks, lint: a finding (exit 1); report: done (0); rich only for report's text
    text_report = argv[0] == "report" and "json" not in argv
    assert runs[1].stdout.splitlines()[-1] == f"{int(argv[0] != 'report')} {text_report}"
    if argv[0] == "report":
        assert "volatile_content" in runs[1].stdout   # it judged the pair: the timestamp broke the prefix


def test_main_is_a_click_group_and_help_has_its_shape() -> None:
    """The console script is click's: `prefixguard --help` is click's usage, options and command list."""
    import click

    from prefixguard.cli import main

    assert isinstance(main, click.Group)
    done = run("--help")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("Usage: prefixguard [OPTIONS] COMMAND [ARGS]...\n")
    assert "\nOptions:\n  --version " in done.stdout and "  -h, --help " in done.stdout
    assert "\nCommands:\n  capture " in done.stdout
    assert run("-h").stdout == done.stdout and run("--version").stdout.startswith("prefixguard ")


@pytest.mark.parametrize("argv,loaded", [
    (["--help"], set()),                               # the list comes from the table
    (["lint", "--help"], {"prefixguard.cli.lint"}),
    (["diff", "--no-tokens", str(PAIR / "a.json"), str(PAIR / "b.json")], {"prefixguard.cli.diff"}),
    (["engine", "--help"], {"prefixguard.cli.engine"}),
])
def test_a_command_imports_only_its_own_module(argv: list[str], loaded: set[str]) -> None:
    """The lazily loading group: listing the commands imports none of them, running or asking one for
    its help imports that one."""
    from prefixguard.cli import COMMANDS

    modules = sorted({target.split(":")[0] for target, _ in COMMANDS.values()})
    code = ("import sys; from prefixguard.cli import run; "
            f"code = run({argv!r}); print(sorted(m for m in {modules!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == str(sorted(loaded))


def test_a_missing_subcommand_is_one_line_and_exit_2() -> None:
    done = run("engine")
    assert done.returncode == 2
    assert done.stderr == "prefixguard: error: Missing command. (see prefixguard engine --help)\n"


def test_bash_completion_script_and_completions() -> None:
    """click's shell completion: the script bash sources names the command, and completing
    `prefixguard li` offers lint, `prefixguard lint --no-t` its option."""
    source = subprocess.run(PG, env={**os.environ, "_PREFIXGUARD_COMPLETE": "bash_source"}, capture_output=True,
                            text=True, timeout=60)
    assert source.returncode == 0, source.stderr
    assert "_prefixguard_completion()" in source.stdout
    assert "complete -o nosort -F _prefixguard_completion prefixguard" in source.stdout

    def complete(line: str) -> list[str]:
        words = line.split(" ")
        env = {**os.environ, "_PREFIXGUARD_COMPLETE": "bash_complete", "COMP_WORDS": line,
               "COMP_CWORD": str(len(words) - 1)}
        done = subprocess.run(PG, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    assert complete("prefixguard li") == ["plain,lint"]
    assert complete("prefixguard r") == ["plain,replay", "plain,report", "plain,rule", "plain,rules"]
    assert complete("prefixguard lint --no-t") == ["plain,--no-tokens"]
