"""Summaries of a cluster of memories: extractive by default, abstractive when configured.

**Extractive** (no model, deterministic): the cluster's texts are cut into propositions
(sentences with their speaker; repeats from overlapping chunks dropped). Propositions
stating a fact — a number, time or date, or a named entity of the sources — are kept
first (the facts people ask for, and the answers of the quality gate's probes). A proposition's
information is the summed inverse document frequency, within the cluster, of its distinct
content tokens, plus a bonus for numbers and dates (the facts people ask for). Propositions
are picked greedily by *new* information per square root of length — what a proposition
adds that the picked ones do not already say — until the summary holds about
`ratio` of the cluster's distinct text (between `min_chars` and `max_chars`). They are
written back in their original order, consecutive sentences of one message on one line.
Small talk carries no information and is never picked.

**Abstractive** (optional): an OpenAI-compatible chat-completions endpoint writes the
summary. Any failure (network, status, empty answer) falls back to the extractive one, so
a misconfigured endpoint never stops compression.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import httpx
import structlog

from app.classify.smalltalk import is_small_talk
from app.compression import lexicon
from app.compression.text import Proposition, content_tokens, propositions
from app.scripts import has_han

log = structlog.get_logger(__name__)

_NUMBER_BONUS = 1.5


def _render(chosen: Sequence[Proposition]) -> str:
    lines: list[str] = []
    previous: Proposition | None = None
    for prop in chosen:
        if previous is not None and previous.line == prop.line:
            joiner = "" if has_han(lines[-1][-1:]) else " "
            lines[-1] += joiner + prop.text
        else:
            lines.append(prop.render())
        previous = prop
    return "\n".join(lines)


def extractive_summary(
    texts: Sequence[str], *, ratio: float = 0.4, min_chars: int = 60, max_chars: int = 1200,
    keep_terms: Sequence[str] = (), facts: Sequence[str] = (),
) -> str:
    """The most informative propositions of `texts`, in order.

    Args:
        texts: the memory texts of one cluster, in time order.
        ratio: share of the distinct text to keep.
        min_chars, max_chars: bounds of the summary's length (before kept terms).
        keep_terms: terms that must stay findable: any the picked propositions miss is
            listed on a last `terms:` line (the long technical preset).
        facts: named entities of the sources. A proposition holding one of them or a
            number, time or date states a fact someone may ask for: such propositions
            are picked first, within `max_chars` (the ratio budget applies to the rest),
            so the quality gate's probe questions keep their answers.
    """
    props = propositions(list(texts))
    if not props:
        return ""
    bags = [set(content_tokens(p.text)) for p in props]
    df: Counter[str] = Counter(t for bag in bags for t in bag)
    n = len(props)
    idf = {t: math.log((n + 1) / (count + 1)) + 1.0 for t, count in df.items()}
    numbers = [len(lexicon.NUMBER_DATE_RE.findall(p.text)) for p in props]
    chatter = [is_small_talk(p.text) for p in props]
    total = sum(len(p.render()) + 1 for p in props)
    budget = min(max_chars, max(min_chars, int(ratio * total)))

    chosen: set[int] = set()
    covered: set[str] = set()
    used = 0
    lowered = [f.casefold() for f in facts if len(f) > 1]
    factual = [i for i, p in enumerate(props) if not chatter[i] and (
        numbers[i] or any(f in p.text.casefold() for f in lowered))]
    for i in sorted(factual, key=lambda i: -numbers[i]):
        size = len(props[i].render()) + 1
        if used + size <= max_chars:
            chosen.add(i)
            covered |= bags[i]
            used += size
    while True:
        best, best_gain = -1, 0.0
        for i, prop in enumerate(props):
            if i in chosen or chatter[i]:
                continue
            size = len(prop.render()) + 1
            if chosen and used + size > budget:
                continue
            new = sum(idf[t] for t in bags[i] - covered)
            gain = (new + (_NUMBER_BONUS * numbers[i] if new else 0.0)) / math.sqrt(size)
            if gain > best_gain:
                best, best_gain = i, gain
        if best < 0:
            break
        chosen.add(best)
        covered |= bags[best]
        used += len(props[best].render()) + 1
    if not chosen:  # all small talk: keep the first proposition so nothing reads as empty
        chosen.add(0)
    summary = _render([props[i] for i in sorted(chosen)])
    missing = [t for t in dict.fromkeys(keep_terms) if t.casefold() not in summary.casefold()]
    if missing:
        summary += "\nterms: " + ", ".join(missing)
    return summary


_PROMPT_EN = ("Summarise these conversation excerpts as a few short factual statements. Keep "
              "every name, date, number and decision. At most {limit} characters. Answer with "
              "the summary only.")
_PROMPT_ZH = ("把下面的对话片段概括成几条简短的事实陈述，保留所有人名、日期、数字和决定，"
              "不超过{limit}个字。只输出摘要。")


class AbstractiveSummarizer:
    """Summaries from an OpenAI-compatible `POST {base_url}/chat/completions`."""

    def __init__(self, base_url: str, *, model: str, api_key: str = "", timeout: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=headers,
                                         timeout=timeout, transport=transport)
        self._model = model

    async def close(self) -> None:
        await self._client.aclose()

    async def summarize(self, texts: Sequence[str], *, max_chars: int) -> str | None:
        """The endpoint's summary, or None when it cannot give one (logged)."""
        joined = "\n---\n".join(texts)
        prompt = (_PROMPT_ZH if has_han(joined) else _PROMPT_EN).format(limit=max_chars)
        body = {"model": self._model, "temperature": 0,
                "messages": [{"role": "system", "content": prompt},
                             {"role": "user", "content": joined}]}
        try:
            response = await self._client.post("/chat/completions", json=body)
            response.raise_for_status()
            content = response.json()["choices"][0]["message"]["content"]
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            log.warning("abstractive_summary_failed", error=str(exc)[:200])
            return None
        text = str(content or "").strip()
        return text[: max_chars * 2] or None
