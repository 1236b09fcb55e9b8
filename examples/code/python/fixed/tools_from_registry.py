"""Tools registered by a decorator, sent in registration order (Anthropic)."""
import anthropic

client = anthropic.Anthropic()
REGISTRY: dict[str, dict] = {}


def tool(schema: dict):
    def register(fn):
        REGISTRY[schema["name"]] = schema
        return fn
    return register


def ask(question: str) -> str:
    tools = [spec for spec in dict(sorted(REGISTRY.items())).values()]
    tools[-1] = {**tools[-1], "cache_control": {"type": "ephemeral"}}
    reply = client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, tools=tools,
                                   messages=[{"role": "user", "content": question}])
    return reply.content[0].text
