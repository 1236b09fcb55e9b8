"""Issue 28 item 1: no secret readable anywhere the tool writes. A table of secret forms goes through the
real proxy (mitmproxy with the prefixguard addon, a loopback upstream replaying a real recording) with
the real Redis session index and a real SQLite capture: in a user message, JSON-escaped, and one by one
in a system prompt that changes with every request (so each change is described in the detail column
and the lint output). None may be readable, whole or as 16 characters of it, in the capture file and
its WAL, any key or value under the index's prefix in Redis, the console lines, the capture's exports
(JSON lines and OTLP spans), or `prefixguard lint`'s text, concise, github and json output on the
same requests. A URL's password is not printed either: an --upstream's at start, an --index's when
Redis is down."""
from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.cli import CliRunner
from helpers.fleet_servers import redis_prefix
from helpers.proxy import tenant_rows
from helpers.upstream import Upstream

from prefixguard.cli import main
from prefixguard.judge.index import IndexDown
from prefixguard.judge.redis_index import RedisIndex
from prefixguard.proxy.addon import PrefixGuard
from prefixguard.proxy.serve import ProxyThread

LEGACY_JSON = "openllmetry/test_prompt_caching_test_anthropic_prompt_caching_legacy"
B64 = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKjMzEfYyjiWA4R4"


def _pem(kind: str, seed: str) -> tuple[str, str]:
    body = "\n".join((seed + B64)[i:i + 64] for i in range(0, 192, 64))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----", body


def _wrapped(plain: str) -> tuple[str, str]:
    text = base64.b64encode(plain.encode()).decode()
    return text, text


