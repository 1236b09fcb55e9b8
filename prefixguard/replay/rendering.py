"""A replayed request read as a prompt: parsed and counted as a provider counts it, or rendered to token
ids by the engine's chat template (what the sim's tree and the engine see)."""

from __future__ import annotations

import json

from prefixguard.engine import chat_template
from prefixguard.model.prompt import Prompt
from prefixguard.replay.sources import Request
from prefixguard.utils.errors import InputError
from prefixguard.wire import parse_request

NO_BODIES = "this trace holds no request bodies (Mooncake): only --target sim or engine replays it"


def parsed(req: Request, model: str | None = None) -> Prompt:
    """The parsed request, counted as a provider counts it (our tokenizer, images by their formula):
    what a contract judges."""
    if req.body is None:
        raise InputError(NO_BODIES, req.ref)
    prompt = parse_request(json.dumps(req.body, ensure_ascii=False), path=req.path, source=req.ref)
    if model:
        prompt.model = model
    return prompt


def prompt_of(req: Request, model: str | None = None) -> Prompt:
    """The parsed request, its segments' tokens counted by the engine's chat template."""
    return rendered(req, model)[0]


def rendered(
    req: Request, model: str | None, template: chat_template.Template = chat_template.CL100K
) -> tuple[Prompt, list[int]]:
    """prompt_of, with the token ids the template rendered (the targets that need them render once);
    template: the engine model's (a GGUF model has its own tokenizer), else the presets' cl100k one."""
    if req.body is None:
        raise InputError(NO_BODIES, req.ref)
    prompt = parse_request(json.dumps(req.body, ensure_ascii=False), path=req.path, source=req.ref, count_tokens=False)
    ids = chat_template.prompt_ids(template, prompt)  # also sets each segment's tokens as the template counts them
    if model:
        prompt.model = model
    return prompt, ids
