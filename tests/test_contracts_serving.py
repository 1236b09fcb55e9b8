"""A self-hosted server's cache settings, read from the server itself over real loopback HTTP (vLLM's
/metrics info metric, SGLang's /get_server_info), from [tool.prefixguard] and from the command line, in
that order; and what they change in a prediction (`prefixguard diff`)."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.contracts import serving
from prefixguard.contracts.providers import compatible_settings
from prefixguard.judge.policies import make_policy
from prefixguard.lint import config
from prefixguard.utils.errors import InputError
from prefixguard.wire import parse_request

VLLM_METRICS = """# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="%d",cache_dtype="auto",enable_prefix_caching="%s",gpu_memory_utilization="0.9",\
is_attention_free="False",num_gpu_blocks="2282",prefix_caching_hash_algo="sha256",sliding_window="None"} 1.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-0.6B"} 0.0
"""


def serve(routes: dict[str, tuple[str, bytes]]) -> Iterator[str]:
    """A real HTTP server on loopback answering GET path -> (content type, body); 404 elsewhere."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            found = routes.get(self.path)
            self.send_response(200 if found else 404)
            body = found[1] if found else b"not found"
            self.send_header("content-type", found[0] if found else "text/plain")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def defaults() -> Iterator[None]:
    serving.reset()
    yield
    serving.reset()


@pytest.fixture
def vllm() -> Iterator[str]:
    yield from serve({"/metrics": ("text/plain; version=0.0.4", (VLLM_METRICS % (32, "True")).encode())})


def test_vllm_says_its_block_size_on_metrics(vllm: str) -> None:
    got = serving.read_server(vllm + "/v1")
    assert (got.block_tokens, got.prefix_caching) == (32, True) and "vllm:cache_config_info" in got.source


def test_a_model_whose_server_caches_no_prefix_expects_no_read() -> None:
    for url in serve({"/metrics": ("text/plain", (VLLM_METRICS % (16, "False")).encode())}):
        serving.apply(flags={"server": url})
    assert compatible_settings().prefix_caching is False
    prompt = parse_request(json.dumps({"model": "hybrid-mamba", "messages": [{"role": "user", "content": "hi " * 400}]}))
    policy = make_policy("radix")
    policy.commit(prompt, 0.0)
    assert policy.lookup(prompt, 1.0)[::3] == (0, "no_prefix_caching")


def test_sglang_says_its_page_size_on_server_info() -> None:
    info = {"model_path": "Qwen/Qwen3-0.6B", "page_size": 1, "disable_radix_cache": False}
    for url in serve({"/get_server_info": ("application/json", json.dumps(info).encode())}):
        got = serving.read_server(url)
    assert (got.block_tokens, got.prefix_caching) == (1, True)


def test_a_server_that_says_nothing_is_one_clear_error() -> None:
    for url in serve({"/metrics": ("text/plain", b"# nothing here\nprocess_cpu_seconds_total 1.0\n")}):
        with pytest.raises(InputError, match="no cache settings found"):
            serving.read_server(url)


def test_pyproject_then_flags(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.prefixguard]\nserver = "vllm"\nmin-prefix = 64\n')
    config.load(None, config.Layer(), cwd=tmp_path)
    assert compatible_settings()[:3] == (16, 64, True)           # vLLM's default block, the file's minimum
    serving.apply(flags={"block-size": 128})
    config.load(None, config.Layer(), cwd=tmp_path)              # the file read again: the flag stays on top
    assert compatible_settings()[:3] == (128, 64, True)
    (tmp_path / "pyproject.toml").write_text('[tool.prefixguard]\nblock-size = "16"\n')
    with pytest.raises(InputError, match="block-size must be a whole number"):
        config.load(None, config.Layer(), cwd=tmp_path)


