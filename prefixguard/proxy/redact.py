r"""Keep secrets out of the store and the console: API keys, cookies, tokens in URLs and bodies.

Three nets: the request's own keys (from its headers) wherever they appear; credential-named JSON
fields and query parameters; and keys of the known formats (KEY_FORMATS) wherever they appear in any
stored text, also when the body wrote them JSON-escaped (`\/`, `\u0073`), which is read decoded.

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

from prefixguard.utils.random_tokens import high_entropy, redact_random
from prefixguard.utils.redaction import REDACTED, redact_text
from prefixguard.utils.secret_shapes import KEY_FORMATS

__all__ = [
    "KEY_FORMATS",
    "REDACTED",
    "api_keys",
    "redact_body",
    "redact_fields",
    "redact_path",
    "redact_text",
    "storable",
    "system_secrets",
    "tenant_of",
]

KEY_HEADERS = ("x-api-key", "api-key", "authorization", "x-goog-api-key")
# Names that hold credentials (compared lowercase, '-' read as '_'). Body fields are a narrower set:
# prompts legitimately carry "key", "token" or a thinking block's "signature".
SECRET_FIELDS = frozenset(
    {
        "api_key",
        "apikey",
        "x_api_key",
        "access_token",
        "refresh_token",
        "id_token",
        "authorization",
        "client_secret",
        "secret_key",
        "password",
        "session_token",
        "passwd",
        "passphrase",
        "secret",
        "private_key",
        "secret_access_key",
        "aws_secret_access_key",
        "api_secret",
        "db_password",
    }
)
SECRET_PARAMS = SECRET_FIELDS | {
    "key",
    "token",
    "auth",
    "sig",
    "signature",
    "secret",
    "code",
    "pass",
    "pwd",
    "jwt",
    "bearer",
    "session",
    "sessionid",
    "sid",
    "otp",
    "ticket",
    "hmac",
}
# A query parameter whose name holds one of these is a credential too (subscription-key, X-Amz-Credential,
# sas_token, client_secret, ...): URL parameters are not prompts, so the net can be wide.
SECRET_PARAM_PARTS = ("key", "token", "secret", "passw", "signature", "credential", "auth", "session")
# A JSON escape that could spell a key's characters: the body must be read decoded to see it.
_ESCAPES = re.compile(r"\\(?:u[0-9a-fA-F]{4}|/)")
# Any of SECRET_FIELDS as a quoted string ('_' written '-' or '_', any case): a body without one has
# nothing to scrub.
_MAYBE_SECRET_FIELD = re.compile('"(?:' + "|".join(sorted(n.replace("_", "[-_]") for n in SECRET_FIELDS)) + ')"', re.I)
_SCHEME = re.compile(r"^(bearer|basic|token)\s+", re.I)
_SIGV4 = re.compile(r"^AWS4-HMAC-SHA256\s+Credential=([^/,\s]+)/")


def api_keys(headers: Mapping[str, str]) -> list[str]:
    """The credentials a request carries in its headers (scheme words such as 'Bearer' removed)."""
    lower = {k.lower(): v for k, v in headers.items()}
    keys = [_SCHEME.sub("", lower[h]).strip() for h in KEY_HEADERS if lower.get(h, "").strip()]
    # AWS SigV4 (Bedrock): the header changes with every request (date, signature); the access key id
    # in its Credential= names the caller, so it comes first (the tenant), the whole header after it.
    found = _SIGV4.search(lower.get("authorization", ""))
    return [found.group(1), *keys] if found else keys


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
    query = [
        (k, REDACTED if _secret_param(k) else redact_text(v)) for k, v in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return urlunsplit(parts._replace(query=urlencode(query, safe="[]")))


def _secret_param(name: str) -> bool:
    lower = name.lower().replace("-", "_")
    return lower in SECRET_PARAMS or any(part in lower for part in SECRET_PARAM_PARTS)


def _scrub(value: Any, secrets: list[str]) -> Any:
    """Credential fields removed and keys redacted in every string, keys and values (read decoded)."""
    if isinstance(value, dict):
        return {
            redact_text(k, secrets): REDACTED if _secret_name(k) and isinstance(v, str) else _scrub(v, secrets)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_scrub(v, secrets) for v in value]
    if isinstance(value, str):
        return redact_text(value, secrets)
    return value


def redact_body(text: str, secrets: Iterable[str] = ()) -> str:
    """A JSON body with credential fields and the request's own keys removed; other text: keys removed.

    Bodies with no credential field and no key are returned as sent (same bytes); a key found in the
    text is replaced in place; a body with a credential field or an escape that may spell a key is
    read decoded and, when that finds more, re-serialized compactly, key order kept."""
    secrets = list(secrets)
    text = redact_text(text, secrets)
    if not _MAYBE_SECRET_FIELD.search(text) and not _ESCAPES.search(text):  # no such name, no escape:
        return text  # no parse needed
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        return text
    scrubbed = _scrub(body, secrets)
    return text if scrubbed == body else json.dumps(scrubbed, ensure_ascii=False, separators=(",", ":"))


# Record fields that hold free text (the request body has its own pass, redact_body).
TEXT_FIELDS = (
    "path",
    "upstream",
    "api",
    "model",
    "tenant",
    "error",
    "note",
    "pointer",
    "expected_reason",
    "previous_id",
    "detail",
    "diagnosis_reason",  # the provider's free-text reason may quote a prompt
    "client",
    "route",
    "site",
    "response_id",
    "response_model",
)  # the caller's own header text


def storable(text: str) -> str:
    """text that SQLite can store as UTF-8: lone surrogates (a JSON body may escape one) become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


# Fields that quote a changed value (a comparison's excerpt): a random-looking token there is a secret
# more often than an id, and an id named there is only an example of the change.
QUOTING_FIELDS = frozenset({"detail", "note", "pointer", "expected_reason", "error"})


def redact_fields(record: Any, secrets: Iterable[str], fields: Iterable[str] = TEXT_FIELDS) -> None:
    """Every text field of a record (a dataclass) redacted and made storable, in place."""
    secrets = list(secrets)
    for name in fields:
        value = getattr(record, name)
        if isinstance(value, str):
            value = redact_text(value, secrets)
            if name in QUOTING_FIELDS:
                value = redact_random(value)
            setattr(record, name, storable(value))


def system_secrets(prompt: Any) -> list[str]:
    """The random-looking tokens of a request's system prompt (prefixguard/utils/random_tokens.py: is_random_token):
    a key or a password pasted there, often one that changes with every request, is kept nowhere.
    Ids and digests there (hex, UUIDs, named ids) are left as sent."""
    found: list[str] = []
    for seg in prompt.segments:
        if seg.level == "system":
            found += high_entropy(prompt.text[seg.start : seg.end])
    return list(dict.fromkeys(found))
