"""An agent whose enabled tools arrive as a set (OpenAI chat completions)."""
from openai import OpenAI

client = OpenAI()
TOOLS = {
    "get_weather": {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
    "search_docs": {"type": "function", "function": {"name": "search_docs", "parameters": {"type": "object"}}},
}


def run(enabled: set[str], question: str) -> str:
    tools = []
    for name in enabled:
        tools.append(TOOLS[name])
    reply = client.chat.completions.create(model="gpt-4.1", tools=tools,
                                           messages=[{"role": "user", "content": question}])
    return reply.choices[0].message.content