def diff_json(*args: str) -> dict:
    result = CliRunner().invoke(main, ["diff", *args, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_diff_reads_whole_blocks_of_the_server_it_is_told(tmp_path: Path, vllm: str) -> None:
    system = "You answer questions about the shop's ledger, one line each. " * 30
    a = {"model": "Qwen/Qwen3-0.6B", "messages": [{"role": "system", "content": system},
                                                 {"role": "user", "content": "March?"}]}
    b = {**a, "messages": [*a["messages"], {"role": "assistant", "content": "41 invoices."},
                           {"role": "user", "content": "April?"}]}
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    anyprefix = diff_json(str(tmp_path / "a.json"), str(tmp_path / "b.json"))["reused_tokens"]
    blocks = diff_json(str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--server", vllm)["reused_tokens"]
    assert anyprefix % 32 and blocks == anyprefix // 32 * 32
    assert diff_json(str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--no-prefix-caching")["reused_tokens"] == 0


def test_the_proxy_worker_process_gets_the_flags_settings(tmp_path: Path) -> None:
    """The proxy's analysis runs in another process, made by a pickled factory: it carries the settings."""
    import pickle
    import subprocess
    import sys

    from prefixguard.cli.proxy import _analyzer_factory

    serving.apply(flags={"server": "vllm", "min-prefix": 48})
    factory = tmp_path / "factory.pickle"
    factory.write_bytes(pickle.dumps(_analyzer_factory()))
    code = ("import pickle, sys; from prefixguard.contracts.providers import compatible_settings\n"
            f"pickle.loads(open({str(factory)!r}, 'rb').read())(store=None).close()\n"
            "print(tuple(compatible_settings()[:3]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "(16, 48, True)", out.stderr


def test_the_proxy_says_no_prefix_caching_not_a_miss(tmp_path: Path) -> None:
    """A server that caches no prefix answers cached_tokens 0 every time: that is its contract, not a miss,
    whether the prompt repeated or changed. Without the setting the repeat is a miss."""
    from prefixguard.capture.store import open_store
    from prefixguard.proxy.analysis import Analyzer, FlowState, Response

    system = "You keep the shop's ledger. " * 200
    bodies = [{"model": "nvidia/Nemotron-H-8B", "messages": [{"role": "system", "content": s},
                                                           {"role": "user", "content": "Totals?"}]}
              for s in (system, system, system.replace("ledger", "books", 1))]
    answer = json.dumps({"choices": [], "usage": {"prompt_tokens": 1210, "completion_tokens": 3,
                                                  "prompt_tokens_details": {"cached_tokens": 0}}}).encode()

    def verdicts(name: str) -> list[tuple[str, int]]:
        analyzer = Analyzer(store=str(tmp_path / name))
        for i, body in enumerate(bodies):
            analyzer.request(FlowState(id=str(i), ts=float(i), sent=float(i), path="/v1/chat/completions", body=json.dumps(body).encode()))
            analyzer.finish(Response(id=str(i), status=200, headers_at=float(i), ended_at=float(i), body=answer))
        analyzer.close()
        with open_store(tmp_path / name) as db:
            return [(r["verdict"], r["expected_cached"]) for r in db.rows()]

    serving.apply(flags={"prefix-caching": False})
    assert verdicts("off.db") == [("no_prefix_caching", 0)] * 3
    serving.reset()
    assert verdicts("on.db")[1][0].startswith("miss_")


def test_diff_takes_pyproject_keys_and_flags_over_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    system = "You answer questions about the shop's ledger, one line each. " * 30
    a = {"model": "Qwen/Qwen3-32B", "messages": [{"role": "system", "content": system}, {"role": "user", "content": "March?"}]}
    b = {**a, "messages": [*a["messages"], {"role": "user", "content": "April?"}]}
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    (tmp_path / "pyproject.toml").write_text('[tool.prefixguard]\nblock-size = 64\n')
    monkeypatch.chdir(tmp_path)
    anyprefix = parse_request(json.dumps(a)).total_tokens
    assert anyprefix % 64
    assert diff_json("a.json", "b.json")["reused_tokens"] == anyprefix // 64 * 64
    assert diff_json("a.json", "b.json", "--block-size", "1")["reused_tokens"] == anyprefix
    (tmp_path / "pyproject.toml").write_text('[tool.prefixguard]\nprefix-caching = "no"\n')
    result = CliRunner().invoke(main, ["diff", "a.json", "b.json"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and "prefix-caching must be true or false" in result.stderr
