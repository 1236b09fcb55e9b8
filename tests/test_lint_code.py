"""`prefixguard lint` on Python source (issue 31, first slice): the example apps in examples/code/python/
are each found, their fixed twins are clean, fix_paths turns each mechanical pattern into its twin, and
findings are provider-aware, suppressible, and go through the same formats, baseline and --fail-on."""
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
from prefixguard.lint.code.python import analyze
from prefixguard.utils.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
APPS = ROOT / "examples" / "code" / "python"
# each app: the rule it shows and the severity the provider gives it
EXPECTED = {
    "timestamp_in_system.py": ("PG601", "error"),        # Anthropic, automatic caching: a full miss
    "request_id_in_system.py": ("PG601", "warning"),     # OpenAI: a partial hit lost
    "tools_from_set.py": ("PG602", "warning"),
    "tools_from_registry.py": ("PG602", "warning"),
    "json_dumps_in_system.py": ("PG603", "warning"),
    "uuid_on_breakpoint.py": ("PG604", "error"),
    "helper_date_bedrock.py": ("PG601", "error"),        # Bedrock, cachePoint after the helper's text
    "langchain_random_persona.py": ("PG601", "warning"),
}
# fixed by hand: moving them is not a trailing f-string part in the same call (helper, whole block, message object)
NOT_MECHANICAL = {"uuid_on_breakpoint.py", "helper_date_bedrock.py", "langchain_random_persona.py"}


def lint(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["lint", *args])
    return result.exit_code, result.stdout, result.stderr


def findings(*args: str) -> list[dict]:
    code, out, err = lint("--format", "json", *args)
    assert code in (0, 1), err
    return json.loads(out)["findings"]


def test_every_app_is_listed_and_has_a_twin():
    apps = {p.name for p in APPS.glob("*.py")}
    assert apps == set(EXPECTED)
    assert {p.name for p in (APPS / "fixed").glob("*.py")} == apps


def test_every_pattern_is_found_with_the_providers_severity():
    found = findings("--select", "ALL", *(str(APPS / name) for name in EXPECTED))
    by_file = {(Path(f["path"]).name, f["code"], f["severity"]) for f in found}
    assert by_file == {(name, code, severity) for name, (code, severity) in EXPECTED.items()}
    for f in found:
        assert f["line"] > 1 and f["column"] >= 1 and f["end_column"] > f["column"]
        assert f["data"]["predicts"] == catalog.get(f["code"]).predicts


def test_every_fixed_twin_is_clean():
    code, out, err = lint("--select", "ALL", "--format", "json", str(APPS / "fixed"))
    assert code == 0, out + err
    data = json.loads(out)
    assert data["findings"] == []


def test_fix_paths_turns_each_pattern_into_its_twin(tmp_path: Path):
    work = tmp_path / "apps"
    shutil.copytree(APPS, work, ignore=shutil.ignore_patterns("fixed"))
    diff = fix_paths([str(work)], write=False)
    assert all((work / name).read_text() == (APPS / name).read_text() for name in EXPECTED)   # a dry run
    changed = {line.split("/")[-1] for line in diff.splitlines() if line.startswith("+++ ")}
    assert changed == set(EXPECTED) - NOT_MECHANICAL
    assert fix_paths([str(work)], write=True) == diff
    for name in EXPECTED:
        expected = (APPS / "fixed" / name) if name not in NOT_MECHANICAL else (APPS / name)
        assert (work / name).read_text() == expected.read_text(), name
    assert fix_paths([str(work)], write=False) == ""   # nothing left to fix


def test_fix_paths_honours_excludes_and_reports_a_missing_path(tmp_path: Path):
    shutil.copy(APPS / "tools_from_set.py", tmp_path / "app.py")
    assert fix_paths([str(tmp_path)], write=False, excluded=lambda path: path.name == "app.py") == ""
    assert "+    for name in sorted(enabled):" in fix_paths([str(tmp_path)], write=False)
    with pytest.raises(InputError):
        fix_paths([str(tmp_path / "missing")], write=False)


ANTHROPIC = '''
import anthropic
from datetime import datetime
client = anthropic.Anthropic()

def answer(question):
    now = datetime.now()
    {body}
'''


def codes(body: str, template: str = ANTHROPIC) -> list[tuple[str, str | None]]:
    body = textwrap.dedent(body).strip().replace("\n", "\n    ")
    hits, _ = analyze(textwrap.dedent(template).replace("{body}", body))
    return [(h.code, h.variant) for h in hits]


