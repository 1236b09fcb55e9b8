"""The contracts added with Bedrock and Gemini, and OpenAI's explicit mode, as policies: data from
rules/providers.toml, judged on parsed requests."""
from __future__ import annotations

import json
from pathlib import Path

from helpers.bench import load_bench

from prefixguard.contracts.providers import model_contract, providers
from prefixguard.judge.policies import make_policy, policy_name
from prefixguard.wire import parse_request

SYSTEM = "Ledger policy: reconcile every account nightly. " * 220


def responses(user: str, *, mode: str | None, system_point: bool) -> dict:
    developer = {"type": "input_text", "text": SYSTEM}
    if system_point:
        developer["prompt_cache_breakpoint"] = {}
    body = {"model": "gpt-5.6", "input": [
        {"role": "developer", "content": [developer]},
        {"role": "user", "content": [{"type": "input_text", "text": user, "prompt_cache_breakpoint": {}}]}]}
    if mode:
        body["prompt_cache_options"] = {"mode": mode}
    return body


def test_explicit_mode_reads_only_exactly_at_a_breakpoint():
    rules = providers()["openai"].breakpoint_caching
    policy = make_policy("openai")
    first = parse_request(json.dumps(responses("What failed last night? " * 5, mode="explicit", system_point=True)))
    assert policy.commit(first, 0.0).reason == "cold"
    later = parse_request(json.dumps(responses("And the night before? " * 5, mode="explicit", system_point=True)))
    got = policy.lookup(later, 60.0)
    assert got.reason == "hit" and got.cache_read == later.segments[0].tokens  # at the system breakpoint
    # no breakpoint where the shared prefix ends: no fallback to it (the implicit mode reads it)
    moved = parse_request(json.dumps(responses("And the night before? " * 5, mode="explicit", system_point=False)))
    assert policy.lookup(moved, 60.0).cache_read == 0
    # GPT-5.6's implicit (default) mode: a marked part is a breakpoint there too, and (measured) the end of a
    # developer prompt a write ran through is read back, marked or not; a shared prefix inside a message is not
    implicit = make_policy("openai")
    implicit.commit(parse_request(json.dumps(responses("What failed last night? " * 5, mode=None, system_point=True))), 0.0)
    for marked in (True, False):
        asked = responses("x " * 5, mode=None, system_point=marked)
        assert implicit.lookup(parse_request(json.dumps(asked)), 60.0).cache_read == later.segments[0].tokens
    assert implicit.lookup(parse_request(json.dumps(responses("What failed last week? " * 5, mode=None,
                                                              system_point=False))), 60.0).cache_read \
        == later.segments[0].tokens
    # the modes' own TTL
    assert policy.lookup(later, rules.ttl_seconds[rules.default_ttl] + 1).reason == "ttl_expired"


def test_bedrock_converse_is_judged_by_bedrock_numbers():
    body = {"system": [{"text": SYSTEM}, {"cachePoint": {"type": "default"}}],
            "messages": [{"role": "user", "content": [{"text": "hi"}]}]}
    path = "/model/us.anthropic.claude-haiku-4-5-20251001-v1%3A0/converse"
    prompt = parse_request(json.dumps(body), path=path)
    assert policy_name(prompt.api, prompt.model) == "bedrock"
    minimum = model_contract(prompt.api, prompt.model).min_cacheable_tokens
    assert minimum == next(m.min_cacheable_tokens for m in providers()["bedrock"].models
                           if m.prefix == "claude-haiku-4-5")
    policy = make_policy("bedrock")
    first = policy.commit(prompt, 0.0)
    expected = "below_minimum" if prompt.segments[0].tokens < minimum else "cold"
    assert first.reason == expected
    short = parse_request(json.dumps(body), path="/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse")
    sonnet = make_policy("bedrock")
    sonnet.commit(short, 0.0)
    assert sonnet.lookup(short, 10.0).cache_read == short.segments[0].tokens  # Sonnet's lower minimum
    assert sonnet.lookup(short, 10.0 + providers()["bedrock"].ttl_seconds["5m"] + 1).reason == "ttl_expired"


