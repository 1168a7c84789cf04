"""Entity extraction for English, Chinese and mixed text.

One pass produces six kinds of terms:

* **technologies** – inline ``code``, ``**bold**`` phrases and known technology names,
  matched case-insensitively but returned in canonical case ("lancedb" → "LanceDB");
* **concepts** – English keywords of 3–15 letters and Chinese words of two or more
  characters from jieba, minus stop words, ranked by frequency;
* **hashtags** – ``#tag`` including Chinese tags (``#向量检索``);
* **quotes** – phrases in "…", “…”, 「…」, 『…』, ‘…’ and clearly delimited '…';
* **proper_nouns** – capitalised English names ("New York", "Alice"), not
  sentence-initial common words; Chinese names of people, places and organisations
  (``zh_names.py``: 张伟, 杭州, 北京协和医院); names glued to a version ("Qwen2.5",
  "iPhone15") whole;
* **bigrams** – adjacent concept pairs that repeat or are both top concepts.

jieba is loaded lazily on the first Chinese text (its dictionary takes about a second to
load); call :func:`warm_up` at start-up to pay that cost before the first request.
"""

from __future__ import annotations

import logging
import re
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Final

import jieba

from app.classify.stopwords import EN_STOP_WORDS, ZH_STOP_WORDS, word_set
from app.classify.zh_names import name_tags, names_in, tagged
from app.scripts import HAN, HAN_RUN

__all__ = ["Entities", "extract_entities", "subtopics", "warm_up"]

logger = logging.getLogger(__name__)

MAX_CONCEPTS: Final = 10
MAX_BIGRAMS: Final = 5
# Longer "code" or "bold" spans are snippets or emphasis, not names of technologies.
_MAX_MARKUP_CHARS: Final = 60
_MAX_QUOTE_CHARS: Final = 120


@dataclass(frozen=True, slots=True)
class Entities:
    """Terms found in a text; every field is ordered by relevance or first appearance."""

    technologies: tuple[str, ...] = ()
    concepts: tuple[str, ...] = ()
    hashtags: tuple[str, ...] = ()
    quotes: tuple[str, ...] = ()
    proper_nouns: tuple[str, ...] = ()
    bigrams: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, list[str]]:
        """The six fields as JSON-ready lists."""
        return {name: list(values) for name, values in asdict(self).items()}

    def all_terms(self) -> list[str]:
        """Every term once (case-insensitive), technologies first, in field order."""
        return _dedupe(
            [
                *self.technologies,
                *self.hashtags,
                *self.proper_nouns,
                *self.bigrams,
                *self.concepts,
                *self.quotes,
            ]
        )


# --------------------------------------------------------------------------- jieba

_jieba_lock = threading.Lock()
_jieba_ready = False


def warm_up() -> None:
    """Load jieba's dictionary now instead of on the first Chinese text (thread-safe)."""
    global _jieba_ready
    if _jieba_ready:
        return
    with _jieba_lock:
        if _jieba_ready:
            return
        jieba.setLogLevel(logging.WARNING)
        # jieba caches its parsed dictionary in a temp dir; pin it to the process temp dir
        # (honours TMPDIR) so a read-only working directory in a container never matters.
        # A failed cache write is only logged by jieba, never raised.
        jieba.dt.tmp_dir = tempfile.gettempdir()
        jieba.initialize()
        name_tags()
        _jieba_ready = True
        logger.debug("jieba dictionary loaded")


def _segment(run: str) -> list[tuple[str, str]]:
    """A run of Chinese cut into dictionary words with the tags names are read from
    (`zh_names.tagged`)."""
    warm_up()
    # HMM discovery of out-of-dictionary words is off: it is most of jieba's time (about
    # 9 of 11 ms on 900 characters) and on chat text it mostly glues fragments together
    # ("表写", "前要"); dictionary words are what concepts need, and names that jieba does
    # not know are found on their own short runs (zh_names.py).
    return tagged(jieba.lcut(run, HMM=False))


def _sub_words(word: str) -> Iterator[str]:
    """Dictionary words inside a long word ("记忆系统" → "记忆", "系统"), as jieba's
    search mode does, so a compound and its parts can both be found."""
    freq: dict[str, int] = jieba.dt.FREQ
    for size in (2, 3):
        for start in range(len(word) - size + 1):
            gram = word[start : start + size]
            if freq.get(gram):
                yield gram