@pytest.mark.parametrize("body,expected", [
    # Anthropic: in the block with the breakpoint / before a later breakpoint / after the last one / no breakpoint
    ('client.messages.create(model="m", max_tokens=9, system=[{"type": "text", "text": f"T {now}", '
     '"cache_control": {"type": "ephemeral"}}], messages=[{"role": "user", "content": question}])',
     [("PG604", None)]),
    ('client.messages.create(model="m", max_tokens=9, system=f"T {now}", messages=[{"role": "user", "content": '
     '[{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]}, '
     '{"role": "user", "content": question}])',
     [("PG601", None)]),
    ('client.messages.create(model="m", max_tokens=9, tools=[{"name": "t", "cache_control": {"type": "ephemeral"}}], '
     'system=f"T {now}", messages=[{"role": "user", "content": question}])', []),
    ('client.messages.create(model="m", max_tokens=9, system="T " + str(now), '
     'messages=[{"role": "user", "content": q}])',
     [("PG601", "uncached")]),
    # the latest user message is after every cached part: fine
    ('client.messages.create(model="m", max_tokens=9, cache_control={"type": "ephemeral"}, system="static", '
     'messages=[{"role": "user", "content": f"{question} (asked at {now})"}])', []),
    # OpenAI: a system message or an earlier message is a partial hit lost; the last message is fine
    ('client.chat.completions.create(model="m", messages=[{"role": "system", "content": "Now: %s" % now}, '
     '{"role": "user", "content": question}])', [("PG601", "partial")]),
    ('client.responses.create(model="m", instructions="Now: {}".format(now), input=question)', [("PG601", "partial")]),
    ('client.responses.create(model="m", instructions="static", input=f"{question} {now}")', []),
    # Gemini and LiteLLM cache implicitly; Bedrock without a cachePoint caches nothing
    ('client.models.generate_content(model="m", config={"system_instruction": f"T {now}"}, contents=question)',
     [("PG601", "partial")]),
    ('import litellm\nlitellm.completion(model="m", messages=[{"role": "system", "content": f"T {now}"}, '
     '{"role": "user", "content": question}])', [("PG601", "partial")]),
    ('client.converse(modelId="m", system=[{"text": f"T {now}"}], messages=[{"role": "user", "content": '
     '[{"text": question}]}])', [("PG601", "uncached")]),
    # a function that is not an SDK call is no sink
    ('completion(model="m", messages=[{"role": "system", "content": f"T {now}"}, {"role": "user", "content": q}])',
     []),
])
def test_provider_aware_findings(body: str, expected: list):
    assert codes(body) == expected


def test_flows_through_helpers_and_sorted_clears_order():
    source = '''
    import json, time, uuid, os
    from openai import OpenAI
    client = OpenAI()
    TOOLS = {"b": {"name": "b"}, "a": {"name": "a"}}

    def stamp(prefix):
        return prefix + str(time.time())

    def run(q, names: set, request_id):
        system = stamp("Agent. ")
        extra = json.dumps({"k": 1}, sort_keys=True) + os.getenv("MODEL_NAME", "")
        tools = [TOOLS[n] for n in sorted(names)] + list(TOOLS.values())
        client.chat.completions.create(model="m", tools=tools, messages=[
            {"role": "system", "content": system + extra},
            {"role": "system", "content": f"trace {request_id} {uuid.uuid4()}"},
            {"role": "user", "content": q}])
    '''
    hits, calls = analyze(textwrap.dedent(source))
    assert calls == 1
    assert sorted((h.code, h.key.split(":")[0]) for h in hits) == [
        ("PG601", "clock"), ("PG601", "request-id"), ("PG601", "uuid")]


def test_static_helpers_of_a_class_and_literal_json():
    source = '''
    import json
    from datetime import datetime
    from openai import OpenAI
    client = OpenAI()

    class Prompts:
        @staticmethod
        def system():
            return "Agent. Now: " + datetime.now().strftime("%d %B %Y %H:%M")

    def run(q):
        client.chat.completions.create(model="m", messages=[
            {"role": "system", "content": Prompts.system() + json.dumps({"mode": "strict", "n": 2})},
            {"role": "user", "content": q}])
    '''
    hits, _ = analyze(textwrap.dedent(source))
    assert [(h.code, h.variant, h.line) for h in hits] == [("PG601", "partial", 10)]