# name: (text as it stands in a prompt, what of it is secret). 16 characters of the secret, anywhere
# in anything written, count as readable.
SECRETS: dict[str, tuple[str, str]] = {name: (v, v) if isinstance(v, str) else v for name, v in {
    "anthropic": "sk-ant-api03-" + "Qw3rTyUi0p" * 9 + "-AA",
    "anthropic_admin": "sk-ant-admin01-" + "Zm8Kp2Lq" * 10 + "-BB",
    "openai_project": "sk-proj-" + "Nv4Ht7Rb2Wx" * 6,
    "openai_legacy": "sk-" + "T3BlbkFJ" * 6,
    "openai_service": "sk-svcacct-" + "Pq9Mz3Vk" * 6,
    "openrouter": "sk-or-v1-" + "0a1b2c3d4e5f6789" * 4,
    "aws_access_key": "AKIAZ7Q3XK2P9WMVB4TN",
    "aws_session_key": "ASIAY4R8WQ2M6PLK9XJD",
    "aws_secret": ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9Qk3LmN",
                   "wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9Qk3LmN"),
    "bedrock_long_term": "ABSK" + base64.b64encode(
        b"BedrockAPIKey-u7x2-at-123456789012:Zp4Lq8Rt2Vx6Nb1Mc5Kd9Fg3Hj7").decode(),
    "bedrock_short_term": "bedrock-api-key-" + base64.b64encode(
        b"bedrock.amazonaws.com/?Action=CallWithBearerToken&X-Amz-Security-Token=Qm9Lk2").decode(),
    "google_api": "AIzaSyD" + "k3Jf8Lq2Pz" * 3 + "Xy9a",
    "google_oauth": "ya29.a0AfB_byC" + "Hq7Lm2Nx9Pk4" * 4,
    "github_classic": "ghp_" + "a1B2c3D4e5F6" * 3,
    "github_fine": "github_pat_11AB" + "CdEf3GhIj4KlMn5" * 5,
    "gitlab": "glpat-" + "xY7zK2mN9pQ4rS6tU8vW",
    "slack_bot": "xoxb-1234567890123-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx",
    "slack_app": "xapp-1-A0123456789-1234567890123-" + "f0e1d2c3b4a5" * 4,
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIiwiYWRtaW4iOnRydWV9.Xk3Lq9Pz2Rt7Vn4Mb8Kc1Wd6Hf5Jg0Ys",
    "stripe_secret": "sk_live_" + "51HqLmN2oPq3RsT4uVw5XyZ6",
    "stripe_restricted": "rk_live_" + "51HqLmN2oPq3RsT4uVw5XyZ7",
    "stripe_webhook": "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "sendgrid": "SG.ngeVfQFYQlKU0ufo8x5d1A." + "TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr",
    "huggingface": "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    "npm": "npm_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2",
    "pypi": "pypi-AgEIcHlwaS5vcmcCJDk" + "3ZTRhYjU2LWM5ZDEtNGE" * 3,
    "groq": "gsk_" + "Ab3Cd5Ef7Gh9Ij2Kl4Mn6Op8Qr0St1Uv3Wx5Yz7Ab9Cd2Ef4Gh6",
    "xai": "xai-" + "Qw3Er5Ty7Ui9Op2As4Df6Gh8Jk0Lz1Xc3Vb5Nm7Qw9Er2Ty4Ui6Op8As0Df1Gh3Jk5Lz7Xc9Vb2Nm4Qw6E",
    "perplexity": "pplx-" + "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4",
    "replicate": "r8_" + "Zx1Cv2Bn3Mq4Wl5Ek6Rj7Th8Yg9Uf0Id1Os",
    "digitalocean": "dop_v1_" + "0123456789abcdef" * 4,
    "databricks": "dapi" + "0123456789abcdef0123456789abcdef",
    "shopify": "shpat_" + "0123456789abcdef0123456789abcdef",
    "langsmith": "lsv2_pt_" + "0123456789abcdef0123456789abcdef_a1b2c3d4e5",
    "tavily": "tvly-" + "Ab3Cd5Ef7Gh9Ij2Kl4Mn6Op8Qr0St1Uv",
    "atlassian": "ATATT3xFfGF0" + "Tk9Lm2Nq4Rs6Uv8Wx0Yz1Ab3Cd5" * 3,
    "azure_storage": ("DefaultEndpointsProtocol=https;AccountName=store7;AccountKey="
                      + "Kq9Lm2Nx4Rp6Tv8Wz0Yb1Ac3De5Fg7Hi9Jk+Lm/No" * 2 + "==",
                      "Kq9Lm2Nx4Rp6Tv8Wz0Yb1Ac3De5Fg7Hi9Jk+Lm/No" * 2),
    "pem_rsa": _pem("RSA ", "R"),
    "pem_pkcs8": _pem("", "P"),
    "pem_openssh": _pem("OPENSSH ", "O"),
    "pem_encrypted": _pem("ENCRYPTED ", "E"),
    "base64_anthropic_key": _wrapped("sk-ant-api03-" + "Wr4pPed9Key7" * 6),
    "base64_aws_credentials": _wrapped('{"aws_access_key_id": "AKIAQ4R7T2W9X3Y6Z8B5", "region": "us-east-1"}'),
    "base64_pem": _wrapped(_pem("RSA ", "W")[0]),
    "basic_auth": ("Authorization: Basic " + base64.b64encode(b"deploy-bot:Zq8!mW3xLp9#").decode(),
                   base64.b64encode(b"deploy-bot:Zq8!mW3xLp9#").decode()),
    "bearer_opaque": ("curl -H 'Authorization: Bearer op4QUe7tOk3n9Zx2Lm5Vb8Nc1Kd6Rf0Tg' https://api.internal",
                      "op4QUe7tOk3n9Zx2Lm5Vb8Nc1Kd6Rf0Tg"),
    "postgres_url": ("postgres://app:Pg-S3cret-Pw-2026x@db.internal:5432/app", "Pg-S3cret-Pw-2026x"),
    "redis_url": ("redis://:R3d1s-Pw-x9q7Zt@cache:6379/0", "R3d1s-Pw-x9q7Zt"),
    "env_password": ("DB_PASSWORD=Tr0ub4dor&3xyzQ", "Tr0ub4dor&3xyzQ"),
    "prose_password": ("the admin password is hunter2-Zq9!xWv4", "hunter2-Zq9!xWv4"),
    "client_secret": ("client_secret: GOCSPX-Lq2Mz8Nx4Pk6Rv0Tb3Wd", "GOCSPX-Lq2Mz8Nx4Pk6Rv0Tb3Wd"),
    "api_key_assignment": ("OPENWEATHER_API_KEY=9f3Kq7Lm2Nx8Pv4Rt6", "9f3Kq7Lm2Nx8Pv4Rt6"),
    "opaque_password_in_json": ('{"host": "db1", "passwd": "opaqueSecretWordXy"}', "opaqueSecretWordXy"),
}.items()}
# Opaque random values: secret only by how random they look, so redacted where only a secret can be (a
# system prompt); each request's system prompt holds a new one, as a per-session credential would.
RANDOM = ("Q7xZp2LmN9vK4rT8wY3sB6dF", "Hk3Vn8Rq1Xz6Mb4Tw9Lc2Pj7", "Zt5Gy0Ud8Wa3Nq6Ke1Xv4Rb9")


