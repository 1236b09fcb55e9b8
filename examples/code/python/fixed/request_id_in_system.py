"""A web handler that stamps each request's id into the system message (OpenAI chat completions)."""
from openai import OpenAI

client = OpenAI()


def handle(request, question: str) -> str:
    messages = [
        {"role": "system", "content": "You are a helpful assistant for Acme."},
        {"role": "user", "content": f"Request: {request.id}\n\nQuestion: {question}"},
    ]
    reply = client.chat.completions.create(model="gpt-4.1", messages=messages)
    return reply.choices[0].message.content