def test_suppression_comment_on_the_line(tmp_path: Path):
    app = tmp_path / "app.py"
    source = (APPS / "timestamp_in_system.py").read_text()
    line = 'now = datetime.now().isoformat(timespec="seconds")'
    app.write_text(source.replace(line, line + "  # prefixguard: ignore[PG601]"))
    assert findings(str(app)) == []
    app.write_text(source.replace(line, line + "  # prefixguard: ignore[PG603]"))
    assert [f["code"] for f in findings(str(app))] == ["PG601"]


def test_unparseable_file_is_skipped_with_one_line_and_others_linted(tmp_path: Path):
    (tmp_path / "broken.py").write_text("def broken(:\n    client.messages.create(\n")
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: ascii -*-\nx = '\xff' # messages.create\n")
    shutil.copy(APPS / "timestamp_in_system.py", tmp_path / "app.py")
    code, out, err = lint("--format", "concise", str(tmp_path))
    assert code == 1, err
    assert "app.py:10:11: PG601" in out
    warnings = [line for line in err.splitlines() if line]
    assert len(warnings) == 1 and "skipped 2 files" in warnings[0] and "not linted" in warnings[0]


def test_sarif_github_baseline_and_fail_on(tmp_path: Path):
    app = tmp_path / "app.py"
    shutil.copy(APPS / "request_id_in_system.py", app)   # a warning only
    code, out, _ = lint("--format", "sarif", str(app))
    result = json.loads(out)["runs"][0]["results"][0]
    region = result["locations"][0]["physicalLocation"]["region"]
    assert result["ruleId"] == "PG601" and result["level"] == "warning"
    assert (region["startLine"], region["startColumn"]) == (9, 89)
    code, out, _ = lint("--format", "github", str(app))
    assert code == 1 and out.startswith("::warning file=") and "line=9" in out
    assert lint("--fail-on", "error", str(app))[0] == 0
    baseline = tmp_path / "baseline.json"
    assert lint("--baseline", str(baseline), "--write-baseline", str(app))[0] == 0
    assert lint("--baseline", str(baseline), str(app))[0] == 0
    assert lint("--select", "PG602", str(app))[0] == 0


def test_fix_text_leaves_unsafe_cases_alone():
    # the volatile value is not trailing: static text follows it
    source = textwrap.dedent('''
    import anthropic, datetime
    client = anthropic.Anthropic()
    def f(q):
        client.messages.create(model="m", max_tokens=9, cache_control={"type": "ephemeral"},
                               system=f"Rules. Now {datetime.datetime.now()}. More rules.",
                               messages=[{"role": "user", "content": q}])
    ''')
    assert [h.code for h in analyze(source)[0]] == ["PG601"]
    assert fix_text(source) == source


def test_a_cycle_of_names_and_deep_call_chains_end_quickly():
    """Found on mitmproxy/http.py (`fields = fields` then iterating fields.items()): it looped forever."""
    source = textwrap.dedent('''
    import anthropic
    client = anthropic.Anthropic()
    REG = {}
    def add(k):
        REG[k] = 1
    def f(fields, q):
        fields = fields
        a = b
        b = a
        c = REG
        d = c
        names = [k for k, v in fields.items()] + [k for k in b.keys()] + [k for k in d.keys()]
        x = ''' + "s.m(" * 60 + "1" + ")" * 60 + '''
        client.messages.create(model="m", max_tokens=9, tools=names, messages=[{"role": "user", "content": q}])
    ''')
    hits, calls = analyze(source)
    assert calls == 1 and [(h.code, h.line) for h in hits] == [("PG602", 13)]   # the registry only


def test_only_a_registry_filled_at_run_time_makes_the_tool_order_volatile():
    """A dict holds its keys in insertion order: one the code builds the same way on every request (a
    parameter, a local, an attribute set in __init__) sends its tools in the same order. Found on
    pydantic-ai (models/huggingface.py: the agent's tool_defs)."""
    source = textwrap.dedent('''
    from openai import OpenAI
    client = OpenAI()

    class Agent:
        def __init__(self, tools):
            self.fixed = {t["name"]: t for t in tools}
            self.plugins = {}

        def plug(self, tool):
            self.plugins[tool["name"]] = tool

        def run(self, q, tool_defs: dict):
            local = {}
            for t in [{"name": "a"}, {"name": "b"}]:
                local[t["name"]] = t
            tools = [*tool_defs.values(), *self.fixed.values(), *local.values(), *self.plugins.values()]
            client.chat.completions.create(model="m", tools=tools, messages=[{"role": "user", "content": q}])
    ''')
    hits, _ = analyze(source)
    assert [(h.code, h.message.split(" decides")[0]) for h in hits] == [("PG602", "iteration over .values()")]
    assert (hits[0].line, hits[0].column) == (17, 79)   # self.plugins.values()


