"""What a request needs from the app: the engine bridge, the cache policies, metrics, defaults, and the
prompts of earlier responses (for the providers' cache diagnoses)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from prefixguard.engine import chat_template
from prefixguard.engine.metrics import Metrics
from prefixguard.engine.runner import Runner
from prefixguard.judge.agreement import of_comparison
from prefixguard.judge.compare import compare
from prefixguard.judge.policies import POLICIES, CachePolicy, Policies
from prefixguard.model.diagnosis import Diagnosis
from prefixguard.model.prompt import Prompt

CACHE_POLICIES = ("auto", *POLICIES)
KEEP_ANSWERED = 10_000  # prompts of earlier responses kept for diagnoses (the oldest go first)


class Served:
    """What a request needs from the app: engine bridge, cache policies, metrics, defaults."""

    def __init__(self, runner: Runner, cache_policy: str, default_max_tokens: int, clock: Callable[[], float]) -> None:
        if cache_policy not in CACHE_POLICIES:
            raise ValueError(f"unknown cache policy {cache_policy!r} (one of {', '.join(CACHE_POLICIES)})")
        self.runner = runner
        self.cache_policy = cache_policy
        self.default_max_tokens = default_max_tokens
        self.clock = clock
        self.metrics = Metrics(runner)
        # the engine's prompt format: a GGUF model's tokenizer and template, else cl100k's
        self.template: chat_template.Template = getattr(runner.engine, "template", chat_template.CL100K)
        self._policies = Policies()
        self.serves: Callable[[str | None], bool] | None = None  # the model names answered (None: any)
        self._answered: OrderedDict[str, Prompt] = OrderedDict()  # response id -> its prompt, for diagnoses

    def diagnose(self, earlier_id: str, prompt: Prompt) -> Diagnosis:
        """The cache diagnosis a provider gives against an earlier response (prefixguard's comparison)."""
        earlier = self._answered.get(earlier_id)
        if earlier is None:
            return of_comparison(None, False, 0)
        return of_comparison(compare(earlier, prompt), True, earlier.total_tokens)

    def answered(self, response_id: str, prompt: Prompt) -> None:
        self._answered[response_id] = prompt
        while len(self._answered) > KEEP_ANSWERED:
            self._answered.popitem(last=False)

    def policy_for(self, prompt: Prompt) -> CachePolicy | None:
        """The contract this request is served under; None: reuse any cached prefix (radix).
        auto: the contract of the provider whose API shape and model the request names."""
        return self._policies.get(self.cache_policy, prompt.api, prompt.model, radix=False)
