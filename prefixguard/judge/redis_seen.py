"""A session entry (prompt, item, time) as the Redis index stores it: compressed JSON with its secrets
redacted (never pickle: whoever can write to Redis must not run code in the proxy), and read back."""

from __future__ import annotations

import base64
import json
import re
import zlib
from array import array
from hashlib import blake2b
from typing import Any

from prefixguard.model.fingerprint import Chain
from prefixguard.model.prompt import Prompt, Segment
from prefixguard.utils.random_tokens import high_entropy
from prefixguard.utils.redaction import current_secrets, redact_text


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# A part whose text redaction changed keeps no key: this stands in for it, a hash of the key as sent
# (marshal never writes a first byte of 0, so it equals no request's own key: that part reads as changed).
_REDACTED_KEY = b"\0redacted:"


def _redacted(value: Any, secrets: list[str]) -> Any:
    """A JSON value with every secret of its strings (keys and values) replaced."""
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {redact_text(k, secrets): _redacted(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v, secrets) for v in value]
    return value


_KEY_CHAR_ESCAPE = re.compile(r"\\u00(2[bdef]|3[0-9d]|[46][1-9a-f]|[57][0-9a]|5f)|\\(/)", re.I)


def _unescaped(text: str) -> str:
    """JSON text with the escapes that spell a key's characters (letters, digits, + - . / = _) decoded, so
    that redaction sees a key written `\\u0073k-ant-...`; quotes and backslashes stay escaped."""
    if "\\" not in text:
        return text
    return _KEY_CHAR_ESCAPE.sub(lambda m: m.group(2) or chr(int(m.group(1), 16)), text)


def _system_secrets(p: Prompt) -> list[str]:
    return list(
        dict.fromkeys(t for s in p.segments if s.level == "system" for t in high_entropy(p.text[s.start : s.end]))
    )


def encode_seen(seen: Any) -> bytes:
    """A session entry (prompt, item, time) as compressed JSON, its secrets redacted first: what compare
    reads of an earlier request (each part's value and text, tokens, breakpoints, settings), the
    fingerprint chain and each part's hash. A part that redaction changed keeps a hash of its key, not
    the key: where it holds a secret it reads as changed against the next request's own part, and
    nothing else of it is readable. Text between the parts (the body's other fields) is not kept."""
    p: Prompt = seen.prompt
    secrets = list(dict.fromkeys([*current_secrets(), *_system_secrets(p)]))  # the request's keys too
    clean = "\\u" not in p.text and "\\/" not in p.text and redact_text(p.text, secrets) == p.text
    segments, pieces, at = [], [], 0
    for s in p.segments:
        raw = p.text[s.start : s.end]
        text, value, header = (
            (raw, s.value, s.header)
            if clean
            else (redact_text(_unescaped(raw), secrets), _redacted(s.value, secrets), _redacted(s.header, secrets))
        )
        kept = clean or (text == raw and value == s.value and header == s.header)
        key = s.key if kept else _REDACTED_KEY + blake2b(s.key, digest_size=16).digest()
        segments.append(
            [
                s.level,
                redact_text(s.pointer),
                s.kind,
                s.role,
                value,
                at,
                at + len(text),
                _b64(key),
                s.tokens,
                s.breakpoint,
                s.message_index,
                header,
                s.media_tokens,
                s.estimated,
            ]
        )
        pieces.append(text)
        at += len(text)
    doc = {
        "api": p.api,
        "model": redact_text(p.model) if p.model else p.model,
        "segments": segments,
        "settings": p.settings if clean else _redacted(p.settings, secrets),
        "auto": p.auto_breakpoint,
        "text": "".join(pieces),
        "source": p.source,
        "estimated": p.tokens_estimated,
        "chain": [_b64(c) for c in p.chain],
        "parts": [_b64(h.to_bytes(8, "big")) for h in seen.parts],
        "counts_only": p.counts_only,
        "front": p.front,  # what a rule put in front of the first part (the tool-use, citations prompt)
        "item": seen.item,
        "ts": seen.ts,
    }
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode("utf-8", "surrogatepass"), 1)


# A stored segment's fields, in the order encode_seen writes them.
_SEGMENT_FIELDS = (
    "level",
    "pointer",
    "kind",
    "role",
    "value",
    "start",
    "end",
    "key",
    "tokens",
    "breakpoint",
    "message_index",
    "header",
    "media_tokens",
    "estimated",
)


def decode_seen(blob: bytes) -> Any:
    from prefixguard.judge.session import Seen

    doc = json.loads(zlib.decompress(blob))
    segments = [
        Segment(**dict(zip(_SEGMENT_FIELDS, fields, strict=True)) | {"key": base64.b64decode(fields[7])})
        for fields in doc["segments"]
    ]
    prompt = Prompt(
        api=doc["api"],
        model=doc["model"],
        segments=segments,
        settings=doc["settings"],
        auto_breakpoint=doc["auto"],
        text=doc["text"],
        source=doc["source"],
        tokens_estimated=doc["estimated"],
        chain=Chain.of(base64.b64decode(c) for c in doc["chain"]),
        counts_only=doc["counts_only"],
        front=doc.get("front", 0),
    )
    parts = sorted({int.from_bytes(base64.b64decode(h), "big") for h in doc["parts"]})
    return Seen(prompt=prompt, item=doc["item"], ts=doc["ts"], parts=array("Q", parts))