def test_gemini_minimum_is_the_models():
    body = {"systemInstruction": {"parts": [{"text": SYSTEM[:7000]}]}, "contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    flash = parse_request(json.dumps(body), path="/v1beta/models/gemini-2.5-flash:generateContent")
    three = parse_request(json.dumps(body), path="/v1beta/models/gemini-3-pro-preview:generateContent")
    assert policy_name("gemini", flash.model) == "gemini"
    lo, hi = (model_contract("gemini", m).min_cacheable_tokens for m in (flash.model, three.model))
    assert lo < flash.total_tokens < hi  # the same prompt: cacheable on 2.5 Flash, below 3.x's minimum
    policy = make_policy("gemini")
    policy.commit(flash, 0.0)
    policy.commit(three, 0.0)
    assert policy.lookup(flash, 5.0).cache_read > 0
    assert policy.lookup(three, 5.0).reason == "below_minimum"


def chat(model: str, *messages: tuple[str, str]) -> dict:
    return {"model": model, "messages": [{"role": r, "content": c} for r, c in messages]}


def test_gpt_5_6_implicit_mode_is_chosen_by_model_and_reads_exactly_at_the_latest_user_message():
    system = SYSTEM + " Current time: 2026-12-04T10:00:00Z."
    first = parse_request(json.dumps(chat("gpt-5.6", ("system", system), ("user", "What failed?"))))
    edited = parse_request(json.dumps(chat("gpt-5.6", ("system", system.replace("10:00:00", "10:05:00")),
                                           ("user", "What failed?"))))
    appended = parse_request(json.dumps(chat("gpt-5.6", ("system", system), ("user", "What failed?"),
                                             ("assistant", "The tax test."), ("user", "Why?"))))
    for model, mode in (("gpt-5.6", "implicit"), ("gpt-5.6-mini-2026-07-15", "implicit"), ("gpt-6", "implicit"),
                        ("gpt-5", None), ("gpt-4.1", None)):
        assert make_policy("openai").mode(parse_request(json.dumps(chat(model, ("user", "hi"))))) == mode, model
    policy = make_policy("openai")
    assert policy.commit(first, 0.0).cache_write == first.total_tokens   # written at the implicit breakpoint
    assert policy.lookup(edited, 60.0).cache_read == 0                 # no fallback to the unchanged prefix
    assert policy.lookup(appended, 60.0).cache_read == first.total_tokens  # exact: no 128-token steps
    rules = providers()["openai"].breakpoint_caching
    assert policy.lookup(appended, rules.ttl_seconds[rules.default_ttl] + 1).reason == "ttl_expired"
    older = make_policy("openai")           # GPT-5: the longest prefix, in 128-token steps
    older.commit(parse_request(json.dumps(chat("gpt-5", ("system", system), ("user", "What failed?")))), 0.0)
    read = older.lookup(parse_request(json.dumps(chat("gpt-5", ("system", system.replace("10:00:00", "10:05:00")),
                                                      ("user", "What failed?")))), 60.0).cache_read
    assert read > 1024 and (read - 1024) % 128 == 0
    # writes billed at 1.25x, reported as cache_write_tokens
    assert model_contract("openai-chat", "gpt-5.7").write_multiplier == {"default": rules.write_multiplier}
    from prefixguard.wire.openai_chat import usage
    got = usage({"prompt_tokens": 3000, "completion_tokens": 5,
                 "prompt_tokens_details": {"cached_tokens": 1200, "cache_write_tokens": 1800}})
    assert (got.cache_read, got.cache_write, got.uncached) == (1200, 1800, 0)


def test_deepseek_reads_whole_prefix_units_only():
    policy = make_policy("deepseek")
    question = "Reconcile the March ledger against the bank statement and list every mismatch. " * 12
    first = parse_request(json.dumps(chat("deepseek-chat", ("system", SYSTEM[:3000]), ("user", question))))
    policy.commit(first, 0.0)
    longer = parse_request(json.dumps(chat("deepseek-chat", ("system", SYSTEM[:3000]), ("user", question + " And April."))))
    # OpenAI's rule would read into the changed message; a unit is whole or not at all: the system prompt is
    # no unit yet (not a message end of the unit roles)
    assert policy.lookup(longer, 10.0).cache_read == 0
    policy.commit(longer, 10.0)   # ... but the common prefix of the two is one now
    third = parse_request(json.dumps(chat("deepseek-chat", ("system", SYSTEM[:3000]), ("user", "Something else."))))
    # a unit is stored in 64-token units: read to its last whole one
    assert policy.lookup(third, 20.0).cache_read == third.segments[0].tokens // 64 * 64
    turn = parse_request(json.dumps(chat("deepseek-chat", ("system", SYSTEM[:3000]), ("user", question),
                                         ("assistant", "Three mismatches."), ("user", "Fix them."))))
    assert policy.lookup(turn, 30.0).cache_read == first.total_tokens // 64 * 64  # the end of the first user input


def test_deepseek_reads_a_unit_only_once_it_was_kept():
    """A DeepSeek hit needs the prefix persisted first (the guide): maruel/genai's deepseek-flash sent the same
    prompt twice in one second and read 0 both times; repeats a second on read (`ready_seconds`: chatlas's
    deepseek-v4-flash tool loops, four times), V4 to its last whole 128 tokens. A unit it read is read again
    at once."""
    policy = make_policy("deepseek")
    ask = parse_request(json.dumps(chat("deepseek-v4-flash", ("system", SYSTEM[:3000]), ("user", "Reconcile."))))
    policy.commit(ask, 100.0)
    assert policy.lookup(ask, 100.0).cache_read == 0 and policy.lookup(ask, 100.5).cache_read == 0
    whole = ask.total_tokens // 128 * 128
    assert policy.ready == 1 and policy.lookup(ask, 101.0).cache_read == whole
    policy.commit(ask, 200.0)  # read, and used again: not written anew
    assert policy.lookup(ask, 200.5).cache_read == whole
    assert make_policy("openai").ready == 0  # OpenAI's repeats a second or three apart read (ruby_llm, crewAI)


def test_deepseek_v4_reads_whole_256_token_steps_a_second_on():
    """chatlas's deepseek-v4-flash tool loop (tests/data/public/chatlas): a first request of 297 tokens, then its
    tool result a second later, which read 256 of 353, and the answer's turn, which read 256 of 390. Predicted
    0 when what a request wrote was taken to be read only 5 s on; a V4 read is whole 128-token steps (256 or
    384, every one recorded). A read to its last whole step says its prefix ran up to a step further, so the
    ~230 tokens of DeepSeek's own tool text the body does not show may all sit in front of the user's message,
    as the bill has them: with them put after it, the third was predicted 128."""
    public = Path(__file__).resolve().parent / "data" / "public"
    rows = load_bench("real_traffic").measure(public / "chatlas", ("deepseek_tool_variations",)).rows
    assert [(r.reported_prompt, r.reported_read) for r in rows[1:]] == [(353, 256), (390, 256)]
    assert all(r.proxy_expected == r.sim_predicted == 256 and r.verdict == "hit" for r in rows[1:]), rows
    assert all(r.proxy_expected % 128 == 0 for r in rows)
    assert model_contract("openai-chat", "deepseek-v4-pro").token_step == 128
    assert model_contract("openai-chat", "deepseek-chat").token_step == 64


def test_a_read_no_recorded_request_wrote_is_read_again_at_once():
    """maruel/genai's deepseek-v4-pro square-root test, sent once whole and once streamed in the same second
    (tests/data/public/genai): the first read 256 of 337, a cache an earlier run left, and the second, the same
    body, read it again though nothing this session wrote was a second old. A reported read says the cache
    holds that prefix now; on a step contract up to a step past the read (here the whole 337-token prompt,
    read to its last 128-token step). It was held only up to the last part ending under 256, none here: the
    second was predicted 0."""
    public = Path(__file__).resolve().parent / "data" / "public"
    rows = load_bench("real_traffic").measure(public / "genai", ("deepseek_v4_pro_tools_sync_then_stream",)).rows
    assert [(r.reported_prompt, r.reported_read) for r in rows[:2]] == [(337, 256), (337, 256)]
    assert rows[1].proxy_expected == rows[1].sim_predicted == 256 and rows[1].verdict == "hit", rows[1]


def test_deepseek_renders_no_tools_under_tool_choice_none():
    """A tool loop's last request forces an answer with tool_choice "none": DeepSeek then renders no tool
    definition (maruel/genai's recordings: 337 tokens billed with tools, 90 without, though the history grew;
    read 0). Its prompt holds no tools part, so nothing written with them is read, and its bill teaches the
    scale nothing about them."""
    tools = [{"type": "function", "function": {"name": "ledger_lookup", "description": "Find an entry. " * 60,
                                               "parameters": {"type": "object", "properties": {}}}}]
    ask = chat("deepseek-v4-flash", ("user", "Reconcile March against the bank statement, entry by entry. " * 20))
    policy = make_policy("deepseek")
    with_tools = policy.rendered(parse_request(json.dumps({**ask, "tools": tools, "tool_choice": "auto"})))
    assert any(s.level == "tools" for s in with_tools.segments)
    policy.commit(with_tools, 0.0)
    last = policy.rendered(parse_request(json.dumps({**ask, "tools": tools, "tool_choice": "none"})))
    assert [s.level for s in last.segments if s.level == "tools"] == []
    assert last.total_tokens < with_tools.total_tokens and policy.lookup(last, 10.0).cache_read == 0
    assert policy.lookup(with_tools, 10.0).cache_read > 0   # sent with its tools again, it reads
    # OpenAI renders its tools whatever tool_choice says
    sent = parse_request(json.dumps({**ask, "model": "gpt-5", "tools": tools, "tool_choice": "none"}))
    assert make_policy("openai").rendered(sent) is sent


def test_providers_by_host_model_and_gateway_maker():
    cases = [
        (("openai-chat", "deepseek-chat", None), "deepseek"),
        (("openai-chat", "deepseek/deepseek-chat-v3.1", None), "deepseek"),         # OpenRouter: the maker's
        (("openai-chat", "mistral-large-latest", None), "mistral"),
        (("openai-chat", "mistralai/mistral-medium-3.1", None), "mistral"),
        (("openai-chat", "grok-4", None), "xai"), (("openai-responses", "x-ai/grok-code-fast-1", None), "xai"),
        (("openai-chat", "kimi-k2-0905-preview", None), "moonshot"), (("openai-chat", "moonshotai/kimi-k2", None), "moonshot"),
        (("openai-chat", "glm-4.6", None), "zai"), (("anthropic", "glm-4.6", None), "zai"),
        (("openai-chat", "z-ai/glm-4.6", None), "zai"),
        (("openai-chat", "MiniMax-M2", None), "minimax"), (("openai-chat", "minimax/minimax-m2", None), "minimax"),
        (("openai-chat", "qwen-plus", None), "qwen"), (("openai-chat", "qwen/qwen3-coder", None), "qwen"),
        (("openai-chat", "anthropic/claude-sonnet-4.6", None), "anthropic"),
        (("openai-chat", "openai/gpt-5.6", None), "openai"),
        # served by others: open weights under OpenAI's name, a Hugging Face repository, Groq by its host
        (("openai-chat", "openai/gpt-oss-120b", None), "compatible"),
        (("openai-chat", "Qwen/Qwen3-32B", None), "compatible"),
        (("openai-chat", "deepseek-ai/DeepSeek-V3", None), "compatible"),
        (("openai-chat", "llama-3.3-70b-versatile", "https://api.groq.com"), "groq"),
        (("openai-chat", "moonshotai/kimi-k2-instruct-0905", "https://api.groq.com:443"), "groq"),
        (("openai-chat", "deepseek-chat", "https://api.deepseek.com"), "deepseek"),
        (("anthropic", "claude-opus-5", None), "anthropic"), (("openai-chat", "my-local-model", None), "compatible"),
    ]
    from prefixguard.contracts.providers import provider_for
    for args, want in cases:
        assert provider_for(*args) == want, args
        assert policy_name(*args) == ("radix" if want == "compatible" else want)
    for name in ("deepseek", "mistral", "xai", "moonshot", "zai", "groq", "minimax", "qwen"):
        table = providers()[name]
        assert table.source and table.read and table.usage_fields, name
        assert make_policy(name).lookup(parse_request(json.dumps(chat("m", ("user", "hi")))), 0.0).cache_read == 0


def test_the_proxy_knows_a_provider_by_its_upstream_host(tmp_path):
    """Groq serves other makers' models under their names: its requests are known by the host they go to."""
    from prefixguard.capture.store import open_store
    from prefixguard.proxy.analysis import Analyzer, FlowState, Response

    body = chat("moonshotai/kimi-k2-instruct-0905", ("system", SYSTEM[:5000]), ("user", "Totals?"))
    answer = json.dumps({"choices": [], "usage": {"prompt_tokens": 1100, "completion_tokens": 2,
                                                  "prompt_tokens_details": {"cached_tokens": 0}}}).encode()
    analyzer = Analyzer(store=str(tmp_path / "cap.db"))
    for i, upstream in enumerate((("https", "api.groq.com", 443), ("https", "openrouter.ai", 443))):
        flow = FlowState(id=str(i), ts=float(i), sent=float(i), path="/openai/v1/chat/completions", upstream=upstream,
                         body=json.dumps(body).encode())
        analyzer.request(flow)
        assert analyzer.policy_for(flow.prompt, flow.upstream).provider == ("groq", "moonshot")[i]
        analyzer.finish(Response(id=str(i), status=200, headers_at=float(i), ended_at=float(i), body=answer))
    analyzer.close()
    with open_store(tmp_path / "cap.db") as db:
        assert [r["upstream"] for r in db.rows()] == ["https://api.groq.com", "https://openrouter.ai"]


def test_lint_runs_the_rules_of_any_prefix_cache_for_the_new_providers(tmp_path):
    """The new tables name no lint rule of their own: lint_as keeps the rules those requests had before."""
    from helpers.cli import CliRunner

    from prefixguard.cli import main

    system = "You reconcile the ledger. Current time: 2026-12-04T10:11:12Z."
    for model in ("deepseek-chat", "glm-4.6", "grok-4", "qwen-plus", "MiniMax-M2", "kimi-k2-0905-preview", "mistral-large-latest"):
        body = tmp_path / f"{model}.json"
        body.write_text(json.dumps(chat(model, ("system", system), ("user", "hi"))))
        result = CliRunner().invoke(main, ["lint", "--format", "json", str(body)])
        assert result.exit_code == 1, (model, result.output)
        assert "PG101" in {f["code"] for f in json.loads(result.stdout)["findings"]}, model


def test_reasoning_a_client_does_not_send_back_is_no_cached_output() -> None:
    """gpt-5-mini, three turns on Chat and on Responses (Mirascope's public cassettes, tests/data/public):
    request 1 generated 1,753 / 1,944 tokens, 768 / 832 of them reasoning, generated first. Request 2 carries
    back the answer alone: Chat never sends reasoning, and Responses drops an earlier turn's reasoning item
    (here sent by its id) before a new user message. So the cache request 1 left ends where its prompt did,
    3,584 (its 3,651 in whole 128s); counted as cached, its output took the read to the whole prompt
    (4,646 / 4,776), which no provider reads. gpt-5-mini read 2,816 (bench/RESULTS.md)."""
    public = Path(__file__).resolve().parent / "data" / "public"
    rows = [r for r in load_bench("real_traffic").measure(public, ("mirascope",)).rows if r.model == "gpt-5-mini"]
    second = [r for r in rows if r.n == 2]
    assert len(second) == 2 and {r.reported_prompt for r in second} == {4646, 4776}
    assert all(r.proxy_expected == r.sim_predicted == 3584 for r in second), second
    # the reasoning item sent by id before the new user message is billed nothing
    folder = public / "mirascope" / "test_caching_multi_turn_conversation_openai_gpt_5_mini"
    prompt = parse_request((folder / "0002.request.json").read_bytes(), path="/v1/responses")
    assert [s.tokens for s in prompt.segments if s.kind == "thinking"] == [0]
    assert abs(prompt.total_tokens - 4776) <= 5


def test_gpt_5_6_implicit_reads_back_to_the_end_of_the_system_prompt() -> None:
    """GPT-5.6 on Chat and Responses (Arize-ai/openinference's public cassettes, tests/data/public): request 1
    writes a ~5,400-token system prompt and a question; request 2 asks another question and reads 5,382 /
    5,415 / 5,392 / 5,435, the system prompt's end, writing the 10-token question. The guide's implicit
    breakpoint sits on the latest user message only, so these were predicted 0 (a read by traffic not seen)."""
    public = Path(__file__).resolve().parent / "data" / "public"
    rows = [r for r in load_bench("real_traffic").measure(public, ("openinference",)).rows if (r.model or "").startswith("gpt-5.6")]
    reads = [r for r in rows if r.reported_read]
    assert len(reads) == 4 and {r.reported_read for r in reads} == {5382, 5415, 5392, 5435}
    for r in reads:
        assert r.proxy_expected == r.sim_predicted and abs(r.proxy_expected - r.reported_read) <= 5, r
        assert r.verdict == "hit"


def test_gpt_4o_mini_reads_to_within_a_step_inside_a_dense_part() -> None:
    """openinference's gpt-4o-mini cassette: a 2,000-character random prefix (1,370 tokens) sent twice with
    another last character reads 1,280. A match resolved to 512 characters predicted 1,024."""
    public = Path(__file__).resolve().parent / "data" / "public"
    rows = load_bench("real_traffic").measure(public / "openinference", ("test_tool_calls_test_cached_tokens",)).rows
    assert [(r.reported_read, r.proxy_expected, r.sim_predicted) for r in rows] == [(0, 0, 0), (1280, 1280, 1280)]


def test_a_read_stops_short_of_the_prompts_last_tokens(shared_data: Path) -> None:
    """OpenAI prefills a prompt's last tokens itself: the same prompt sent again reads its 128-step prefix
    only where the prompt runs at least `prefill_tail_tokens` past that step. ruby_llm's gpt-4.1-nano sends
    2,065 tokens twice and reads 1,920 (17 past 2,048: a step less); crewAI's gpt-4.1 sends 1,185 twice and
    reads 1,152 (33 past it: kept)."""
    public = Path(__file__).resolve().parent / "data" / "public"
    nano = load_bench("real_traffic").measure(public, ("ruby_llm",)).rows
    assert [(r.reported_prompt, r.reported_read, r.proxy_expected, r.sim_predicted) for r in nano] == [
        (2065, 0, 0, 0), (2065, 1920, 1920, 1920)]
    crewai = load_bench("real_traffic").measure(shared_data / "recorded", ("crewai",)).rows
    kept = [r for r in crewai if r.cassette.startswith("llms_openai_test_openai_") and r.reported_read and not r.first]
    assert kept and all(r.reported_prompt - r.reported_read >= 32 and r.proxy_expected == r.reported_read for r in kept)


def test_a_providers_own_system_text_in_front_is_read_whatever_the_first_part_says() -> None:
    """grok-4 puts a hidden system prompt (about 680 tokens) before every request and reads it from cache,
    whatever the request's own first message (agentjido/req_llm's fixtures, tests/data/public/req_llm):
    "Hello world!" reads 680 of 687 after a request with tools, "Hi there!" then 679 of 687. Once a read
    has shown unseen tokens in front, a request whose first part differs still reads them; before, both
    were predicted 0 (and the second called a hit on a foreign cache)."""
    public = Path(__file__).resolve().parent / "data" / "public"
    rows = load_bench("real_traffic").measure(public, ("req_llm",)).rows
    assert [(r.reported_prompt, r.reported_read) for r in rows] == [(954, 834), (687, 680), (687, 679)]
    first, edited, again = rows
    assert first.proxy_expected == 0  # nothing seen before it: what it read is a cache no history here shows
    # a read past all of our tokens (834 of 954 with the tools) shows the front: our tokens at our count,
    # the rest of what it read in front (at the ratio's bound, 1.5, it came out 626). Its tools went and it
    # asks something else: what it holds past the change is new, nothing to prefill again, so a hit
    assert abs(edited.proxy_expected - edited.reported_read) <= 0.05 * edited.reported_read
    assert edited.verdict == "hit" and edited.reprefill == 0
    assert abs(again.proxy_expected - again.reported_read) <= 0.01 * again.reported_read  # as the last read showed
    assert all(r.proxy_expected == r.sim_predicted for r in rows)


def test_a_gemini_interaction_session_is_judged_by_the_gemini_contract() -> None:
    """tidyverse/ellmer's tool loop on gemini-3.7-flash through the Interactions API (tests/data/public/ellmer):
    each request is read as an interaction, billed as its usage says (total_input_tokens), kept at the gaps
    its answers were made at, and judged below Gemini 3's minimum, as the provider read nothing; before, a
    Responses request with no usage understood."""
    from prefixguard.replay import sources

    public = Path(__file__).resolve().parent / "data" / "public"
    rows = load_bench("real_traffic").measure(public, ("ellmer",)).rows
    assert [(r.reported_prompt, r.reported_read, r.proxy_expected, r.sim_predicted) for r in rows] == [
        (68, 0, 0, 0), (183, 0, 0, 0), (286, 0, 0, 0), (365, 0, 0, 0)]
    assert {r.verdict for r in rows} == {"below_minimum"} and {r.model for r in rows} == {"gemini-3.7-flash"}
    trace = sources.load(public / "ellmer" / "google-tool")
    assert [r.ts for r in trace.requests] == [0.0, 3.0, 5.0, 6.0]
    assert trace.requests[0].said.made_calls and not trace.requests[1].said.made_calls  # requires_action


def test_groq_caches_only_the_models_it_lists() -> None:
    """Groq's prompt caching covers four models (kimi-k2, the gpt-oss family: `caching_models`). llama3-8b-8192
    sent the same 18 tokens six times (openllmetry's recording, tests/data/public) and groq/compound-mini
    its second turn (langchain-groq's): every one read 0. Judged as prefix caching on every model, the five
    repeats were predicted 18 each and the turn 16, each called a miss of the server's; now the model caches
    no prefix, which no read of 0 misses. A model Groq lists keeps the prefix rule."""
    public = Path(__file__).resolve().parent / "data" / "public"
    bench = load_bench("real_traffic")
    rows = (bench.measure(public / "traceloop", ("groq_test_chat_legacy",)).rows
            + bench.measure(public / "langchain", ("groq_test_code_interpreter",)).rows)
    assert [(r.model, r.reported_read) for r in rows] == [("llama3-8b-8192", 0)] * 6 + [("groq/compound-mini", 0)]
    assert all(r.proxy_expected == r.sim_predicted == 0 for r in rows)
    assert {r.verdict for r in rows} == {"no_prefix_caching"}
    for model, read in (("openai/gpt-oss-120b", True), ("moonshotai/kimi-k2-instruct-0905", True), ("llama3-8b-8192", False)):
        request = {"model": model, "messages": [{"role": "user", "content": "hi " * 50}]}
        prompt = parse_request(json.dumps(request).encode(), path="/openai/v1/chat/completions")
        policy = make_policy("groq")
        policy.commit(prompt, 0.0)
        assert policy.lookup(prompt, 1.0).cache_read == (prompt.total_tokens if read else 0), model


def test_a_later_version_of_a_family_a_table_sells_is_that_sellers() -> None:
    """gpt-6-astra, a model no table lists, sent "Say hi." and two 37-token turns on the Responses API
    (langchain-openai's cassette, tests/data/public; its scrubber replaced the URL, so the model alone names
    the provider). As a model OpenAI does not sell it took the contract of a server one runs, no minimum:
    predicted 9 and 13 of prompts under OpenAI's 1,024. A later version of a family OpenAI lists (gpt-5.6)
    is OpenAI's, with GPT-5.6's breakpoint modes."""
    from prefixguard.contracts.providers import breakpoint_caching, provider_for

    public = Path(__file__).resolve().parent / "data" / "public"
    rows = load_bench("real_traffic").measure(public / "langchain", ("openai_test_configuration_update_block",)).rows
    assert [(r.model, r.reported_prompt, r.reported_read) for r in rows] == [("gpt-6-astra", 9, 0), ("gpt-6-astra", 37, 0), ("gpt-6-astra", 37, 0)]
    assert all(r.proxy_expected == r.sim_predicted == 0 and r.verdict == "below_minimum" for r in rows)
    assert provider_for("openai-responses", "gpt-6-astra") == "openai" and breakpoint_caching("openai", "gpt-6-astra")
    assert provider_for("openai-chat", "gpt-oss-120b") == "compatible"  # not a version of gpt: served by others
    assert provider_for("openai-chat", "my-finetune-7b") == "compatible"


def test_openai_caches_gpt_4o_and_later_and_names_its_own_hosts() -> None:
    """traceloop/openllmetry's recordings (tests/data/public/traceloop): gpt-3.5-turbo on api.openai.com sent
    the same 15 tokens four times, and an Azure OpenAI deployment named `openllmetry-testing` (its answers say
    gpt-35-turbo, then gpt-4.1-mini) five times; every one read 0. Neither model name is one OpenAI lists, so
    both were judged as a server one runs (any prefix, no minimum): 7 repeats predicted whole. The API's and
    Azure's hosts name OpenAI whatever the model; gpt-3.5 and gpt-4 (before gpt-4o) cache nothing."""
    from prefixguard.contracts.providers import provider_contract, provider_for

    public = Path(__file__).resolve().parent / "data" / "public"
    rows = load_bench("real_traffic").measure(public / "traceloop", ("openai_test_chat", "azure_test_chat")).rows
    # (each cassette's 2024 answer has no cache field: no row)
    assert [(r.model, r.reported_read) for r in rows] == [("gpt-3.5-turbo", 0)] * 3 + [("openllmetry-testing", 0)] * 4
    assert all(r.proxy_expected == r.sim_predicted == 0 for r in rows)
    assert {r.verdict for r in rows} == {"below_minimum"}  # under OpenAI's 1,024 either way
    azure = "https://traceloop-stg.openai.azure.com"
    assert provider_for("openai-chat", "openllmetry-testing", azure) == "openai"
    assert provider_for("openai-chat", "ft:gpt-4o-mini:acme::abc", "https://api.openai.com") == "openai"
    assert provider_for("openai-chat", "openllmetry-testing") == "compatible"  # no host: a server one runs
    assert [provider_contract("openai", m).prefix_caching for m in ("gpt-3.5-turbo", "gpt-4-turbo", "gpt-4o", "gpt-4.1", "gpt-4.5-preview")] \
        == [False, False, True, True, True]
    # a prefix ending in a number ends there: gpt-4-1106-preview is a GPT-4 Turbo, not a gpt-4.1 (4.1 reads 4-1)
    assert not provider_contract("openai", "gpt-4-1106-preview").prefix_caching
    # above the minimum too: a model before gpt-4o reads nothing, and says why
    request = {"model": "gpt-4-turbo", "messages": [{"role": "user", "content": "The same long question. " * 300}]}
    prompt = parse_request(json.dumps(request).encode(), path="/v1/chat/completions")
    policy = make_policy("openai")
    policy.commit(prompt, 0.0)
    got = policy.lookup(prompt, 1.0)
    assert prompt.total_tokens > 1024 and (got.cache_read, got.reason) == (0, "no_prefix_caching")


def test_gpt_4o_mini_caches_by_the_tokens_it_runs_not_those_it_bills_for_an_image() -> None:
    """crewAI's cassettes (tests/data/public/crewai_sdist): one request with one PNG, sent twice 2-5 s apart,
    bills 14,214 tokens on gpt-4o-mini and 472 on gpt-4o, which bills the image at 1/33 of the rate. Neither
    read anything the second time: the model runs ~472 tokens, under OpenAI's 1,024. Taken at its bill,
    gpt-4o-mini's repeat was predicted 14,080 (five such repeats recorded, all read 0)."""
    from prefixguard.model.media import run_tokens

    public = Path(__file__).resolve().parent / "data" / "public"
    rows = [r for r in load_bench("real_traffic").measure(public, ("crewai_sdist",)).rows
            if r.cassette.startswith("TestAgentMultimodalOpenAI.")]
    assert sorted((r.model, r.reported_prompt, r.reported_read) for r in rows) == sorted(
        [("gpt-4o", 472, 0)] * 2 + [("gpt-4o-mini", 14214, 0)] * 2)
    assert all(r.proxy_expected == r.sim_predicted == 0 and r.verdict == "below_minimum" for r in rows), rows
    folder = public / "crewai_sdist" / "TestAgentMultimodalOpenAI.test_image_file_openai-gpt-4o-mini_"
    prompt = parse_request((folder / "0001.request.json").read_bytes(), path="/v1/chat/completions")
    images = sum(s.tokens for s in prompt.segments if s.kind == "image")
    assert images == 14167 and abs(run_tokens(prompt) - 472) <= 0.05 * 472  # the image at gpt-4o's rate
    prompt.model = "gpt-4o"
    assert run_tokens(prompt) == prompt.total_tokens  # billed as run


def test_a_prompt_under_the_minimum_is_below_minimum_whatever_changed_before_it() -> None:
    """gpt-5-nano with a remote MCP tool (langchain-openai's cassette, tests/data/public): five requests of 183-832
    billed tokens, all under OpenAI's 1,024. The third sends an earlier turn's items again rewritten: it was
    called `miss_prefix_changed` (598 tokens to prefill again) though no prompt of its size reads anything;
    the last two, billed 337 where ours counted over the minimum, were `cold`. The provider's bill under
    the minimum settles it: `below_minimum`, all five."""
    public = Path(__file__).resolve().parent / "data" / "public"
    rows = load_bench("real_traffic").measure(public / "langchain", ("openai_test_mcp_builtin_zdr",)).rows
    assert [r.reported_prompt for r in rows] == [183, 832, 832, 337, 337]
    assert all(r.verdict == "below_minimum" and r.reported_read == r.proxy_expected == 0 for r in rows), rows


def test_model_studio_reads_whole_256_token_blocks_once_written_a_few_seconds() -> None:
    """Alibaba Model Studio's implicit cache (`[qwen]`: token_step 256, ready_seconds 4, as 0x1eef/llm.rb's
    recordings show: a 285-token prompt read 256 three times and a 350-token one 256; each second request 1-3 s
    after its first wrote read 0, seven times). The token-plan host is Model Studio's."""
    from prefixguard.contracts.providers import provider_for

    host = "https://token-plan.ap-southeast-1.maas.aliyuncs.com"
    assert provider_for("openai-chat", "deepseek-v4-flash-0731", host) == "qwen"
    request = {"model": "qwen-plus", "messages": [{"role": "user", "content": "Which tests failed last night? " * 48}]}
    prompt = parse_request(json.dumps(request).encode(), path="/compatible-mode/v1/chat/completions")
    assert 256 < prompt.total_tokens < 512
    policy = make_policy("qwen")
    policy.commit(prompt, 0.0)
    assert [policy.lookup(prompt, t).cache_read for t in (2.0, 10.0)] == [0, 256]
