"""A small support agent written with the real anthropic and openai SDKs, with two prompt-cache
breakers in it of the kind prefixguard finds in real apps:

1. the system prompt embeds the current time, so the cached prefix changes on every request;
2. the tool list is built from a set, whose order changes from one process to the next.

`--fixed` applies what prefixguard suggests: the time moves out of the prefix into the user's turn,
and the tools are sorted by name.

    python -m prefixguard.cli.demo_app --base-url http://127.0.0.1:8080 [--fixed]

The base URL may be a provider, the prefixguard proxy or the local engine. The demo's engine has
random weights, so its replies are gibberish: the agent follows a fixed plan of tool calls instead
of reading them, as a scripted agent test would. Each request sends the whole conversation so far.
"""

from __future__ import annotations

import argparse
import datetime
import json
from typing import Any

import anthropic
import openai

CLAUDE = "claude-sonnet-4-5"
GPT = "gpt-4o"
MAX_TOKENS = 12

TOOLS = {  # name -> (description, parameters: name -> JSON type)
    "lookup_order": ("Look up an order by id: status, items, carrier and tracking number.", {"order_id": "string"}),
    "get_customer": ("Fetch a customer's profile, loyalty tier and open cases.", {"customer_id": "string"}),
    "refund_order": (
        "Refund an order in full or in part, to the original payment method.",
        {"order_id": "string", "amount": "number", "reason": "string"},
    ),
    "search_handbook": ("Search the support handbook for a policy.", {"query": "string"}),
    "escalate": ("Hand the case to a human agent with a short summary.", {"summary": "string"}),
}

QUESTION = "My order A-1001 arrived with a cracked screen. Can I get my money back?"
PLAN = [  # (tool, arguments, what the tool returns)
    (
        "lookup_order",
        {"order_id": "A-1001"},
        {"status": "delivered", "items": [{"sku": "TAB-10", "price": 329.0}], "customer_id": "C-77"},
    ),
    ("get_customer", {"customer_id": "C-77"}, {"tier": "gold", "open_cases": 0}),
    (
        "refund_order",
        {"order_id": "A-1001", "amount": 329.0, "reason": "damaged on arrival"},
        {"refund_id": "R-5531", "status": "issued"},
    ),
]

TOPICS = (
    "late deliveries",
    "damaged items",
    "refunds",
    "exchanges",
    "warranty claims",
    "address changes",
    "cancellations",
    "billing disputes",
    "gift cards",
    "loyalty points",
    "business accounts",
    "privacy requests",
)
RULES = (
    "Before you answer a question about {t}, look up the order and the customer: never guess a status, "
    "a date or an amount.",
    "Quote the relevant handbook section on {t} by its number, and say what the customer can expect next and by when.",
    "If a case about {t} involves more than 500 dollars or a repeat complaint, escalate it to a human "
    "with a two-sentence summary.",
    "Keep answers about {t} under 120 words, plain and friendly; no internal jargon, no ticket codes.",
    "Never promise anything about {t} that the tools have not confirmed; if a tool fails, say so and "
    "offer to escalate.",
)


def handbook() -> str:
    """The long, static part of the system prompt (about 1.5k tokens): cacheable when left alone."""
    lines = ["You are the support assistant of Northwind Devices. Follow this handbook exactly."]
    for n, topic in enumerate(TOPICS, 1):
        lines.append(f"\n## {n}. {topic.capitalize()}")
        lines += [f"{n}.{k}. {rule.format(t=topic)}" for k, rule in enumerate(RULES, 1)]
    return "\n".join(lines)


def now() -> str:
    return datetime.datetime.now().isoformat()


def system_text(fixed: bool) -> str:
    return handbook() if fixed else f"{handbook()}\n\nCurrent time: {now()}"


def question(fixed: bool) -> list[dict]:
    """The user's first turn; the fixed app sends the time here, after the cached prefix."""
    blocks = [{"type": "text", "text": QUESTION}]
    return [*blocks, {"type": "text", "text": f"Current time: {now()}"}] if fixed else blocks


def tool_names(fixed: bool) -> list[str]:
    return sorted(TOOLS) if fixed else list(set(TOOLS))  # a set's order follows the process's hash seed


def schema(params: dict[str, str]) -> dict:
    return {"type": "object", "properties": {k: {"type": v} for k, v in params.items()}, "required": list(params)}


def with_last_breakpoint(messages: list[dict]) -> list[Any]:  # Any: the SDKs type their params
    """The conversation with a cache breakpoint on the newest block (it moves every turn)."""
    *head, last = messages
    blocks = list(last["content"])
    blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
    return [*head, {**last, "content": blocks}]


def anthropic_session(base_url: str, api_key: str, fixed: bool) -> list[dict]:
    client = anthropic.Anthropic(base_url=base_url, api_key=api_key, max_retries=0)
    tools: list[Any] = [
        {"name": n, "description": TOOLS[n][0], "input_schema": schema(TOOLS[n][1])} for n in tool_names(fixed)
    ]
    messages: list[dict] = [{"role": "user", "content": question(fixed)}]
    usages = []
    for turn in range(len(PLAN) + 1):
        system: list[Any] = [{"type": "text", "text": system_text(fixed), "cache_control": {"type": "ephemeral"}}]
        with client.messages.stream(
            model=CLAUDE, max_tokens=MAX_TOKENS, system=system, tools=tools, messages=with_last_breakpoint(messages)
        ) as stream:
            reply = stream.get_final_message()
        usages.append(reply.usage.model_dump(exclude_none=True))
        if turn == len(PLAN):
            break
        name, args, result = PLAN[turn]
        text = "".join(b.text for b in reply.content if b.type == "text")
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": text or "Checking."},
                    {"type": "tool_use", "id": f"toolu_{turn:02d}", "name": name, "input": args},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{turn:02d}", "content": json.dumps(result)}],
            }
        )
    return usages


def openai_session(base_url: str, api_key: str, fixed: bool) -> list[dict]:
    client = openai.OpenAI(base_url=base_url.rstrip("/") + "/v1", api_key=api_key, max_retries=0)
    tools: list[Any] = [
        {"type": "function", "function": {"name": n, "description": TOOLS[n][0], "parameters": schema(TOOLS[n][1])}}
        for n in tool_names(fixed)
    ]
    history: list[dict] = [{"role": "user", "content": question(fixed)}]
    usages = []
    for turn in range(len(PLAN) + 1):
        messages: list[Any] = [{"role": "system", "content": system_text(fixed)}, *history]
        chunks = list(
            client.chat.completions.create(
                model=GPT,
                max_tokens=MAX_TOKENS,
                tools=tools,
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        usage = chunks[-1].usage  # the last chunk carries it (include_usage)
        if usage is None:
            raise SystemExit("the server sent no usage in the stream's last chunk")
        usages.append(usage.model_dump(exclude_none=True))
        if turn == len(PLAN):
            break
        name, args, result = PLAN[turn]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        call = {"id": f"call_{turn:02d}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        history.append({"role": "assistant", "content": text or None, "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
    return usages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="provider, prefixguard proxy, or local engine")
    parser.add_argument("--api-key", default="demo-key")
    parser.add_argument("--fixed", action="store_true", help="apply prefixguard's fixes")
    args = parser.parse_args()
    for sdk, session in (("anthropic", anthropic_session), ("openai", openai_session)):
        for turn, usage in enumerate(session(args.base_url, args.api_key, args.fixed), 1):
            print(f"{sdk} turn {turn}: {json.dumps(usage, separators=(',', ':'))}")


if __name__ == "__main__":
    main()