# --------------------------------------------------------------------------- patterns

# E-mail addresses in ASCII only: "\S+@" would rescan every long run of Chinese (which has
# no spaces) from each of its characters.
_URL_RE: Final = re.compile(r"https?://\S+|www\.\S+|[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_FENCE_RE: Final = re.compile(r"```.*?(?:```|$)", re.DOTALL)
# A memory's text is its messages rendered "role: content", one per line
# (app/store/chunker.py). The labels are ours, not the speaker's words: every chat memory
# would list "user" and "assistant" as concepts, and the name opening a line would count
# as sentence-initial and be lost as a proper noun.
ROLE_LABEL_RE: Final = re.compile(r"^(?:user|assistant|system|tool): ", re.MULTILINE)
_CODE_RE: Final = re.compile(rf"`([^`\n]{{1,{_MAX_MARKUP_CHARS}}})`")
_BOLD_RE: Final = re.compile(
    rf"\*\*([^*\n]{{1,{_MAX_MARKUP_CHARS}}})\*\*|__([^_\n]{{1,{_MAX_MARKUP_CHARS}}})__"
)
# A hashtag starts anywhere but right after an ASCII letter or digit ("C#", "page#x"); it
# is either closed by a second "#" (Weibo style "#话题#", as Chinese has no spaces to end
# it) or runs over letters, digits, CJK, "_" and "-" until whitespace or punctuation. Pure
# numbers ("#123") are issue references, not tags.
_HASHTAG_RE: Final = re.compile(
    r"(?<![A-Za-z0-9_&/#＃])[#＃]"
    r"(?:([^#＃\s]{1,40}?)[#＃]|([^\W\d_][\w-]*|\d+[^\W\d][\w-]*))"
)
_QUOTE_RES: Final = (
    *(
        re.compile(rf"{left}([^{right}\n]{{1,{_MAX_QUOTE_CHARS}}}){right}")
        for left, right in ('""', "“”", "「」", "『』", "‘’")
    ),
    # ASCII single quotes double as apostrophes ("don't", "the users' data"), so they only
    # count when no letter touches them from outside and no space from inside.
    re.compile(
        rf"(?<![A-Za-z0-9])'([^'\s][^'\n]{{0,{_MAX_QUOTE_CHARS - 2}}}[^'\s])'(?![A-Za-z0-9])"
    ),
)

# Tokens for concepts and bigrams: an English word, a run of Chinese, a number, or a
# clause break. Other symbols are skipped and do not break adjacency.
_TOKEN_RE: Final = re.compile(
    rf"(?P<en>[A-Za-z]+(?:'[A-Za-z]+)?)|(?P<zh>[{HAN}]+)|(?P<num>\d+(?:[.,]\d+)*)"
    r"|(?P<brk>[.,;:!?()\[\]{}\"“”「」『』…。，、；：！？（）《》【】\n])"
)
_EN_CONCEPT_RE: Final = re.compile(r"[a-z]{3,15}")
# Numbers, alone or with a measure word ("三个", "2000元", "百分之二十"), are not concepts.
_ZH_NUMERAL_RE: Final = re.compile(
    r"[\d零〇一二三四五六七八九十百千万亿两几半第之分点%.]+[个次本天年月日号秒岁元块件条位名种周层家台张]?"
)

