"""Volatile sources in Python, TypeScript and JavaScript code (the latter read as Python's ast, see
tsexpr.py): the calls and names whose value differs between requests, and the iterations whose order
differs between processes."""

from __future__ import annotations

import ast
import re

# kind of volatility -> what a finding calls it
CLOCK, UUID, RANDOM, ENV, REQUEST_ID = "clock", "uuid", "random", "env", "request-id"
DATE = "date"  # a clock value written to the day: it changes once a day
SET_ORDER, DICT_ORDER, JSON_UNSORTED = "set-order", "dict-order", "json-unsorted"
# markers: the value IS a set or dict (not volatile until iterated)
SET_VALUE, DICT_VALUE, PARAM = "set-value", "dict-value", "param"
MARKERS = frozenset({SET_VALUE, DICT_VALUE, PARAM})
ORDER = frozenset({SET_ORDER, DICT_ORDER})
PICKS = frozenset({CLOCK, UUID, RANDOM})  # an index that picks another item on every call
TEXT_VOLATILE = frozenset({CLOCK, UUID, RANDOM, ENV, REQUEST_ID, SET_ORDER, DATE})

_CLOCK_CALLS = {
    "datetime.datetime.now",
    "datetime.datetime.utcnow",
    "datetime.datetime.today",
    "datetime.now",
    "datetime.utcnow",
    "datetime.today",
    "time.time",
    "time.time_ns",
    "time.ctime",
    "time.asctime",
    "time.localtime",
    "time.gmtime",
    "time.strftime",
    "time.monotonic",
    "time.perf_counter",
}
_UUID_CALLS = {
    "uuid.uuid4",
    "uuid.uuid1",
    "uuid.uuid7",
    "uuid4",
    "uuid1",
    # TypeScript / JavaScript (npm packages as dotted modules: tsstmt.module_name)
    "crypto.randomUUID",
    "uuid.v1",
    "uuid.v4",
    "uuid.v6",
    "uuid.v7",
    "nanoid.nanoid",
    "ulid.ulid",
    "ulidx.ulid",
    "cuid",
    "_paralleldrive_cuid2.createId",
}
_JS_CLOCK_CALLS = {"Date.now", "performance.now", "process.hrtime", "process.hrtime.bigint", "process.uptime"}
_JS_RANDOM_CALLS = {"Math.random", "crypto.getRandomValues", "crypto.randomBytes", "crypto.randomInt"}
_RANDOM_MODULES = ("random.", "secrets.", "numpy.random.")
_RANDOM_CALLS = {"os.urandom"}
# environment variables that carry a per-request or per-run value (a static setting is no cache break)
_PER_REQUEST_ENV = re.compile(
    r"(REQUEST|TRACE|SPAN|CORRELATION|RUN|NONCE|INVOCATION)(_?ID)?$|TIMESTAMP|_TIME$|_DATE$", re.IGNORECASE
)
_ENV_CALLS = {"os.getenv", "os.environ.get", "os.environ.__getitem__"}
# names of per-request ids (parameters, attributes of a request object)
_REQUEST_ID_NAMES = re.compile(r"(request|req|trace|correlation|span|invocation)_?id$", re.IGNORECASE)
_REQUEST_OBJECTS = re.compile(r"(request|req)$", re.IGNORECASE)


def call_kind(qualified: str, call: ast.Call) -> str | None:
    """The volatility of a call's result, by the function's qualified name (import aliases resolved)."""
    if qualified in _CLOCK_CALLS or qualified in _JS_CLOCK_CALLS or (qualified == "Date" and not call.args):
        return CLOCK
    if qualified in ("datetime.date.today", "date.today"):
        return DATE
    if qualified in _UUID_CALLS:
        return UUID
    if qualified.startswith(_RANDOM_MODULES) or qualified in _RANDOM_CALLS or qualified in _JS_RANDOM_CALLS:
        return RANDOM
    if qualified in _ENV_CALLS and call.args and _per_request_key(call.args[0]):
        return ENV
    return None


def env_subscript(qualified: str, key: ast.expr) -> bool:
    """os.environ["X_REQUEST_ID"], process.env.TRACE_ID."""
    return qualified in ("os.environ", "process.env") and _per_request_key(key)


def _per_request_key(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(_PER_REQUEST_ENV.search(node.value))


def request_id_name(name: str) -> bool:
    """A lower-case name of a per-request id (request_id, trace_id); constants (REQUEST_ID) are not."""
    return not name.isupper() and bool(_REQUEST_ID_NAMES.search(name))


def request_id_attribute(node: ast.Attribute) -> bool:
    """request.id, req.request_id, self.request.trace_id."""
    if request_id_name(node.attr):
        return True
    base = node.value
    base_name = base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else ""
    return node.attr == "id" and bool(_REQUEST_OBJECTS.search(base_name))


def is_json_dumps(qualified: str) -> bool:
    return qualified in ("json.dumps", "dumps", "JSON.stringify") or qualified.endswith("json.dumps")


def sorts_keys(call: ast.Call) -> bool:
    return any(
        k.arg == "sort_keys" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
        for k in call.keywords
    )


SET_ANNOTATIONS = re.compile(r"^(set|frozenset|Set|FrozenSet|AbstractSet|typing\.Set|typing\.FrozenSet)(\[|$)")
DICT_VIEWS = frozenset({"keys", "values", "items"})
JS_NAMESPACES = frozenset({"Math", "JSON", "String", "Number", "Array", "Object", "Intl", "path"})
# methods whose result holds their arguments' text (a template filled, a string combined)
TEXT_METHODS = frozenset(
    {
        "format",
        "format_map",
        "join",
        "replace",
        "replaceAll",
        "substitute",
        "safe_substitute",
        "render",
        "render_async",
        "concat",
        "padStart",
        "padEnd",
        "center",
        "ljust",
        "rjust",
        "invoke",
        "format_messages",
        "format_prompt",
        "partial",
    }
)


_TIME_OF_DAY = re.compile(r"%[HIMSpfXcsTRrklzZ]")
DAY_METHODS = frozenset({"date", "toDateString", "toLocaleDateString"})  # now().date(), new Date().toDateString()


def day_format(spec: ast.expr | None) -> bool:
    """A strftime format (or an f-string format spec) that writes the day and no time of day."""
    if isinstance(spec, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in spec.values):
        text = "".join(str(v.value) for v in spec.values)  # type: ignore[attr-defined]
    elif isinstance(spec, ast.Constant) and isinstance(spec.value, str):
        text = spec.value
    else:
        return False
    return "%" in text and not _TIME_OF_DAY.search(text)
