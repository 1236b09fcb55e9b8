"""Keep secrets out of the store and the console: API keys, cookies, tokens in URLs and bodies.

The tenant of a request is a short hash of its API key, so requests of one key are compared with each
other without the key itself being kept anywhere.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from hashlib import blake2b
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

KEY_HEADERS = ("x-api-key", "api-key", "authorization", "x-goog-api-key")
# Names that hold credentials (compared lowercase, '-' read as '_'). Body fields are a narrower set:
# prompts legitimately carry "key", "token" or a thinking block's "signature".
SECRET_FIELDS = frozenset({"api_key", "apikey", "x_api_key", "access_token", "refresh_token", "id_token",
                           "authorization", "client_secret", "secret_key", "password", "session_token"})
SECRET_PARAMS = SECRET_FIELDS | {"key", "token", "auth", "sig", "signature", "secret"}
REDACTED = "[redacted]"
# Any of SECRET_FIELDS as a quoted string ('_' written '-' or '_', any case): a body without one has
# nothing to scrub.
_MAYBE_SECRET_FIELD = re.compile('"(?:' + "|".join(sorted(n.replace("_", "[-_]") for n in SECRET_FIELDS)) + ')"', re.I)
_SCHEME = re.compile(r"^(bearer|basic|token)\s+", re.I)


def api_keys(headers: Mapping[str, str]) -> list[str]:
    """The credentials a request carries in its headers (scheme words such as 'Bearer' removed)."""
    lower = {k.lower(): v for k, v in headers.items()}
    return [_SCHEME.sub("", lower[h]).strip() for h in KEY_HEADERS if lower.get(h, "").strip()]


def tenant_of(headers: Mapping[str, str]) -> str:
    """A short, stable hash of the request's API key ("" when it has none)."""
    keys = api_keys(headers)
    return blake2b(keys[0].encode(), digest_size=6).hexdigest() if keys else ""


def _secret_name(name: str, names: frozenset[str] = SECRET_FIELDS) -> bool:
    return name.lower().replace("-", "_") in names


def redact_path(path: str) -> str:
    """The URL path with the values of credential query parameters removed."""
    parts = urlsplit(path)
    if not parts.query:
        return path
    query = [(k, REDACTED if _secret_name(k, SECRET_PARAMS) else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    return urlunsplit(parts._replace(query=urlencode(query, safe="[]")))


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """text with every occurrence of each secret replaced (a key pasted anywhere in a prompt)."""
    for secret in secrets:
        if len(secret) >= 8:  # shorter strings are not keys, and replacing them would mangle text
            text = text.replace(secret, REDACTED)
    return text


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: REDACTED if _secret_name(k) and isinstance(v, str) else _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def redact_body(text: str, secrets: Iterable[str] = ()) -> str:
    """A JSON body with credential fields and the request's own keys removed; other text: keys removed.

    Bodies with no credential field are returned as sent (same bytes); a scrubbed one is re-serialized
    compactly, key order kept."""
    text = redact_text(text, secrets)
    if not _MAYBE_SECRET_FIELD.search(text) and "\\u" not in text:  # no such name, even escaped:
        return text                                                # no parse needed
    try:
        body = json.loads(text)
    except ValueError:
        return text
    scrubbed = _scrub(body)
    return text if scrubbed == body else json.dumps(scrubbed, ensure_ascii=False, separators=(",", ":"))
