"""Every telemetry name in one place: OpenTelemetry GenAI attributes, prefixguard's own span attributes,
Prometheus metric names and their buckets. Names only; provider facts stay in rules/."""

from __future__ import annotations

# ---- OpenTelemetry GenAI semantic conventions (span attributes)
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_SYSTEM = "gen_ai.system"  # the older name, still what most backends group by
GEN_AI_PROVIDER = "gen_ai.provider.name"  # its successor
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_CACHE_CREATION = "gen_ai.usage.cache_creation.input_tokens"  # the older name
GEN_AI_CACHE_WRITE = "gen_ai.usage.cache_write.input_tokens"  # its successor
GEN_AI_REQUEST_STREAM = "gen_ai.request.stream"  # conditionally required: whether the call streamed
GEN_AI_TTFT = "gen_ai.response.time_to_first_chunk"  # seconds
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"  # the model that answered: may name a snapshot
GEN_AI_FINISH_REASONS = "gen_ai.response.finish_reasons"  # string[], one per choice
USER_AGENT = "user_agent.original"  # OTel's name; here the client family and version we read from it
HTTP_STATUS = "http.response.status_code"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"  # conditionally required with server.address
ERROR_TYPE = "error.type"

# ---- prefixguard's span attributes
PG_VERDICT = "prefixguard.verdict"
PG_CAUSE = "prefixguard.cause"
PG_POINTER = "prefixguard.pointer"
PG_EXPECTED_CACHED = "prefixguard.expected_cached_tokens"
PG_REPREFILL = "prefixguard.reprefill_tokens"
PG_MISS_COST = "prefixguard.miss_cost_usd"
PG_DECODE_TPS = "prefixguard.decode_tokens_per_second"
PG_TENANT = "prefixguard.tenant"
PG_ESTIMATED = "prefixguard.tokens_estimated"
PG_CLIENT = "prefixguard.client"  # "claude-cli 2.0.14" (prefixguard/capture/attribution.py)
PG_ROUTE = "prefixguard.route"  # the endpoint template, no ids
PG_SITE = "prefixguard.site"  # the call site the caller named (x-prefixguard-site)
SCOPE = "prefixguard"

# ---- Prometheus (prometheus-client adds _total to counters; labels: provider, model, client, route, code,
# verdict, cause; tenant and site only when asked for: LABELS_OPT_IN)
PROXY = "prefixguard_proxy"
LABELS = ("provider", "model", "client", "route")  # on every proxy series: few values each
LABELS_OPT_IN = ("tenant", "site")  # one value per API key / call site: unbounded, opt-in
REQUESTS = "requests"  # counter
PROMPT_TOKENS = "prompt_tokens"  # counter
CACHED_TOKENS = "cached_tokens"  # counter: read from the provider's cache
CACHE_WRITE_TOKENS = "cache_write_tokens"  # counter
MISSES = "cache_misses"  # counter, by cause
REPREFILL_TOKENS = "reprefill_tokens"  # counter, by cause
MISS_COST = "miss_cost_usd"  # counter
UNANALYSED = "unanalysed_requests"  # counter, by method and endpoint: forwarded, not analysed
TTFT = "time_to_first_token_seconds"  # histogram
DECODE_RATE = "decode_tokens_per_second"  # histogram
ANALYSIS_LAG = "analysis_lag_seconds"  # histogram: response end -> its analysis done

# The engine's, after vLLM's prefix-cache metrics (vllm:prefix_cache_queries / _hits, counted in tokens),
# without the colon, which Prometheus keeps for recording rules.
ENGINE = "prefixguard_engine"

SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
TOKENS_PER_SECOND = (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500)