# Capitalised names: Title-case or CamelCase words, or short acronyms, joined by single
# spaces and a few lower-case connectors ("Bank of China").
_CAP_WORD: Final = r"(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)*|[A-Z]{2,6})"
_NAME_CONNECTORS: Final = ("of", "of the", "de", "da", "von", "van", "del", "la")
_PROPER_RE: Final = re.compile(
    rf"(?<![A-Za-z0-9'’]){_CAP_WORD}"
    rf"(?:(?: (?:{'|'.join(_NAME_CONNECTORS)}))? {_CAP_WORD})*(?![A-Za-z0-9])"
)
# A name glued to its version: letters, then letters and digits with "." or "-" between
# them ("Qwen2.5", "GPT-4o", "Llama-3.1-8B", "iPhone15"); it must hold a digit and a
# capital or name a known technology, so "mp3" and "utf-8" are left alone. ASCII classes:
# a Chinese character beside it ("用Qwen2.5") is not part of it.
_VERSIONED_RE: Final = re.compile(
    r"(?<![A-Za-z0-9_.\-])[A-Za-z]{2}[A-Za-z0-9]*(?:[-.][A-Za-z0-9]+)*"
    r"(?![A-Za-z0-9_]|[-.][A-Za-z0-9])"
)
_DIGIT_RE: Final = re.compile(r"\d")
_LETTERS_RE: Final = re.compile(r"[A-Za-z]+")
# What may stand before the first word of a sentence (after skipping spaces): sentence
# punctuation, an opening quote, or markdown bullets and headings.
_SENTENCE_OPENERS: Final = frozenset('.!?。！？:：\n"“「*#>-')
# Capitalised but not names: acronyms of chat and engineering, weekday and month names
# (time expressions belong to timestamps, not entities).
_NOT_PROPER: Final = word_set(
    """
    I I'm OK TODO FYI LOL LMAO ASAP BTW TIL IMO IMHO AM PM ETA TBD DM PR API URL CPU GPU RAM
    UI UX ID PDF CSV CI CD QA MVP KPI OKR FAQ TL DR NB PS EOD OMG IDK AFAIK ROI SLA HR
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April
    May June July August September October November December
    """
)


def _names(block: str) -> tuple[str, ...]:
    """Names separated by "|" or line breaks (names may contain spaces)."""
    return tuple(
        name.strip() for line in block.splitlines() for name in line.split("|") if name.strip()
    )


# Known technologies in their canonical spelling, matched case-insensitively.
_TECH_NAMES: Final = _names(
    """
    Python | JavaScript | TypeScript | Java | Kotlin | C++ | C# | PHP | Scala | Haskell
    Elixir | Erlang | Lua | SQL | Bash | PowerShell | HTML | CSS | WebAssembly | Ruby on Rails
    FastAPI | Django | Vue | Svelte | Next.js | Node.js | Deno | Spring Boot | Pydantic
    SQLAlchemy | Uvicorn | Jupyter | Streamlit | Gradio | Tailwind
    PyTorch | TensorFlow | Keras | NumPy | pandas | scikit-learn | LangChain | LlamaIndex
    Hugging Face | sentence-transformers | spaCy | jieba | NLTK | PyArrow | Apache Arrow | Parquet
    LanceDB | PostgreSQL | MySQL | SQLite | MongoDB | Redis | Elasticsearch | OpenSearch
    ClickHouse | Cassandra | DynamoDB | Milvus | Qdrant | Pinecone | Weaviate | ChromaDB | FAISS
    Neo4j | DuckDB | Supabase | Firebase | Kafka | RabbitMQ
    Docker | Kubernetes | Terraform | Ansible | Nginx | Linux | Ubuntu | Debian | macOS | iOS
    Android | Git | GitHub | GitLab | AWS | GCP | Azure | S3 | Cloudflare | Vercel | Prometheus
    Grafana | Jenkins | VS Code | Vim | Neovim | Emacs | JSON | YAML | GraphQL | gRPC
    WebSocket | OAuth | JWT | Telegram | WeChat
    OpenAI | Ollama | ChatGPT | GPT-4o | GPT-4 | GPT-3.5 | Anthropic | Mistral | DeepSeek
    Qwen | Copilot | Stable Diffusion | OpenClaw
    """
)
# Other spellings people use for them: lower-case alias → canonical name.
_TECH_ALIASES: Final[dict[str, str]] = {
    **{name.lower(): name for name in _TECH_NAMES},
    "cpp": "C++",
    "golang": "Go",
    "wasm": "WebAssembly",
    "vue.js": "Vue",
    "nextjs": "Next.js",
    "nodejs": "Node.js",
    "sklearn": "scikit-learn",
    "huggingface": "Hugging Face",
    "postgres": "PostgreSQL",
    "mongo": "MongoDB",
    "k8s": "Kubernetes",
    "vscode": "VS Code",
    "gpt4": "GPT-4",
    "微信": "WeChat",
}
# Names that are also ordinary words ("react", "rust", "slack", "notion", "windows") or
# people's names ("Ruby", "Claude"): only their canonical spelling counts.
_TECH_CASE_SENSITIVE: Final = word_set(
    """
    React Rust Swift Flask Celery Helm Slack Notion Windows Angular Express Rails Ruby Dart
    Jest Whisper Claude Gemini Llama BERT Chroma Lambda Excel Figma
    """
)

