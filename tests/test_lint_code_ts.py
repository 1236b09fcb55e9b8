"""`prefixguard lint` on TypeScript and JavaScript source (issue 31): the example apps in
examples/code/typescript/ are each found with the provider's severity, their fixed twins are clean, the
mechanical ones (tool order, a trailing volatile sentence) are fixed into their twins, and the flows are
followed the way Python's are."""
from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.lint import catalog
from prefixguard.lint.code.fix import fix_paths, fix_text
from prefixguard.lint.code.typescript import analyze

ROOT = Path(__file__).resolve().parents[1]
APPS = ROOT / "examples" / "code" / "typescript"
EXPECTED = {
    "timestamp_in_system.ts": ("PG601", "error"),          # Anthropic, automatic caching: a full miss
    "request_id_in_system.ts": ("PG601", "warning"),       # OpenAI: a partial hit lost
    "tools_from_set.ts": ("PG602", "warning"),
    "tools_from_registry.ts": ("PG602", "warning"),
    "json_stringify_in_system.ts": ("PG603", "warning"),
    "uuid_on_breakpoint.ts": ("PG604", "error"),
    "ai_sdk_trace_env.js": ("PG601", "warning"),           # JavaScript, Vercel AI SDK
    "langchain_random_persona.ts": ("PG601", "warning"),   # LangChain.js prompt template
}
MECHANICAL = {"tools_from_set.ts", "tools_from_registry.ts", "timestamp_in_system.ts", "request_id_in_system.ts",
              "uuid_on_breakpoint.ts"}


def findings(*args: str) -> list[dict]:
    result = CliRunner().invoke(main, ["lint", "--format", "json", "--select", "ALL", *args])
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)["findings"]


def test_every_app_is_listed_and_has_a_twin():
    apps = {p.name for p in APPS.iterdir() if p.is_file()}
    assert apps == set(EXPECTED)
    assert {p.name for p in (APPS / "fixed").iterdir()} == apps


def test_every_pattern_is_found_with_the_providers_severity():
    found = findings(*(str(APPS / name) for name in EXPECTED))
    assert {(Path(f["path"]).name, f["code"], f["severity"]) for f in found} == {
        (name, code, severity) for name, (code, severity) in EXPECTED.items()}
    for f in found:
        assert f["line"] > 1 and f["column"] >= 1 and f["end_column"] > f["column"]
        assert f["data"]["predicts"] == catalog.get(f["code"]).predicts


def test_every_fixed_twin_is_clean():
    assert findings(str(APPS / "fixed")) == []


def test_fix_turns_each_mechanical_pattern_into_its_twin(tmp_path: Path):
    work = tmp_path / "apps"
    shutil.copytree(APPS, work, ignore=shutil.ignore_patterns("fixed"))
    diff = fix_paths([str(work)], write=True)
    assert {line.split("/")[-1] for line in diff.splitlines() if line.startswith("+++ ")} == MECHANICAL
    for name in EXPECTED:
        expected = APPS / "fixed" / name if name in MECHANICAL else APPS / name
        assert (work / name).read_text() == expected.read_text(), name
    assert fix_paths([str(work)], write=False) == ""


def test_node_modules_is_not_walked(tmp_path: Path):
    vendored = tmp_path / "node_modules" / "pkg"
    vendored.mkdir(parents=True)
    shutil.copy(APPS / "timestamp_in_system.ts", vendored / "index.ts")
    shutil.copy(APPS / "timestamp_in_system.ts", tmp_path / "app.ts")
    assert [Path(f["path"]).name for f in findings(str(tmp_path))] == ["app.ts"]


def hits(source: str, grammar: str = "typescript") -> list[tuple[str, str | None, int]]:
    found, _ = analyze(textwrap.dedent(source), "app.ts", grammar)
    return sorted((h.code, h.variant, h.line) for h in found)


HEAD = '''
import OpenAI from "openai";
const client = new OpenAI();
'''


