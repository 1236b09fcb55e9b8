"""A helper builds the system prompt (Bedrock converse, cachePoint after it): fixed by hand, the current time
goes into the latest user message, after the cache point."""
from datetime import datetime

import boto3

bedrock = boto3.client("bedrock-runtime")


def system_prompt(team: str) -> str:
    return f"You triage tickets for the {team} team."


def triage(ticket: str) -> str:
    reply = bedrock.converse(
        modelId="anthropic.claude-sonnet-4-5-v1:0",
        system=[{"text": system_prompt("platform")}, {"cachePoint": {"type": "default"}}],
        messages=[{"role": "user", "content": [{"text": f"It is {datetime.now():%A %d %B %Y, %H:%M}."}, {"text": ticket}]}])
    return reply["output"]["message"]["content"][0]["text"]
