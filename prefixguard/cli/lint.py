"""`prefixguard lint`, `prefixguard rule`, `prefixguard rules`.

Exit status of lint: 0 no findings at or above --fail-on (or --exit-zero), 1 such findings, 2 usage or
input error (one line on stderr per error, never a traceback).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from prefixguard.cli import exits
from prefixguard.cli.exits import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, UsageError, fail
from prefixguard.cli.options import FILE, command, compatible_options, option, output_format
from prefixguard.lint import baseline, catalog, config, formats, linter
from prefixguard.lint.finding import Finding
from prefixguard.lint.sarif import sarif
from prefixguard.model import tokens
from prefixguard.schemas import versioned
from prefixguard.utils.errors import InputError, check_regular_file, check_writable
from prefixguard.utils.styled import printable_lines

FORMATS: dict[str, formats.Formatter] = {
    "text": formats.text,
    "concise": formats.concise,
    "json": formats.json_format,
    "github": formats.github,
    "sarif": sarif,
}
HUMAN = ("text", "concise")
VERSIONED = ("json", "sarif")  # the formats that name prefixguard's version


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # ~20 ms: only for outputs that name it

    try:
        return version("prefixguard")
    except PackageNotFoundError:
        return "0+unknown"


@command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@output_format(list(FORMATS), help="Output format (json: prefixguard/schemas/lint.schema.json).")
@compatible_options
@option("--output-file", type=FILE, help="Write the report to this file instead of standard output.")
@option("--select", multiple=True, help="Rules to run (codes, code prefixes or names; comma-separated). Repeatable.")
@option("--extend-select", multiple=True, help="Rules to run on top of the selection. Repeatable.")
@option("--ignore", multiple=True, help="Rules not to run. Repeatable.")
@option("--exclude", multiple=True, help="Glob of files or folders to skip when walking directories. Repeatable.")
@option(
    "--config",
    "config_file",
    type=FILE,
    help="A pyproject.toml to read [tool.prefixguard] from (default: the nearest one).",
)
@option(
    "--baseline",
    "baseline_file",
    type=FILE,
    help="Accepted findings: only findings not in this file are reported. A missing file is an "
    "error (a typo must not keep CI green); create it with --write-baseline.",
)
@option(
    "--write-baseline",
    "--update-baseline",
    "write_baseline",
    is_flag=True,
    help="(Re)write the --baseline file from this run and exit 0.",
)
@option(
    "--fail-on",
    type=click.Choice(catalog.SEVERITIES),
    default=None,
    help="Lowest severity that makes lint exit 1 [default: warning; or fail-on in [tool.prefixguard]].",
)
@option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings (errors still exit 2).")
@option("--statistics", is_flag=True, help="Print the number of findings per rule instead of the findings.")
@option("--no-tokens", is_flag=True, help="Estimate token counts (bytes/4) instead of tokenizing: faster.")
@option(
    "--fix",
    is_flag=True,
    help="Rewrite Python sources where a fix is mechanical (tools sorted, sort_keys=True, a "
    "trailing volatile part moved into the latest user message), then lint what is left.",
)
@option(
    "--diff",
    "show_fixes",
    is_flag=True,
    help="Print the fixes --fix would make as a unified diff, change nothing; exit 1 if any.",
)
def lint(
    paths: tuple[str, ...],
    fmt: str,
    output_file: Path | None,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    exclude: tuple[str, ...],
    config_file: Path | None,
    baseline_file: Path | None,
    write_baseline: bool,
    fail_on: str | None,
    exit_zero: bool,
    statistics: bool,
    no_tokens: bool,
    fix: bool = False,
    show_fixes: bool = False,
) -> int:
    """Check LLM request bodies, and the Python code that builds them, for prompt-cache hazards.

    PATH: request files (*.json), captures (*.jsonl: one request per line, or the proxy's export; each
    request is also compared with its best earlier match), Python sources (*.py: the prompts passed to
    the Anthropic, OpenAI, Bedrock, Gemini, LiteLLM and LangChain clients), directories (walked for all
    of these), globs, or '-' for standard input. Settings come from [tool.prefixguard] in the nearest
    pyproject.toml; the options here override them. `prefixguard rules` lists the rules, `prefixguard rule
    CODE` explains one.

    By default the rules of severity error and warning run, and info findings are not shown; name rules
    with --select or --extend-select to see their info findings too (`--select ALL` for everything).

    A directory or glob that holds no request file is not an error: a warning on stderr, exit 0 (as in
    ruff), so a CI job over a folder that is empty for now passes. Request bodies of the Anthropic,
    OpenAI (Chat Completions, Responses), Bedrock and Gemini APIs are linted; JSON files that are not
    request bodies (API responses, package.json, test expectations) are skipped with one warning line.
    A path that does not exist is an error.

    Exit status: 0 no findings at or above --fail-on, 1 such findings, 2 usage or input error (any file
    that could not be read or parsed: the others are still linted and reported).
    """
    if fix and show_fixes:
        raise UsageError("not allowed with --fix", option="--diff")
    if write_baseline and baseline_file is None:
        fail("--write-baseline needs --baseline FILE")
    cli = config.Layer(
        select=config.split_selectors(select) or None,
        extend_select=config.split_selectors(extend_select),
        ignore=config.split_selectors(ignore),
    )
    try:  # the files it reads and writes, before the linting: a FIFO would block, a device never end
        if output_file is not None:
            check_writable(str(output_file))
        if baseline_file is not None and (write_baseline or baseline_file.exists()):
            check_writable(str(baseline_file)) if write_baseline else check_regular_file(baseline_file, "baseline")
        settings = config.load(config_file, cli, exclude=config.split_selectors(exclude))
        if fix or show_fixes:
            from prefixguard.lint.code.fix import fix_paths

            changes = fix_paths(list(paths), write=fix, excluded=settings.excluded)
            if show_fixes:
                sys.stdout.write(printable_lines(changes.rstrip("\n")) + "\n" if changes else "")
                return EXIT_FINDINGS if changes else EXIT_OK
            if changes:
                fixed = sum(line.startswith("+++ ") for line in changes.splitlines())
                print(f"prefixguard: fixed {fixed} file{'s' * (fixed != 1)}", file=sys.stderr)
        result = linter.lint(list(paths), settings, count_tokens=not no_tokens)
    except InputError as err:
        fail(str(err))
    kinds = ", ".join(f"*{suffix}" for suffix in (*linter.SUFFIXES, *linter.CODE_SUFFIXES))
    for arg in result.empty:
        print(f"prefixguard: warning: no request files ({kinds}) found in {arg}", file=sys.stderr)
    if result.skipped:
        n = len(result.skipped)
        print(
            f"prefixguard: warning: skipped {n} file{'s' * (n != 1)} that {'are' if n != 1 else 'is'} not "
            f"{'' if n != 1 else 'a '}request bod{'ies' if n != 1 else 'y'} or source file{'s' * (n != 1)} "
            f"prefixguard reads ({kinds}) "
            f"(first: {result.skipped[0]})",
            file=sys.stderr,
        )
    for error in result.errors:
        exits.error(error)
    findings = result.findings
    run = formats.Run(
        _version() if fmt in VERSIONED else "",
        result.files,
        result.requests,
        result.errors,
        "estimate" if no_tokens else tokens.encoding_name(),
    )
    if baseline_file is not None:
        if not write_baseline and not baseline_file.exists():
            fail(f"{baseline_file}: baseline file not found (create it with --write-baseline)")
        if write_baseline:
            if result.errors:
                return EXIT_USAGE  # a baseline of a partial run would hide the unread files' findings
            try:
                baseline.write(baseline_file, findings)
            except InputError as err:
                fail(str(err))
            print(
                f"prefixguard: wrote {len(findings)} finding{'s' * (len(findings) != 1)} to {baseline_file}",
                file=sys.stderr,
            )
            return EXIT_OK
        try:
            findings, run.baselined = baseline.apply(findings, baseline.load(baseline_file))
        except InputError as err:
            fail(str(err))
    _emit(_report(findings, run, fmt, statistics), output_file)
    if result.errors:
        return EXIT_USAGE
    failing = catalog.at_least(findings, fail_on or settings.fail_on)
    return EXIT_FINDINGS if failing and not exit_zero else EXIT_OK


def _report(findings: list[Finding], run: formats.Run, fmt: str, statistics: bool) -> str:
    if statistics:
        rows = linter.statistics(findings)
        if fmt in HUMAN:
            return "\n".join(x for x in (formats.statistics_text(rows), formats.summary(findings, run)) if x)
        return json.dumps(versioned({"statistics": rows}), indent=2)
    body = FORMATS[fmt](findings, run)
    if fmt in HUMAN:
        return "\n\n".join(x for x in (body, formats.summary(findings, run)) if x)
    return body


def _emit(report: str, output_file: Path | None) -> None:
    if output_file is None:
        if report:
            print(report)
        return
    try:
        output_file.write_text(report + "\n" if report else "", "utf-8")
    except OSError as err:
        fail(f"{output_file}: {(err.strerror or str(err)).lower()}")


# ---------------------------------------------------------------------------------------- the catalog


@command()
@click.argument("key", metavar="CODE|NAME")
@output_format()
def rule(key: str, fmt: str) -> None:
    """Explain one rule: what it finds, why it costs money or latency, a bad and a good example, the fix."""
    r = catalog.get(key)
    if r is None:
        fail(f"unknown rule '{key}' (see `prefixguard rules`)")
    print(
        json.dumps(versioned(catalog.as_dict(r)), indent=2, ensure_ascii=False) if fmt == "json" else catalog.explain(r)
    )


@command()
@output_format()
def rules(fmt: str) -> None:
    """List every rule of the catalog."""
    if fmt == "json":
        print(
            json.dumps(
                versioned({"rules": [catalog.as_dict(r) for r in catalog.rules()]}), indent=2, ensure_ascii=False
            )
        )
        return
    width = max(len(r.name) for r in catalog.rules())
    for r in catalog.rules():
        print(f"{r.code}  {r.name:<{width}}  {r.severity:<7}  {r.summary}")