def test_langchain_prompt_template_system_part_only():
    source = textwrap.dedent('''
    import uuid
    from langchain_core.prompts import ChatPromptTemplate

    def build():
        rid = uuid.uuid4()
        return ChatPromptTemplate.from_messages([("system", f"Agent {rid}"), ("human", "{question}")])

    def build_fixed():
        return ChatPromptTemplate.from_messages([("system", "Agent"), ("human", f"{uuid.uuid4()} {{question}}")])
    ''')
    hits, calls = analyze(source)
    assert calls == 2 and [(h.code, h.variant, h.line) for h in hits] == [("PG601", "partial", 6)]


def test_lint_diff_shows_the_fixes_and_lint_fix_makes_them(tmp_path: Path):
    mechanical = sorted(set(EXPECTED) - NOT_MECHANICAL)
    for name in mechanical:
        shutil.copy(APPS / name, tmp_path / name)
    code, out, err = lint("--diff", str(tmp_path))
    assert code == 1 and err == ""
    assert {line.split("/")[-1] for line in out.splitlines() if line.startswith("+++ ")} == set(mechanical)
    assert all((tmp_path / n).read_text() == (APPS / n).read_text() for n in mechanical)   # --diff changes nothing
    code, out, err = lint("--fix", "--select", "ALL", str(tmp_path))
    assert (code, err) == (0, f"prefixguard: fixed {len(mechanical)} files\n"), out + err   # then nothing is left
    assert all((tmp_path / n).read_text() == (APPS / "fixed" / n).read_text() for n in mechanical)
    assert lint("--diff", str(tmp_path))[:2] == (0, "")
    assert lint("--fix", "--diff", str(tmp_path))[0] == 2   # one or the other


def test_a_helper_imported_from_another_file_of_the_tree(tmp_path: Path):
    app = tmp_path / "app"
    (app / "prompts").mkdir(parents=True)
    (app / "__init__.py").write_text("")
    (app / "prompts" / "__init__.py").write_text("")
    (app / "prompts" / "system.py").write_text(textwrap.dedent('''
        import time

        def system_prompt(name):
            return f"You are {name}. Now: {time.time()}"

        def static_prompt(name):
            return f"You are {name}."
    '''))
    (app / "util.py").write_text("import uuid\n\ndef session():\n    return str(uuid.uuid4())\n")
    (app / "main.py").write_text(textwrap.dedent('''
        from openai import OpenAI
        from app.prompts.system import system_prompt, static_prompt
        from .util import session
        client = OpenAI()

        def run(q):
            client.chat.completions.create(model="m", messages=[
                {"role": "system", "content": system_prompt("Acme") + static_prompt("Acme") + session()},
                {"role": "user", "content": q}])
    '''))
    found = findings("--select", "ALL", str(app))
    assert sorted((Path(f["path"]).name, f["line"], f["code"]) for f in found) == [("main.py", 9, "PG601")] * 2
    assert sorted(f["message"].split(" (")[0] for f in found) == ["time.time() via system_prompt()",
                                                                  "uuid.uuid4() via session()"]


def test_a_volatile_argument_of_a_helper_that_sends_the_prompt():
    source = textwrap.dedent('''
    import anthropic, uuid
    from datetime import datetime
    client = anthropic.Anthropic()

    def ask(system, question, names):
        tools = [{"name": n} for n in names]
        return client.messages.create(model="m", max_tokens=9, system=system, tools=tools,
                                      messages=[{"role": "user", "content": question}])

    def handler(question):
        ask(f"Agent. Now {datetime.now()}", question, sorted({"b", "a"}))
        ask("Agent.", f"{uuid.uuid4()} {question}", {"b", "a"})
    ''')
    hits, calls = analyze(source)
    assert calls == 1
    assert sorted((h.code, h.variant, h.line) for h in hits) == [("PG601", "uncached", 12), ("PG602", None, 7)]


