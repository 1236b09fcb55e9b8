"""The shapes of secrets, as patterns for prefixguard/utils/redaction.py: keys of published formats
(KEY_FORMATS) and the marks that find them fast in a large body, the password of a URL's userinfo, a
credential assignment's value, and the base64 anchors of a key wrapped once more."""

from __future__ import annotations

import base64
import re

# Credentials by their published formats, wherever they stand in a text.
_FORMATS = (
    r"sk-ant-[A-Za-z0-9_-]{16,}",  # Anthropic (sk-ant-api03-..., sk-ant-admin01-...)
    r"\bsk-(?:proj-|svcacct-|admin-|or-v1-)?[A-Za-z0-9_-]{20,}",  # OpenAI (sk-proj-, legacy sk-), OpenRouter, DeepSeek
    r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",  # AWS access key ids
    r"\bABSK[A-Za-z0-9+/]{20,}={0,2}",  # Amazon Bedrock API keys (long-term)
    r"\bbedrock-api-key-[A-Za-z0-9+/%=_-]{20,}",  # Amazon Bedrock API keys (short-term)
    r"AIza[0-9A-Za-z_-]{35}",  # Google API keys
    r"\bya29\.[0-9A-Za-z_-]{20,}",  # Google OAuth access tokens
    r"\b1//0[0-9A-Za-z_-]{30,}",  # Google OAuth refresh tokens
    r"\bgh[pousr]_[A-Za-z0-9]{36,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{22,}",  # GitHub fine-grained tokens
    r"\bglpat-[A-Za-z0-9_-]{20,}",  # GitLab personal tokens
    r"\bxox[abposre]-[A-Za-z0-9-]{10,}",  # Slack tokens
    r"\bxapp-\d-[A-Za-z0-9-]{20,}",  # Slack app tokens
    r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWTs (header.payload.signature)
    r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}",  # Stripe secret and restricted keys
    r"\bwhsec_[A-Za-z0-9+/=]{24,}",  # Stripe webhook secrets
    r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{30,}",  # SendGrid
    r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"\bnpm_[A-Za-z0-9]{36}\b",  # npm
    r"\bpypi-[A-Za-z0-9_-]{50,}",  # PyPI
    r"\bgsk_[A-Za-z0-9]{40,}",  # Groq
    r"\bxai-[A-Za-z0-9]{40,}",  # xAI
    r"\bpplx-[A-Za-z0-9]{40,}",  # Perplexity
    r"\br8_[A-Za-z0-9]{30,}",  # Replicate
    r"\bdop_v1_[a-f0-9]{64}",  # DigitalOcean
    r"\bdapi[a-f0-9]{32}\b",  # Databricks
    r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}",  # Shopify
    r"\blsv2_(?:pt|sk)_[A-Za-z0-9_]{30,}",  # LangSmith
    r"\btvly-[A-Za-z0-9-]{24,}",  # Tavily
    r"\bATATT3[A-Za-z0-9_=-]{40,}",  # Atlassian
    r"\bAccountKey=[A-Za-z0-9+/]{40,}={0,2}",  # Azure storage connection strings
    r"\bSharedAccessSignature=[^\s\"';]{20,}",  # Azure service bus / SAS
    # PEM private keys: the whole block, or from its first line to where the key's characters stop
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]{0,16384}?-----END[A-Z0-9 ]{0,40}"
    r"PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=:,. \t\r\n-]|\\[nrt])*)",
    # a key cut short by an ellipsis (a diff's excerpt): its start is still the key's (_CUT_MARKS, below)
    "{cut}",
    # ...or cut at its start: a long unbroken run of key characters right after the ellipsis
    r"\u2026(?=[A-Za-z0-9_+/=-]*\d)[A-Za-z0-9_+/=-]{20,}",
)
_CUT_MARKS = (
    "sk-",
    "sk_live_",
    "rk_live_",
    "AKIA",
    "ASIA",
    "ABIA",
    "ACCA",
    "ABSK",
    "bedrock-api-key-",
    "AIza",
    "ya29.",
    "1//0",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxo-",
    "xoxs-",
    "xoxr-",
    "xoxe-",
    "xapp-",
    "eyJ",
    "whsec_",
    "SG.",
    "hf_",
    "npm_",
    "pypi-",
    "gsk_",
    "xai-",
    "pplx-",
    "r8_",
    "dop_v1_",
    "dapi",
    "shpat_",
    "shpss_",
    "shpca_",
    "shppa_",
    "lsv2_",
    "tvly-",
    "ATATT3",
    "AccountKey=",
    "-----BEGIN",
)
KEY_FORMATS = re.compile(
    "|".join(_FORMATS).replace("{cut}", "(?:" + "|".join(map(re.escape, _CUT_MARKS)) + r")[A-Za-z0-9_.+/= -]*\u2026")
)
# Every KEY_FORMATS match but a PEM block's and an excerpt's starts with one of these marks, inside a run
# of key characters: the runs are found in one regex pass, the marks looked for in them alone, and the
# formats tried where a mark stands (the formats' regex over a whole large body is far too slow).
KEY_MARKS = (
    "sk-",
    "sk_",
    "rk_",
    "AKIA",
    "ASIA",
    "ABIA",
    "ACCA",
    "ABSK",
    "bedrock-api-key-",
    "AIza",
    "ya29.",
    "1//0",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xox",
    "xapp-",
    "eyJ",
    "whsec_",
    "SG.",
    "hf_",
    "npm_",
    "pypi-",
    "gsk_",
    "xai-",
    "pplx-",
    "r8_",
    "dop_v1_",
    "dapi",
    "shp",
    "lsv2_",
    "tvly-",
    "ATATT3",
    "AccountKey=",
    "SharedAccessSignature=",
)
KEY_RUN = re.compile(r"[A-Za-z0-9_+/=.-]{16,}")
# A longer unbroken run is data (an image, a file), not a pasted key: not searched.
BLOB_CHARS = 65_536
ELLIPSIS_REACH = 256  # characters on each side of an ellipsis where a cut key is looked for

