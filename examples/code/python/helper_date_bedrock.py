"""A helper builds the system prompt with the current time (Bedrock converse, cachePoint after it)."""
from datetime import datetime

import boto3

bedrock = boto3.client("bedrock-runtime")


def system_prompt(team: str) -> str:
    return f"You triage tickets for the {team} team. It is {datetime.now():%A %d %B %Y, %H:%M}."


def triage(ticket: str) -> str:
    reply = bedrock.converse(
        modelId="anthropic.claude-sonnet-4-5-v1:0",
        system=[{"text": system_prompt("platform")}, {"cachePoint": {"type": "default"}}],
        messages=[{"role": "user", "content": [{"text": ticket}]}])
    return reply["output"]["message"]["content"][0]["text"]
