"""A LangChain prompt with a random persona: fixed by hand, the persona is chosen in the latest message
and the system message stays the same on every call."""
import random

from langchain_core.messages import HumanMessage, SystemMessage

PERSONAS = ["cheerful", "formal", "terse"]


def build(question: str) -> list:
    persona = random.choice(PERSONAS)
    return [SystemMessage(content="You know Acme's product catalog."),
            HumanMessage(content=f"Answer in a {persona} tone.\n\n{question}")]