def test_a_date_written_to_the_day_is_info_only():
    """Today's date changes once a day, the rounding PG601 advises: info, on every provider."""
    source = textwrap.dedent('''
    import anthropic
    from datetime import date, datetime
    client = anthropic.Anthropic()

    def f(q):
        day = datetime.now().strftime("%Y-%m-%d")
        client.messages.create(model="m", max_tokens=9, cache_control={"type": "ephemeral"},
                               system=f"Today: {day}. Also {date.today():%A %d %B}. {datetime.now().date()}",
                               messages=[{"role": "user", "content": q}])
        client.messages.create(model="m", max_tokens=9, cache_control={"type": "ephemeral"},
                               system=f"Now: {datetime.now():%d %B %H:%M}", messages=[{"role": "user", "content": q}])
    ''')
    hits, _ = analyze(source)
    assert sorted((h.line, h.code, h.variant or "") for h in hits) == [
        (7, "PG601", "daily"), (9, "PG601", "daily"), (9, "PG601", "daily"), (12, "PG601", "")]
    assert catalog.get("PG601").severity_of("daily") == "info"


def test_values_that_only_pass_near_a_source_are_not_findings():
    """Found on real packages: a response parsed from a request that carried a JWT with a timestamp
    (langchain-community zhipuai), a request's JSON parsed back (kinetica), a hook-input object with a
    timestamp field whose tools field was sent (praisonaiagents). None of these reaches the prompt."""
    source = textwrap.dedent('''
    import json, time
    from langchain_core.messages import SystemMessage
    from openai import OpenAI
    client = OpenAI()

    def token():
        return f"jwt {time.time()}"

    def to_message(d):
        return SystemMessage(content=d["content"])

    def fetch(http):
        body = http.post("/chat", headers={"Authorization": token()}, data=json.dumps({"a": 1, "b": [2]}))
        return [to_message(m) for m in json.loads(body)["messages"]]

    def tools_after_hook(tools, run_hook, Event):
        event = Event(timestamp=str(time.time()), tools=tools)
        run_hook(event)
        return event.tools

    def ask(q, tools):
        client.chat.completions.create(model="m", tools=tools_after_hook(tools, print, dict),
                                       messages=[{"role": "user", "content": q}])
    ''')
    hits, calls = analyze(source)
    assert calls == 2 and hits == []


def test_a_volatile_argument_of_a_helper_in_another_file_that_sends_the_prompt(tmp_path: Path):
    (tmp_path / "llm.py").write_text(textwrap.dedent('''
        import anthropic, time
        client = anthropic.Anthropic()

        def ask(system, question):
            started = time.time()   # the helper's own clock value goes to a log, not to the caller's findings
            print(started)
            return client.messages.create(model="m", max_tokens=9, cache_control={"type": "ephemeral"},
                                          system=system, messages=[{"role": "user", "content": question}])
    '''))
    (tmp_path / "handler.py").write_text(textwrap.dedent('''
        from datetime import datetime
        from llm import ask

        def handle(question):
            return ask(f"You are Acme's agent. Now: {datetime.now()}", question)
    '''))
    found = findings("--select", "ALL", str(tmp_path))
    assert [(Path(f["path"]).name, f["line"], f["code"], f["severity"]) for f in found] == [
        ("handler.py", 6, "PG601", "error")]
    assert "(line 8 of llm.py)" in found[0]["message"]
    assert fix_paths([str(tmp_path)], write=False) == ""   # the prompt is built in llm.py: no fix in handler.py


def test_a_class_method_does_not_pass_its_arguments_into_its_result():
    """Found on litellm (responses/mcp/chat_completions_handler.py): the tools a handler class returns
    for a trace id are not the trace id; a module's function (textwrap.dedent) keeps its argument."""
    source = textwrap.dedent('''
    import litellm, textwrap, time
    from proxy.mcp import Handler

    async def run(messages, litellm_trace_id):
        tools = await Handler.process_tools(trace_id=litellm_trace_id)
        system = textwrap.dedent(f"Agent. Now {time.time()}")
        await litellm.acompletion(model="m", tools=tools, messages=[{"role": "system", "content": system}, *messages])
    ''')
    hits, _ = analyze(source)
    assert [(h.code, h.line, h.message.split(" (")[0]) for h in hits] == [("PG601", 7, "time.time()")]