@pytest.mark.parametrize("body,expected", [
    # a helper's return, a template literal, a const chain
    ('function stamp() { return `at ${Date.now()}`; }\n'
     'async function f(q) { const s = "Agent " + stamp(); const t = s;\n'
     '  await client.chat.completions.create({ model: "m", messages: [{ role: "system", content: t }, '
     '{ role: "user", content: q }] }); }', [("PG601", "partial", 4)]),
    # an arrow function bound to a name is a helper too; the latest message is not cached
    ('const id = () => crypto.randomUUID();\n'
     'async function f(q) { await client.responses.create({ model: "m", instructions: "static", '
     'input: `${id()} ${q}` }); }', []),
    # sorted keys, a replacer array, a literal object: no finding
    ('async function f(q, profile) { const keys = Object.keys(profile).sort();\n'
     '  await client.chat.completions.create({ model: "m", tools: keys.map((k) => ({ name: k })), messages: [\n'
     '  { role: "system", content: JSON.stringify(profile, ["name", "plan"]) + JSON.stringify({ a: 1 }) }, '
     '{ role: "user", content: q }] }); }', []),
    # the options object built first and passed by name, with a spread
    ('async function f(q, names: Set<string>) { const base = { model: "m" };\n'
     '  const params = { ...base, tools: [...names].map((n) => ({ name: n })),\n'
     '    messages: [{ role: "user", content: q }] };\n'
     '  await client.chat.completions.create(params); }', [("PG602", None, 5)]),
    # a static environment setting is no finding; a per-run one is
    ('async function f(q) { await client.chat.completions.create({ model: process.env.MODEL, messages: [\n'
     '  { role: "system", content: `${process.env.APP_NAME} ${process.env["RUN_ID"]}` }, '
     '{ role: "user", content: q }] }); }', [("PG601", "partial", 5)]),
    # for...in walks a registry's keys in the order plugins were added; a method calls a sibling through this
    ('class Bot { plugins = {}; add(t) { this.plugins[t.name] = t; }\n'
     '  tools() { const out = []; for (const k in this.plugins) out.push({ name: k }); return out; }\n'
     '  async run(q) { await client.chat.completions.create({ model: "m", tools: this.tools(), '
     'messages: [{ role: "user", content: q }] }); } }', [("PG602", None, 5)]),
    # a route handler written inline is a function of its own; a .map callback is a comprehension
    ('app.post("/chat", async (req, res) => {\n'
     '  await client.chat.completions.create({ model: "m", messages: [{ role: "system", content: `T ${Date.now()}` }, '
     '{ role: "user", content: req.body.q }] }); });\n'
     'const ids = ["a"].map((n) => { return { n, at: Date.now() }; });', [("PG601", "partial", 5)]),
    # an object passed in holds its keys in the order the caller inserted them: no finding
    ('async function f(q, reg) { await client.chat.completions.create({ model: "m", '
     'tools: Object.values(reg), messages: [{ role: "user", content: q }] }); }', []),
])
def test_flows(body: str, expected: list):
    assert hits(HEAD + body) == expected


def test_javascript_require_and_suppression_comment():
    source = '''
    const Anthropic = require("@anthropic-ai/sdk");
    const { v4: uuid } = require("uuid");
    const client = new Anthropic();
    async function f(q) {
      const a = uuid();
      const b = uuid();  // prefixguard: ignore[PG601]
      await client.messages.create({ model: "m", max_tokens: 9, system: `S ${a} ${b}`,
        messages: [{ role: "user", content: q }] });
    }
    '''
    assert hits(source, "javascript") == [("PG601", "uncached", 6)]


def test_unparseable_file_is_skipped_with_one_line(tmp_path: Path):
    (tmp_path / "broken.ts").write_text("client.messages.create(( {{{ ]]] ) ))) ;;; <<<>>> " * 5)
    (tmp_path / "types.d.ts").write_text("declare function create(x: string): void;\n")
    shutil.copy(APPS / "timestamp_in_system.ts", tmp_path / "app.ts")
    result = CliRunner().invoke(main, ["lint", "--format", "concise", str(tmp_path)])
    assert result.exit_code == 1, result.stderr
    assert "app.ts:7:15: PG601" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if line]
    assert len(warnings) == 1 and "skipped 1 file" in warnings[0] and "not linted" in warnings[0]


def test_fix_leaves_unsafe_cases_alone():
    source = textwrap.dedent('''
    import Anthropic from "@anthropic-ai/sdk";
    const client = new Anthropic();
    async function f(q) {
      await client.messages.create({ model: "m", max_tokens: 9, cache_control: { type: "ephemeral" },
        system: `Rules. Now ${Date.now()}. More rules.`, messages: [{ role: "user", content: q }] });
      await client.messages.create({ model: "m", max_tokens: 9, cache_control: { type: "ephemeral" },
        system: `Now ${Date.now()}`, messages: [{ role: "user", content: q }] });
    }
    ''')
    assert [h.code for h in analyze(source, "app.ts")[0]] == ["PG601", "PG601"]
    assert fix_text(source, "app.ts") == source   # static text after the value; no sentence before it


def test_a_minified_bundle_is_not_read(tmp_path: Path):
    """Vendored bundles (litellm's and mitmproxy's web UIs) took seconds each and are nobody's prompt code."""
    app = (APPS / "timestamp_in_system.ts").read_text()
    one_line = app.replace("\n", " ") + ";" + "var a=1;" * 1000
    (tmp_path / "vendor.js").write_text(one_line)
    (tmp_path / "app.min.js").write_text(app)
    assert analyze(one_line, "vendor.js", "javascript") == ([], 0)
    assert analyze(app + "\nvar a = 1;" * 250_000, "cli.js", "javascript") == ([], 0)   # over 2 MiB: a bundle
    assert findings(str(tmp_path)) == []
