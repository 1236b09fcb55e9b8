"""What a provider's prompt cache should read for a request, given what it saw before.

One policy per provider contract (rules/providers.toml), its state keyed by (tenant, model), at segment
granularity: a cache entry is a prefix fingerprint (an element of Prompt.chain) and the tokens it covers.
One module per contract family, on one base (base.py: entry bookkeeping, commit, lookup, what the
provider reported holding, the fleet's shared table):
- prefix.py: automatic prefix caching (OpenAI before GPT-5.6, Gemini with a minimum per model, xAI and
  the other OpenAI-compatible tables; DeepSeek's whole units; the compatible contract of a server one
  runs, in whole blocks of its block size, or no prefix at all where it caches none);
- openai_breakpoints.py: GPT-5.6 and later, implicit and explicit breakpoints;
- anthropic.py: breakpoints with a bounded lookback (Anthropic, and Bedrock with its own numbers);
- registry.py: the policy of each contract by its `policy` kind, and one state per contract.
The proxy's verdicts, the engine server's --policy and replay's sim target all use this package, the
proxy and the sim through the same three calls: `predicted`, `CachePolicy.billed`, `answered`.
"""

from prefixguard.judge.policies.anthropic import AnthropicPolicy, Entry, Passes
from prefixguard.judge.policies.base import CachePolicy, Expected, Output, answered, predicted
from prefixguard.judge.policies.prefix import PrefixPolicy
from prefixguard.judge.policies.registry import POLICIES, RADIX, Policies, make_policy, policy_name

__all__ = [
    "POLICIES",
    "RADIX",
    "AnthropicPolicy",
    "CachePolicy",
    "Entry",
    "Passes",
    "Expected",
    "Output",
    "Policies",
    "PrefixPolicy",
    "answered",
    "make_policy",
    "policy_name",
    "predicted",
]