_ALNUM_BEFORE: Final = r"(?<![A-Za-z0-9_])"
_ALNUM_AFTER: Final = r"(?![A-Za-z0-9_])"
# Matched on the lower-cased text: five times faster than re.IGNORECASE on this many
# alternatives. Longest aliases first so "vue.js" wins over "vue".
_TECH_RE: Final = re.compile(
    r"(?<![a-z0-9_])(?:"
    + "|".join(re.escape(a) for a in sorted(_TECH_ALIASES, key=len, reverse=True))
    + r")(?![a-z0-9_])"
)
_TECH_CS_RE: Final = re.compile(
    _ALNUM_BEFORE + "(?:" + "|".join(_TECH_CASE_SENSITIVE) + ")" + _ALNUM_AFTER
)
# "Go" is an everyday verb: only the capitalised form next to programming context counts
# ("written in Go", "用 Go 写", "Go 1.22", "Go modules").
_GO_RE: Final = re.compile(_ALNUM_BEFORE + "Go" + _ALNUM_AFTER)
_GO_BEFORE_RE: Final = re.compile(
    r"(?:(?<![A-Za-z])(?:in|with|and|or|learn|learning|using|use|like|write|wrote|writing|rewrite|rewrote)\s+|[用学写和与及、/，,(（]\s*)$",
    re.IGNORECASE,
)
_GO_AFTER_RE: Final = re.compile(
    r"\s*(?:\d|语言|代码|服务|程序|写|和|或|的|(?:module|modules|code|service|services|program|"
    r"binary|binaries|runtime|version|compiler|toolchain|generics|routines?|developers?|"
    r"backend|server|sdk|project|team|and|or)(?![A-Za-z])|[,，/)）])",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------- helpers


def _dedupe(values: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for value in values:
        key = value.casefold()
        if value and key not in seen:
            seen.add(key)
            out.append(value)
    return out


def _versioned(text: str) -> Iterator[re.Match[str]]:
    """Names glued to a version ("Qwen2.5", "GPT-4o"), not "mp3", "utf-8" or "PM2.5"."""
    for m in _VERSIONED_RE.finditer(text):
        token = m.group(0)
        base = token[: _LETTERS_RE.match(token).end()]  # type: ignore[union-attr]
        if (_DIGIT_RE.search(token) and base not in _NOT_PROPER
                and (not token.islower() or base in _TECH_ALIASES)):
            yield m


def _tech_base(token: str) -> bool:
    """Whether a versioned name is a known technology's ("Qwen2.5", "Llama-3.1")."""
    base = token[: _LETTERS_RE.match(token).end()]  # type: ignore[union-attr]
    return base.lower() in _TECH_ALIASES or base in _TECH_CASE_SENSITIVE


def _technologies(text: str, markup_text: str) -> list[str]:
    found: list[tuple[int, str]] = []
    # A known technology with its version is named whole; its bare name at the same
    # place is not added again.
    versions = {m.start(): m.group(0) for m in _versioned(text) if _tech_base(m.group(0))}
    found.extend(versions.items())
    for m in _CODE_RE.finditer(markup_text):
        found.append((m.start(), m.group(1).strip()))
    for m in _BOLD_RE.finditer(markup_text):
        found.append((m.start(), (m.group(1) or m.group(2)).strip()))
    for m in _TECH_RE.finditer(text.lower()):
        if m.start() not in versions:
            found.append((m.start(), _TECH_ALIASES[m.group(0)]))
    for m in _TECH_CS_RE.finditer(text):
        if m.start() not in versions:
            found.append((m.start(), m.group(0)))
    for m in _GO_RE.finditer(text):
        before = text[max(0, m.start() - 12) : m.start()]
        if _GO_BEFORE_RE.search(before) or _GO_AFTER_RE.match(text, m.end()):
            found.append((m.start(), "Go"))
    found.sort(key=lambda item: item[0])
    return _dedupe(value for _, value in found)


def _hashtags(text: str) -> list[str]:
    return _dedupe((m.group(1) or m.group(2)).rstrip("-_") for m in _HASHTAG_RE.finditer(text))


def _quotes(text: str) -> list[str]:
    found: list[tuple[int, str]] = []
    for regex in _QUOTE_RES:
        for m in regex.finditer(text):
            phrase = m.group(1).strip()
            if phrase:
                found.append((m.start(), phrase))
    found.sort(key=lambda item: item[0])
    return _dedupe(value for _, value in found)


def _starts_sentence(text: str, index: int) -> bool:
    index -= 1
    while index >= 0 and text[index] in " \t\r":
        index -= 1
    return index < 0 or text[index] in _SENTENCE_OPENERS


def _proper_nouns(
    text: str, technologies: set[str], segments: dict[int, list[tuple[str, str]]]
) -> list[str]:
    """English names, names with a version and Chinese names, in order of appearance."""
    found: list[tuple[int, str]] = []
    # A versioned name is taken whole, and blanked out (same length, so offsets hold) so
    # that its pieces ("GPT", "Qwen2") are not read as names of their own.
    for m in _versioned(text):
        found.append((m.start(), m.group(0)))
        text = text[: m.start()] + " " * len(m.group(0)) + text[m.end() :]
    for start, tokens in segments.items():
        found.extend((start + offset, name) for offset, name in names_in(tokens))
    matches = [
        (m.start(), m.group(0).split(" "), _starts_sentence(text, m.start()))
        for m in _PROPER_RE.finditer(text)
    ]
    # Words seen capitalised in mid-sentence are names wherever else they appear.
    mid_sentence = {word for _, words, initial in matches if not initial for word in words}
    for start, words, initial in matches:
        if initial:
            # A capital at the start of a sentence says nothing on its own: drop a leading
            # common word ("The", "We", "Yesterday") and keep a lone word only when its
            # shape marks it as a name (CamelCase "OpenClaw", acronym "NASA") or it is
            # capitalised elsewhere too.
            first = words[0]
            if first.lower() in EN_STOP_WORDS or (
                len(words) == 1 and first[1:].islower() and first not in mid_sentence
            ):
                words = words[1:]
        while words and words[-1] in _NAME_CONNECTORS:
            words.pop()
        words = [w for w in words if w not in _NOT_PROPER]
        if not words:
            continue
        found.append((start, " ".join(words)))
    found.sort(key=lambda item: item[0])
    return _dedupe(
        name for _, name in found
        if name.casefold() not in technologies and name.lower() not in EN_STOP_WORDS
    )


@dataclass(frozen=True, slots=True)
class _Token:
    term: str
    position: int
    is_zh: bool


def _is_zh_concept(word: str) -> bool:
    return len(word) >= 2 and word not in ZH_STOP_WORDS and not _ZH_NUMERAL_RE.fullmatch(word)


def _tokens(
    text: str, excluded: set[str], segments: dict[int, list[tuple[str, str]]]
) -> Iterator[_Token | None]:
    """Concept candidates in order; ``None`` marks a break (punctuation or a non-concept
    word), so that bigrams only join words that really stand side by side. ``excluded``
    holds lower-case words already reported as technologies or proper nouns."""
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup
        if kind == "en":
            word = m.group(0).lower()
            if word.endswith("'s"):
                word = word[:-2]
            if (
                _EN_CONCEPT_RE.fullmatch(word)
                and word not in EN_STOP_WORDS
                and word not in excluded
            ):
                yield _Token(word, m.start(), is_zh=False)
            else:
                yield None
        elif kind == "zh":
            offset = m.start()
            for word, _ in segments[offset]:
                yield _Token(word, offset, is_zh=True) if _is_zh_concept(word) else None
                offset += len(word)
        else:
            yield None


def _concepts_and_bigrams(
    text: str,
    excluded: set[str],
    segments: dict[int, list[tuple[str, str]]],
    *,
    max_concepts: int,
    max_bigrams: int,
) -> tuple[list[str], list[str]]:
    counts: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    pair_counts: Counter[str] = Counter()
    pair_parts: dict[str, tuple[str, str]] = {}
    previous: _Token | None = None

    def count(term: str, position: int) -> None:
        counts[term] += 1
        first_seen.setdefault(term, position)

    for token in _tokens(text, excluded, segments):
        if token is None:
            previous = None
            continue
        count(token.term, token.position)
        if token.is_zh and len(token.term) >= 4:
            for part in _sub_words(token.term):
                if _is_zh_concept(part):
                    count(part, token.position)
        if previous is not None and previous.term != token.term:
            joiner = "" if previous.is_zh and token.is_zh else " "
            pair = previous.term + joiner + token.term
            pair_counts[pair] += 1
            pair_parts.setdefault(pair, (previous.term, token.term))
            first_seen.setdefault(pair, previous.position)
        previous = token

    ranked = sorted(counts, key=lambda term: (-counts[term], first_seen[term]))
    concepts = ranked[:max_concepts]
    top = set(concepts)
    bigrams = [
        pair
        for pair in sorted(pair_counts, key=lambda p: (-pair_counts[p], first_seen[p]))
        if pair_counts[pair] >= 2 or (pair_parts[pair][0] in top and pair_parts[pair][1] in top)
    ]
    return concepts, bigrams[:max_bigrams]


# --------------------------------------------------------------------------- public


def extract_entities(
    text: str, *, max_concepts: int = MAX_CONCEPTS, max_bigrams: int = MAX_BIGRAMS
) -> Entities:
    """Extract technologies, concepts, hashtags, quotes, proper nouns and bigrams.

    Works on English, Chinese and mixed text; Chinese is segmented with jieba.

    Args:
        text: any text.
        max_concepts: how many concepts to keep (the most frequent first).
        max_bigrams: how many bigrams to keep.

    Returns:
        The entities, each field without duplicates.

    Example:
        >>> e = extract_entities("我们决定使用 LanceDB 和 #向量检索 来构建记忆系统")
        >>> e.technologies, e.hashtags
        (('LanceDB',), ('向量检索',))
    """
    # Fenced code blocks hold code, not prose: keep them out of every extractor. URLs
    # and e-mail addresses would otherwise yield "https", "#fragment" or "com".
    markup_text = _FENCE_RE.sub(" ", ROLE_LABEL_RE.sub("", text))
    plain = _URL_RE.sub(" ", markup_text)
    technologies = _technologies(plain, markup_text)
    tech_keys = {t.casefold() for t in technologies}
    # Replace the markup with a clause break so "**Redis**" or "`uv sync`" are not read a
    # second time as prose and the words around them do not become a bigram.
    prose = _BOLD_RE.sub(" ; ", _CODE_RE.sub(" ; ", plain))
    # Each run of Chinese is cut once, for names and for concepts.
    segments = {m.start(): _segment(m.group(0)) for m in HAN_RUN.finditer(prose)}
    proper_nouns = _proper_nouns(prose, tech_keys, segments)
    # Names are reported as proper nouns; as concepts they would only come back split
    # and lower-cased ("new", "york", the "qwen" of "Qwen2.5").
    excluded = tech_keys | {w.lower() for name in proper_nouns for w in name.split(" ")}
    excluded |= {
        part.lower() for name in (*technologies, *proper_nouns)
        if _DIGIT_RE.search(name) for part in _LETTERS_RE.findall(name)
    }
    concepts, bigrams = _concepts_and_bigrams(
        prose, excluded, segments, max_concepts=max_concepts, max_bigrams=max_bigrams
    )
    return Entities(
        technologies=tuple(technologies),
        concepts=tuple(concepts),
        hashtags=tuple(_hashtags(plain)),
        quotes=tuple(_quotes(plain)),
        proper_nouns=tuple(proper_nouns),
        bigrams=tuple(bigrams),
    )


# Inline code and bold can be whole phrases; past this length they are not topic labels.
_MAX_SUBTOPIC_CHARS: Final = 30


def subtopics(entities: Entities, limit: int = 5) -> list[str]:
    """A few short labels for what a text is about.

    Technologies and hashtags come first (they are explicit topic markers), then proper
    nouns, bigrams and the most frequent concepts. A concept already contained in a chosen
    label ("记忆" next to "记忆系统") is skipped.

    Args:
        entities: the result of :func:`extract_entities`.
        limit: the most labels to return.

    Returns:
        Up to ``limit`` labels, without duplicates.
    """
    chosen: list[str] = []
    keys: list[str] = []
    for label in (
        *entities.technologies,
        *entities.hashtags,
        *entities.proper_nouns,
        *entities.bigrams,
        *entities.concepts,
    ):
        if len(chosen) >= limit:
            break
        key = label.casefold()
        if len(label) > _MAX_SUBTOPIC_CHARS or any(key in k for k in keys):
            continue
        chosen.append(label)
        keys.append(key)
    return chosen
