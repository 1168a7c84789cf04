"""Bilingual text pieces the compression engine works on: tokens and propositions.

English is split into lower-cased words and numbers; Chinese runs are segmented with jieba
(dictionary words, no HMM, as the entity extractor does), so "我们决定用LanceDB" yields
我们 / 决定 / 用 / lancedb. Content tokens drop English and Chinese stop words, including the
single-character function words (的, 了, 吗…) that jieba returns on their own.

A memory's text is lines of `role: content`; a **proposition** is one sentence of one line,
kept with its speaker so that an extractive summary still says who said what.

Pure functions, no storage and no model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import jieba

from app.classify.entities import warm_up
from app.classify.stopwords import EN_STOP_WORDS, ZH_STOP_WORDS, word_set
from app.scripts import HAN

_TOKEN_RE: Final = re.compile(
    rf"(?P<zh>[{HAN}]+)|(?P<en>[A-Za-z][A-Za-z'’]*)|(?P<num>\d+(?:[.:/-]\d+)*)"
)
# Single Chinese characters that carry grammar, not content.
ZH_FUNCTION_CHARS: Final = word_set(
    """
    的 了 是 我 你 他 她 它 在 有 和 就 也 都 很 吗 呢 吧 啊 哦 嗯 呀 这 那 个 不 没 要 会 能 去 来
    说 看 想 对 好 把 被 给 让 跟 与 及 或 还 又 再 才 只 但 而 从 向 到 于 为 以 之 其 等 着 过 地
    得 么 啦 哈 嘛 呗 哎 喔 噢 诶 一 上 下 里 中 多 少 大 小 些 点 用 做 当 已 可 并 最 更 太 挺
    """
)
_ROLE_PREFIX: Final = re.compile(r"^(?:user|assistant|system|tool)\s*:\s*", re.IGNORECASE)
# A name before a colon at the start of a message ("Caroline: …", "小王：…"). Chinese names
# are two or three characters; longer runs before a colon are content ("注意事项：…").
_SPEAKER_PREFIX: Final = re.compile(
    rf"^((?:[A-Z][\w'.-]*)(?: [A-Z][\w'.-]*){{0,2}}|[{HAN}]{{2,3}})\s*[:：]\s*"
)
_SENTENCE_SPLIT: Final = re.compile(r"(?<=[.!?。！？；;…])\s+|(?<=[。！？；…])")
_WS: Final = re.compile(r"\s+")


def tokens(text: str) -> list[str]:
    """Every word and number of `text` in order: English lower-cased, Chinese segmented."""
    out: list[str] = []
    for m in _TOKEN_RE.finditer(text):
        if m.lastgroup == "zh":
            warm_up()
            out.extend(jieba.lcut(m.group(0), HMM=False))
        elif m.lastgroup == "en":
            word = m.group(0).lower().replace("’", "'")
            out.append(word[:-2] if word.endswith("'s") else word)
        else:
            out.append(m.group(0))
    return out


def is_content(token: str) -> bool:
    if not token:
        return False
    if token[0].isascii():
        return token.isdigit() or (len(token) > 1 and token not in EN_STOP_WORDS)
    if len(token) == 1:
        return token not in ZH_FUNCTION_CHARS
    return token not in ZH_STOP_WORDS


def content_tokens(text: str) -> list[str]:
    """The tokens that carry content: no stop words, no function characters."""
    return [t for t in tokens(text) if is_content(t)]


@dataclass(frozen=True, slots=True)
class Proposition:
    """One sentence of one message, with who said it."""

    speaker: str
    text: str
    line: int  # index of the message line it came from, across all given texts

    def render(self) -> str:
        return f"{self.speaker}: {self.text}" if self.speaker else self.text


def split_speaker(line: str) -> tuple[str, str]:
    """(speaker, content) of a memory line: the role prefix is dropped, a name kept.

    >>> split_speaker("user: Caroline: I went to the support group.")
    ('Caroline', 'I went to the support group.')
    """
    rest = _ROLE_PREFIX.sub("", line.strip(), count=1)
    role = line.strip()[: len(line.strip()) - len(rest)].rstrip(": ").strip()
    named = _SPEAKER_PREFIX.match(rest)
    if named:
        return named.group(1), rest[named.end():].strip()
    return role, rest.strip()


def strip_roles(text: str) -> str:
    """The text without the `role:` prefix of each line."""
    return "\n".join(_ROLE_PREFIX.sub("", line.strip(), count=1) for line in text.splitlines())


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_SPLIT.split(text) if s and s.strip()]


def propositions(texts: list[str]) -> list[Proposition]:
    """The propositions of memory texts in order; exact repeats (chunk overlap) dropped."""
    seen: set[str] = set()
    found: list[Proposition] = []
    line_no = 0
    for text in texts:
        for line in text.splitlines():
            if not line.strip():
                continue
            speaker, content = split_speaker(line)
            for sentence in sentences(content):
                key = _WS.sub(" ", f"{speaker}\x1f{sentence}").casefold()
                if key in seen:
                    continue
                seen.add(key)
                found.append(Proposition(speaker, sentence, line_no))
            line_no += 1
    return found