def _readable(secret: str, text: str) -> bool:
    """The secret, or 16 characters of it, in text (also with '/' JSON-escaped, or a newline escaped)."""
    variants = {secret, secret.replace("/", "\\/"), secret.replace("\n", "\\n")}
    for form in variants:
        if len(form) <= 16:
            if form in text:
                return True
            continue
        if any(form[i:i + 16] in text for i in range(0, len(form) - 15)):
            return True
    return False


def _leaks(where: str, text: str, api_key: str) -> list[str]:
    found = [f"{name} in {where}" for name, (_, core) in SECRETS.items() if _readable(core, text)]
    found += [f"random {r} in {where}" for r in RANDOM if r in text]
    return found + ([f"api key in {where}"] if api_key in text else [])


def _bodies(recorded: Path, key: str) -> list[dict[str, Any]]:
    base = json.loads((recorded / LEGACY_JSON / "0001.request.json").read_text())
    every = "\n".join(f"{name}: {text}" for name, (text, _) in SECRETS.items())
    every += f"\nmy gateway key, pasted: {key}"  # known by the request's header alone
    first = {**base, "system": [{"type": "text", "text": "You are a deploy assistant. " * 30}],
             "messages": [{"role": "user", "content": [{"type": "text", "text": "Here is the config:\n" + every}]},
                          *base["messages"][1:]]}
    out = [first]
    names = list(SECRETS)
    for i, name in enumerate(names):  # the system prompt changes at its start, one secret a request
        system = f"Credentials for this session ({name}): {SECRETS[name][0]} / token {RANDOM[i % len(RANDOM)]}\n"
        out.append({**first, "system": [{"type": "text", "text": system + "You are a deploy assistant. " * 30}]})
    return out


@pytest.fixture(scope="module")
def run(shared_data: Path, tmp_path_factory: pytest.TempPathFactory):
    recorded = shared_data / "recorded"
    folder = tmp_path_factory.mktemp("secrets")
    db = folder / "capture.db"
    key = "tenant-key-of-no-known-shape-" + "Kx7Lm2Pq9" * 3  # a self-hosted gateway's own key format
    lines: list[str] = []
    bodies = _bodies(recorded, key)
    with redis_prefix() as index, Upstream(recorded) as up:
        addon = PrefixGuard(console=lines.append)
        with ProxyThread([up.url], addon=addon, store=str(db), index=index) as px:
            with httpx.Client(base_url=px.url, timeout=30) as client:
                for n, body in enumerate(bodies):
                    raw = json.dumps(body)
                    if n == 0:  # and the first request's keys once more, JSON-escaped as some SDKs write them
                        raw = raw.replace("Here is the config:", "Again: \\u0073k-ant-api03-" + "Qw3rTyUi0p" * 9
                                          + "-AA and AKIA\\u005a7Q3XK2P9WMVB4TN; Here is the config:")
                    r = client.post("/v1/messages", content=raw, headers={"x-api-key": key,
                                                                          "content-type": "application/json"})
                    assert r.status_code == 200, r.text
            rows = tenant_rows(db, key, len(bodies), 60)
            assert len(rows) == len(bodies)
            # everything the index holds, keys and values, compressed values opened
            import redis
            url, prefix = index.split("?prefix=")
            client = redis.Redis.from_url(url)
            held = []
            for k in client.scan_iter(match=f"{prefix}*", count=1000):
                kind = client.type(k)
                values = ([client.get(k)] if kind == b"string" else
                          [v for kv in client.hgetall(k).items() for v in kv] if kind == b"hash" else
                          client.lrange(k, 0, -1) if kind == b"list" else [])
                held.append(k)
                for v in values:
                    held.append(v)
                    try:
                        held.append(zlib.decompress(v))
                    except zlib.error:
                        pass
            client.close()
            redis_text = b"\n".join(held).decode("latin-1")
            assert any(b"e:" in k for k in held)  # the session entries are there
    yield {"db": db, "lines": lines, "redis": redis_text, "key": key, "bodies": bodies, "folder": folder,
           "rows": rows}


def test_no_secret_in_the_capture_file(run: dict[str, Any]) -> None:
    files = "".join(p.read_bytes().decode("latin-1") for p in run["db"].parent.glob(run["db"].name + "*"))
    assert _leaks("capture", files, run["key"]) == []
    details = " ".join(str(r["detail"]) for r in run["rows"] if r["detail"])
    assert details.count("[redacted]") >= len(SECRETS) // 2   # the changes were described, secrets cut out


