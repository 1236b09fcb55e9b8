"""A LangChain prompt whose system message picks a random persona on every call."""
import random

from langchain_core.messages import HumanMessage, SystemMessage

PERSONAS = ["cheerful", "formal", "terse"]


def build(question: str) -> list:
    persona = random.choice(PERSONAS)
    return [SystemMessage(content=f"Answer in a {persona} tone. You know Acme's product catalog."),
            HumanMessage(content=question)]