# The password of a URL's userinfo (scheme://user:password@host): a connection string in a prompt.
USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]{1,15}://[^\s/:@'\"<>]*:)([^\s/@'\"<>\u2026]+)(?=@|\u2026)")
# The value of a credential assignment in prose or config text (`password: ...`, `API_KEY=...`): 6+
# characters, not a word alone (a digit, a sign or a capital inside it), so that "password: required"
# or "Required" stays, as the value is replaced wherever it stands. (PWD is no credential name: it is the
# working directory in every environment listing.)
ASSIGNED = re.compile(
    r"\b((?i:(?:[a-z0-9]+[_-])*(?:password|passwd|passphrase|secret|secret[_-]?key|api[_-]?key|apikey|"
    r"access[_-]?key|private[_-]?key|client[_-]?secret|auth[_-]?token|access[_-]?token|refresh[_-]?token)"
    r"\b\\?[\"']?\s*(?:[:=]|\bis\b)\s*\\?[\"']?))"  # a quote may be escaped: JSON inside a string
    r"((?=[^\s\"'\\,;]*[0-9!#$%&*+/=?@^~]|(?=[^\s\"'\\,;]*[a-z])[^\s\"'\\,;]+[A-Z])[^\s\"'\\,;]{6,})"
)
BEARER = re.compile(r"(?i)\b(bearer|basic)\s+([A-Za-z0-9._~+/=-]{16,})")
# Where a credential is named: a value assigned to it is looked for just after (read in bytes, lowered).
CREDENTIAL_WORDS = re.compile(
    rb"pass|secret|api.?key|access.?key|private.?key|auth.?token|access.?token|"
    rb"refresh.?token|bearer|basic"
)
ASSIGNS = re.compile(rb"[a-z0-9_-]{0,24}\\?[\"']?\s{0,4}(?:[:=]|is\s)|\s+[a-z0-9._~+/=-]{16}")
WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+.")

# Base64 that wraps a key: the encodings of the formats' first characters, at each of the three
# alignments a wrapped key can start at, found first; then the run around them decoded and searched.
_WRAPPED_PREFIXES = (
    "sk-ant-",
    "sk-proj-",
    "sk-",
    "AKIA",
    "ASIA",
    "ABSK",
    "AIza",
    "ghp_",
    "github_pat_",
    "xoxb-",
    "eyJ",
    "-----BEGIN",
    "hf_",
    "sk_live_",
    "glpat-",
    "password",
    "api_key",
    "apikey",
)


def _anchors(prefix: str) -> list[str]:
    out = []
    raw = prefix.encode()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode()
        first, last = -(-8 * shift // 6), 8 * (shift + len(raw)) // 6
        if last - first >= 4:
            out.append(encoded[first:last])
    return out


WRAPPED = tuple(dict.fromkeys(a for p in _WRAPPED_PREFIXES for a in _anchors(p)))
WRAPPED_ANCHOR = re.compile("|".join(map(re.escape, WRAPPED)))
B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_")
WRAPPED_WINDOW = 8192  # characters of a base64 run read around an anchor: keys are short