def test_no_secret_in_the_redis_index(run: dict[str, Any]) -> None:
    assert len(run["redis"]) > 10_000
    assert _leaks("redis", run["redis"], run["key"]) == []


def test_no_secret_on_the_console(run: dict[str, Any]) -> None:
    assert len(run["lines"]) >= len(run["bodies"])
    assert _leaks("console", "\n".join(run["lines"]), run["key"]) == []


@pytest.mark.parametrize("fmt", ["jsonl", "otlp-json"])
def test_no_secret_in_the_exports(run: dict[str, Any], fmt: str) -> None:
    result = CliRunner().invoke(main, ["capture", "export", str(run["db"]), "-o", fmt])
    assert result.exit_code == 0, result.stderr
    assert len(result.stdout) > 10_000
    assert _leaks(f"export {fmt}", result.stdout, run["key"]) == []


@pytest.mark.parametrize("fmt", ["text", "concise", "github", "json", "sarif"])
def test_no_secret_in_lint_output(run: dict[str, Any], fmt: str) -> None:
    """lint over the requests as sent (the user's own files): what its findings quote is redacted too."""
    requests = run["folder"] / "requests.jsonl"
    requests.write_text("".join(json.dumps(b) + "\n" for b in run["bodies"]))
    result = CliRunner().invoke(main, ["lint", "--no-tokens", "--select", "ALL", "-o", fmt, str(requests)])
    assert result.exit_code in (0, 1), result.stderr
    assert result.exit_code == 1 and len(result.stdout) > 1000  # it found the changed system prompts
    assert _leaks(f"lint {fmt}", result.stdout + result.stderr, run["key"]) == []


def test_index_password_not_printed_when_redis_is_down() -> None:
    lines: list[str] = []
    index = RedisIndex("redis://:Idx-Pw-7781zq@127.0.0.1:1/0", warn=lines.append)
    with pytest.raises(IndexDown) as caught:
        index.run(lambda: index.client.ping())
    assert lines and "unreachable" in lines[0]
    assert not any("Idx-Pw-7781zq" in line for line in lines) and "Idx-Pw-7781zq" not in str(caught.value)
    index.close()


def test_upstream_and_index_passwords_not_printed_at_start(shared_data: Path, tmp_path: Path) -> None:
    with Upstream(shared_data / "recorded") as up, redis_prefix() as index:
        upstream = up.url.replace("http://", "http://deploy:Up-Pw-5521xk@")
        url, prefix = index.split("?prefix=")
        index = url.replace("redis://", "redis://:Idx-Pw-7781zq@") + "?prefix=" + prefix
        proc = subprocess.Popen([sys.executable, "-m", "prefixguard.cli", "proxy", "--port", "0",
                                 "--upstream", upstream, "--upstream", f"/openai={upstream}", "--index", index,
                                 "--store", str(tmp_path / "c.db")],
                                stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            deadline, seen = time.monotonic() + 30, []
            while time.monotonic() < deadline and not any("listening" in s for s in seen):
                line = proc.stderr.readline()
                if not line and proc.poll() is not None:
                    break
                seen.append(line)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                out, err = proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
        text = "".join(seen) + err + out
        assert "listening" in text, text
        assert "127.0.0.1" in text and "Up-Pw-5521xk" not in text and "Idx-Pw-7781zq" not in text
        assert "deploy:" not in text


def test_recorded_requests_are_kept_as_sent(shared_data: Path) -> None:
    """Precision: the real recordings hold no secret, so redaction keeps every body byte for byte, and
    no system prompt of them has a value taken for a random credential (ids, hashes, signatures stay)."""
    from prefixguard.proxy.redact import redact_body, system_secrets
    from prefixguard.utils.errors import InputError
    from prefixguard.wire import parse_request

    bodies = sorted((shared_data / "recorded").rglob("*.request.json"))
    assert len(bodies) > 500
    changed, flagged, systems = [], [], 0
    for path in bodies:
        text = path.read_text()
        if redact_body(text) != text:
            changed.append(path.name)
        for api_path in ("/v1/messages", "/v1/chat/completions", "/v1/responses"):
            try:
                prompt = parse_request(text.encode(), path=api_path, count_tokens=False)
            except InputError:
                continue
            systems += any(s.level == "system" for s in prompt.segments)
            if system_secrets(prompt):
                flagged.append((path.name, system_secrets(prompt)))
            break
    assert changed == [] and flagged == []
    assert systems > 100   # system prompts were read
