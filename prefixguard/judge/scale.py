"""Our token counts in the provider's tokens, by kind of content.

We count with the model's own encoding where it has a public one (OpenAI's: prefixguard/model/tokens.py), else
with cl100k; a provider counts with its own tokenizer, renders some content its own way (OpenAI writes tool
definitions as a typed namespace, far shorter than their JSON), and may add tokens the body does not show:
definitions of its server tools, a gateway's system text, a tool-choice instruction, a server tool's
results. So one ratio per model is not enough: a prefix that is mostly tool schemas scales differently
from one that is mostly conversation. Three kinds are scaled apart:

- tools: tool definitions and output schemas (level "tools");
- text: system and conversation text, and every other part;
- calls: tool calls and tool results carried in the conversation (JSON arguments, outputs).

Images and documents are costed by the provider's formula already (media.py), so the fit is of the text
alone. From the latest requests of a model (WINDOW of them) whose usage reported the prompt total P for
our counts x (per kind), a ratio per kind is fitted by least squares, each drawn toward the one ratio of
the latest request that holds that kind where the requests cannot tell the kinds apart (ridge): a session
whose tools stay while its conversation grows tells the two apart, and a short request without tools
between an agent's turns (a title) says nothing of the tools' ratio. Where the tokenizer explains the text
itself (a model counted in its own encoding, with its chat format's framing), text is not fitted: its
ratio is 1, and what the bill holds beyond it is the other kinds' or unseen. The ratios of the kinds the
latest request holds are then set, together, so that it comes out at its bill, as far as a tokenizer can
explain it (MAX_RATIO overall, MAX_KIND_RATIO a kind); what is left over is tokens unseen. A bill beyond
that holds text the body does not show, and says nothing of the tokenizer: our count is kept (a ratio of 1),
not stretched to the bound, and all the rest is unseen (grok-4's hidden system prompt, Claude's tool-use
instructions in a short request).

Where the unseen tokens sit, the provider's own figures tell. What a request read plus what it wrote
ends where a read can end (on a breakpoint; for an automatic prefix cache, only a read past all of our
tokens says anything): what it holds beyond our scaled tokens up to there is unseen text IN FRONT
(hidden tool definitions, read with the prefix); the rest sits after every read (a tool-choice
instruction, a server tool's results, the reply's opening) and is counted after the last part
(Prompt.after), where no breakpoint's read covers it. Until a read says, all of it is put in front, since
every read starts there (but after, for a request declaring tools the provider runs itself: its tokens are
mostly the results those tools insert); once a read has shown text in front, it is the provider's own,
before every request of the model, and a request whose first part differs still reads it (Prompt.front:
grok-4's hidden system prompt). Where the contract fixes where that cache ends (a write runs to the
furthest breakpoint: Claude, GPT-5.6's modes), the count there is exact both ways: a prefix we scale past
it holds tokens the provider adds after every breakpoint (Claude's tool-use instructions, after the tool
definitions), so the ratios are lowered until it fits and the rest of the bill is unseen after the prefix.
A request declaring tools the provider runs itself keeps a fit of its own (fit_key).

The tool-use prompt Claude's API puts in front of a request's tools (and its citations prompt) is known by a
rule (Prompt.front, set where the request is read: prefixguard/wire/front.py), a figure per model that a
source's own bills show ~10% either way. It is fitted apart: a bill takes it as far as the bill holds it beyond
our count (Fit.ruled, the share taken), and the rest is fitted as above; a request without it gets none of it.

Later prompts of that model are scaled by it before a contract judges them, so minimums and expected
reads are in the provider's tokens. The proxy and replay's sim target both learn it this way.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import NamedTuple

from prefixguard.judge.index import LocalTable, Table
from prefixguard.model import templates
from prefixguard.model.prompt import Prompt, Segment
from prefixguard.model.usage import Usage
from prefixguard.wire.fields import provider_tool

MAX_RATIO = 1.5  # tokenizers differ by tens of percent, not more: beyond it, tokens are unseen
MAX_KIND_RATIO = 3.0  # one kind may be rendered far shorter or longer than its JSON (OpenAI's tool namespace)
WINDOW = 8  # latest requests of a model the kinds are fitted on
RIDGE = 0.5  # how strongly a kind the requests cannot tell apart keeps the latest request's ratio
KINDS = ("tools", "text", "calls")
TOOLS, TEXT, CALLS = range(3)
_CALL_KINDS = frozenset(("tool_use", "tool_result"))


class Fit(NamedTuple):
    ratio: float  # the provider's text tokens per one of ours, over the latest request
    unseen: int  # tokens it counts that the body does not show
    front: int = -1  # of them, those in front of the prefix, as a read showed (-1: no read has shown it)
    kinds: tuple[float, ...] = ()  # the ratio per kind (KINDS); () where only `ratio` is known
    seen: tuple[tuple[int, ...], ...] = ()  # the latest requests' (tools, text, calls, provider's), oldest first
    ruled: float = 1.0  # of what a rule puts in front (Prompt.front), the share the bills bear out


FIT_LIFETIME = 86_400.0  # a fit kept in a shared index outlives a day of silence from its model: refit then


def kind_of(seg: Segment) -> int:
    return TOOLS if seg.level == "tools" else CALLS if seg.kind in _CALL_KINDS else TEXT


def fit_key(prompt: Prompt, tools: tuple[str, ...] | None = None) -> str | None:
    """Where a prompt's fit is kept: its model's, apart for each set of the provider's own tools it declares
    (`tools`, provider_tools of it). Such a tool brings text the body does not show (its instructions, the
    results it inserts): what gpt-5's web search bills beyond the parts is no text in front of the model's
    requests without it. The client's own tools share the model's fit: what a provider adds for them, or
    before every request (grok-4's hidden system prompt), is the same with or without them."""
    tools = provider_tools(prompt) if tools is None else tools
    return f"{prompt.model or ''} +{'+'.join(tools)}" if tools else prompt.model


def provider_tools(prompt: Prompt) -> tuple[str, ...]:
    """The types of the tools a prompt declares that the provider runs itself, sorted."""
    found = {provider_tool(s.value) for s in prompt.segments if s.level == "tools" and s.kind == "tool"}
    return tuple(sorted(t for t in found if t))


def _by_kind(prompt: Prompt) -> list[int]:
    """Our text tokens of each kind (media left out: they are in the provider's tokens already)."""
    x = [0, 0, 0]
    for s in prompt.segments:
        x[kind_of(s)] += s.tokens - s.media_tokens
    return x


def _explained(prompt: Prompt) -> bool:
    """The model's text is counted in its own encoding with its chat format's framing: text is exact."""
    return not prompt.tokens_estimated and templates.message_framing(prompt.api, prompt.model).exact


class TokenScale:
    """fits: where the fit of each model is kept (a fleet's shared index, prefixguard/judge/index.py), else here."""

    def __init__(self, fits: Table | None = None) -> None:
        self._fit: Table = fits if fits is not None else LocalTable(1 << 16)  # per model

    def learn(
        self,
        prompt: Prompt,
        usage: Usage,
        read_ends: Sequence[int] = (),
        held_end: int | None = None,
        minimum: int = 0,
        step: int = 1,
    ) -> None:
        """Fit the scale to a request whose usage reported its prompt total. read_ends: the segments a
        read of this prompt could end on (the policy's breakpoints, or its last segment); held_end: the one
        where what it read plus what it wrote ends, where the contract fixes it (its furthest breakpoint),
        and minimum: the least a write there holds (a breakpoint that held nothing had less before it);
        step: a read ends on a whole step of this many tokens, up to a step short of where its prefix ends.
        Counts that sum passes over a growing prompt (a server tool's) are taken as the first pass's prompt,
        the one this request sent (usage.first_pass), which held all of itself but what was not cached (the
        later passes leave a few tokens each uncached at most); without that, as about one pass of them,
        telling nothing of where hidden tokens sit."""
        rule, after, prompt = prompt.front, prompt.after, _fitted_part(prompt)
        if usage.server_calls and usage.first_pass:
            held = max(0, usage.first_pass - usage.uncached)
            usage = Usage(prompt_total=usage.first_pass, cache_write_5m=held, reported=usage.reported)
        elif usage.server_calls:
            usage = Usage(prompt_total=usage.prompt_total // usage.passes, reported=usage.reported)
        media = sum(s.media_tokens for s in prompt.segments)
        x = _by_kind(prompt)
        ours, theirs = sum(x), usage.prompt_total - media
        # the rule's tool-use prompt, in front of all of it, and a rule's text after every part (the thinking and
        # compaction prompts), as far as the bill holds them beyond our count (a provider's tokenizer counts about
        # as many tokens as ours or more): the rest is fitted as ever
        taken = min(rule, max(0, theirs - ours))
        theirs -= taken + min(after, max(0, theirs - taken - ours))
        if ours <= 0 or theirs <= 0:
            return
        key = fit_key(prompt)
        before = self._fit.get(key)
        before = before if isinstance(before, Fit) else None
        ruled = taken / rule if rule else before.ruled if before else 1.0
        seen = ((before.seen if before else ()) + ((*x, theirs),))[-WINDOW:]
        held, exact = max(0, usage.cache_read + usage.cache_write - taken), _explained(prompt)
        kinds = _fitted(seen, exact)
        front: int | None = None
        shown: tuple[int, int] | None = None
        if held > 0 and held_end is not None and 0 <= held_end < len(prompt.segments):
            kinds = _held_to(prompt, kinds, held, held_end, exact)
            over = held - sum(_in_theirs(s, kinds) for s in prompt.segments[: held_end + 1])
            # past what was held even lowered (beyond a rounding of each part): it says nothing
            front = max(0, over) if over >= -(held_end + 1) else None
        elif held == 0 and minimum and held_end is not None and 0 <= held_end < len(prompt.segments):
            # nothing held at the breakpoint: what the bill holds beyond our tokens would have taken the
            # prefix there over the minimum in front, so it sits after
            through = taken + sum(_in_theirs(s, kinds) for s in prompt.segments[: held_end + 1])
            beyond = theirs + media - sum(_in_theirs(s, kinds) for s in prompt.segments)
            front = 0 if through < minimum <= through + beyond else None
        else:
            shown = _front(prompt, kinds, held, read_ends, step)
        # against the parts as scaled (each rounded), so that this request comes out at its bill exactly
        unseen = max(0, theirs - sum(_in_theirs(s, kinds) for s in prompt.segments) + media)
        if shown is not None:  # as many of them in front as the read allows
            front = min(max(unseen, shown[0]), shown[1])
        ratio = (theirs - unseen) / ours
        if front is None:  # this read says nothing of where they sit: as the last read said
            front = before.front if before else -1
        self._fit.put(
            key,
            Fit(ratio=ratio, unseen=unseen, front=min(front, unseen), kinds=kinds, seen=seen, ruled=ruled),
            FIT_LIFETIME,
        )
        self._fit.save()

    def scaled(self, prompt: Prompt) -> Prompt:
        """The prompt with segment token counts in the provider's tokens (approximately)."""
        tools = provider_tools(prompt)
        key = fit_key(prompt, tools)
        self._fit.load(lambda: [key], 0.0)  # fits count their lifetime from 0: they need no clock
        fit = self._fit.get(key)
        if fit is None or not prompt.segments:
            return prompt  # a rule's front (the tool-use prompt) stands as it is until a bill says
        ruled, prompt = round(prompt.front * fit.ruled), _fitted_part(prompt)
        kinds = fit.kinds or (fit.ratio,) * len(KINDS)
        segments = [s.with_tokens(_in_theirs(s, kinds)) for s in prompt.segments]
        # Until a read shows where they sit, they are put in front, where every read starts; but what the
        # provider's own tools add is mostly their results, after the parts that called them.
        front = fit.front if fit.front >= 0 else 0 if tools else fit.unseen
        if front + ruled:
            segments[0] = segments[0].with_tokens(segments[0].tokens + front + ruled)
        # Where a read has shown them in front, they are the provider's own text before every request of the
        # model, read with it (grok-4's hidden system prompt is read by a first request whatever it says). The
        # rest follows every part: a breakpoint on the last part holds none of it (Claude's reply opening: a
        # write at the last user block is the bill less 4).
        return prompt.with_segments(segments, front=max(0, fit.front) + ruled, after=prompt.after + fit.unseen - front)


def _fitted_part(prompt: Prompt) -> Prompt:
    """The prompt without what a rule put in front (the tool-use prompt), which is fitted apart: how much of
    it the bills bear out (Fit.ruled)."""
    if not prompt.front or not prompt.segments:
        return prompt
    first = prompt.segments[0]
    return prompt.with_segments([first.with_tokens(first.tokens - prompt.front), *prompt.segments[1:]], front=0)


def _fitted(seen: Sequence[tuple[int, ...]], text_exact: bool) -> tuple[float, ...]:
    """Ratios per kind: least squares over the latest requests, each kind drawn toward the single ratio of
    the latest request that holds it (ridge), then set together so that the latest request comes out at its
    bill where a tokenizer can explain it. A request without a kind (a short title request between an
    agent's turns) says nothing of that kind's ratio, and moves it not at all."""
    *x, y = seen[-1]
    fixed = [TEXT] if text_exact else []
    free = [k for k in range(len(KINDS)) if k not in fixed]
    rest = y - sum(x[k] for k in fixed)  # what the free kinds (and unseen tokens) must hold
    free_ours = sum(x[k] for k in free)
    if free_ours <= 0:  # nothing to fit: the exact kinds alone, scaled down only where the bill is smaller
        level = min(1.0, y / max(1, sum(x))) if fixed else 1.0
        return tuple(level if k in fixed else 1.0 for k in range(len(KINDS)))
    bound = MAX_KIND_RATIO if text_exact else MAX_RATIO

    def single(row: tuple[int, ...]) -> float:
        ours = sum(row[k] for k in free)
        v = (row[-1] - sum(row[k] for k in fixed)) / ours
        return 1.0 if v > bound else max(1 / bound, v)  # beyond any tokenizer: hidden text, our count kept

    priors = [single(next((row for row in reversed(seen) if row[k] > 0), seen[-1])) for k in free]
    n = len(free)
    if not _varied(seen, free):  # requests of one make-up cannot tell kinds apart: one ratio for all
        return _levelled(priors, x, free, rest, free_ours, text_exact)
    # normal equations of sum (y_i - fixed_i - x_i . r)^2 + sum_k lam_k (r_k - prior_k)^2
    a = [[0.0] * n for _ in range(n)]
    b = [0.0] * n
    for row in seen:
        target = row[-1] - sum(row[k] for k in fixed)
        xs = [row[k] for k in free]
        for i in range(n):
            b[i] += xs[i] * target
            for j in range(n):
                a[i][j] += xs[i] * xs[j]
    for i, k in enumerate(free):
        lam = RIDGE * max(1.0, sum(row[k] * row[k] for row in seen) / len(seen))
        a[i][i] += lam
        b[i] += lam * priors[i]
    r = _solve(a, b) or priors
    return _levelled([min(MAX_KIND_RATIO, max(1 / MAX_KIND_RATIO, v)) for v in r], x, free, rest, free_ours, text_exact)


def _varied(seen: Sequence[tuple[int, ...]], free: Sequence[int]) -> bool:
    """Some request in the window mixes the free kinds in other shares than the latest (by 1% or more)."""

    def shares(row: tuple[int, ...]) -> list[float]:
        total = sum(row[k] for k in free) or 1
        return [row[k] / total for k in free]

    latest = shares(seen[-1])
    return any(max(abs(a - b) for a, b in zip(shares(row), latest, strict=False)) >= 0.01 for row in seen[:-1])


def _levelled(
    r: list[float], x: Sequence[int], free: Sequence[int], rest: int, free_ours: int, text_exact: bool
) -> tuple[float, ...]:
    """The free kinds' ratios set together so that the latest request comes out at its bill, as far as a
    tokenizer explains it. Where it explains the text, what is left is content the provider renders its
    own way (tools, calls: within MAX_KIND_RATIO); else the free kinds together stay within MAX_RATIO of
    our count. A bill beyond that keeps our count (the excess is hidden text, not a tokenizer's), and the
    tokens past it are unseen. Only the kinds the latest request holds are set."""
    bound = MAX_KIND_RATIO if text_exact else MAX_RATIO
    fit = sum(v * x[k] for v, k in zip(r, free, strict=False))
    if fit > 0:
        target = free_ours if rest > bound * free_ours else max(free_ours / bound, rest)
        level = target / fit
        r = [
            min(MAX_KIND_RATIO, max(1 / MAX_KIND_RATIO, v * level)) if x[k] else v
            for v, k in zip(r, free, strict=False)
        ]
    out = [1.0] * len(KINDS)
    for v, k in zip(r, free, strict=False):
        out[k] = v
    return tuple(out)


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """a x = b by Gaussian elimination with partial pivoting (3 unknowns at most); None if singular."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda i: abs(m[i][c]))
        if abs(m[p][c]) < 1e-12:
            return None
        m[c], m[p] = m[p], m[c]
        for i in range(c + 1, n):
            f = m[i][c] / m[c][c]
            for j in range(c, n + 1):
                m[i][j] -= f * m[c][j]
    out = [0.0] * n
    for i in reversed(range(n)):
        out[i] = (m[i][n] - sum(m[i][j] * out[j] for j in range(i + 1, n))) / m[i][i]
    return out


def _in_theirs(seg: Segment, kinds: Sequence[float]) -> int:
    """A part's tokens in the provider's: its text scaled by its kind's ratio, its media as costed."""
    return round((seg.tokens - seg.media_tokens) * kinds[kind_of(seg)]) + seg.media_tokens


def _held_to(prompt: Prompt, kinds: Sequence[float], held: int, end: int, text_exact: bool) -> tuple[float, ...]:
    """The ratios, lowered where our scaled prefix up to `end` runs past what the provider held there:
    the fit put tokens the provider adds after every breakpoint (its tool-use instructions) into the
    prefix, and a read never covers them. The free kinds are lowered together, as far as a tokenizer
    can differ (MAX_RATIO); the rest of the bill is then unseen, after the prefix."""
    head = prompt.segments[: end + 1]
    scaled = sum(_in_theirs(s, kinds) for s in head)
    free = sum((s.tokens - s.media_tokens) * kinds[kind_of(s)] for s in head if not (text_exact and kind_of(s) == TEXT))
    if scaled <= held or free <= 0:
        return tuple(kinds)
    g = 1 - (scaled - held) / free
    if g < 1 / MAX_RATIO:  # it ended short for its own reasons (a foreign write, a minimum)
        return tuple(kinds)
    return tuple(k if text_exact and i == TEXT else k * g for i, k in enumerate(kinds))


def _front(
    prompt: Prompt, kinds: Sequence[float], held: int, read_ends: Sequence[int], step: int = 1
) -> tuple[int, int] | None:
    """Unseen tokens in front, as the cache this request left shows (`held`: what it read plus what it
    wrote, which ends on the furthest breakpoint written, or up to a step short of where it can end): what
    that holds past our scaled tokens up to the furthest place it can end, at least and at most. None when
    it shows nothing (nothing held; or it stops short of every place a read can end, so it ended early for
    its own reasons)."""
    if held <= 0:
        return None
    cum = list(accumulate(_in_theirs(s, kinds) for s in prompt.segments))
    reached = [cum[i] for i in read_ends if 0 <= i < len(cum) and cum[i] < held + step]
    if not reached:
        return None
    end = max(reached)
    return max(0, held - end), held + step - 1 - end
