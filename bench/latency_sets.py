"""Real-shaped data for `bench/recall_latency.py`: what the queried namespaces hold, what
the other namespaces hold, and the questions asked.

Three sets beside the synthetic English one:

- `zh`: MemDaily users (Chinese, ~110 first-person messages each, one namespace per user)
  read at run time from `memdaily-zh-dev.json`; the users' own questions.
- `en`: LoCoMo conversations (English, ~480 turns each) read at run time from
  `locomo-dev.json`, speaker A as `user`, speaker B as `assistant`; their own questions.
- `long`: generated LongMemEval-style histories: a user asks for help, the assistant answers
  at length (numbered advice of 1.5-4k characters, ~2.7k at the median), with a few short
  personal sessions between; questions of LongMemEval's shape ("what did you suggest for
  ...?", "remind me of ...").

Nothing from the evaluation files is kept: they are read where they lie, and the generated set
is made from the word lists below.
"""

from __future__ import annotations

import functools
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.locomo import load  # noqa: E402

DATA_DIR = Path("/work/shared/data")
FILES = {"zh": "memdaily-zh-dev.json", "en": "locomo-dev.json"}


@dataclass
class RealSet:
    """The sessions to store in the queried namespaces (through HTTP), their questions, and a
    source of line texts for the other namespaces (written straight to the repository)."""

    name: str
    sessions: list[tuple[str, str, list[dict[str, Any]]]]  # namespace, session id, messages
    questions: list[tuple[str, str]]  # namespace, question
    filler_lines: list[str] = field(default_factory=list)

    @property
    def namespaces(self) -> list[str]:
        return list(dict.fromkeys(ns for ns, _, _ in self.sessions))

    @property
    def messages(self) -> int:
        return sum(len(m) for _, _, m in self.sessions)


def from_file(name: str, data_dir: Path, namespaces: int) -> RealSet:
    """The first `namespaces` samples of the evaluation file as queried namespaces; every
    sample's lines (role-labelled, as memories hold them) as the other namespaces' text."""
    path = data_dir / FILES[name]
    if not path.exists():
        raise SystemExit(f"{path} is missing: the {name} set reads it at run time")
    samples = load(path)
    chosen = samples[:namespaces]
    sessions = [(s.namespace, sid, msgs) for s in chosen for sid, msgs in s.sessions]
    # Questions interleaved across namespaces, so a short run still visits each of them.
    per_ns = [[(q.namespace, q.text) for q in s.questions] for s in chosen]
    questions = [q for group in _interleave(per_ns) for q in group]
    filler = [f"{m['role']}: {m['content']}" for s in samples for _, msgs in s.sessions
              for m in msgs]
    return RealSet(name, sessions, questions, filler)


def _interleave(groups: list[list[tuple[str, str]]]) -> Iterator[list[tuple[str, str]]]:
    longest = max((len(g) for g in groups), default=0)
    for i in range(longest):
        yield [g[i] for g in groups if i < len(g)]


# --- the generated long-message set -------------------------------------------------------

_SUBJECTS = (
    "a five-day trip to Kyoto", "a week in Lisbon", "a weekend in the Scottish Highlands",
    "training for a half marathon", "learning to bake sourdough", "a vegetable garden on a balcony",
    "a home office setup", "a budget for moving out", "a birthday party for a seven-year-old",
    "a study plan for the GRE", "a beginner guitar routine", "a capsule wardrobe",
    "a meal plan for a busy week", "a reading list on economic history", "a road trip through Utah",
    "a job interview for a data analyst role", "a small wedding on a budget",
    "a podcast about local history", "a resume for a career change", "a strength routine at home",
    "a cat that scratches furniture", "a photography walk in the city", "a family camping trip",
    "a Python course for beginners", "a small online shop for handmade candles",
    "a negotiation for a higher salary", "a language exchange in Spanish", "a winter hike",
    "a dinner party for eight", "a plan to pay off a credit card", "a bathroom renovation",
    "a newsletter for a running club", "a quiet retreat to write a novel",
)
_ASKS = (
    "Can you help me plan {s}?", "I need some advice on {s}.", "What would you suggest for {s}?",
    "Could you put together a detailed plan for {s}?", "I'm thinking about {s}. Where do I start?",
    "Give me your best tips for {s}, please.",
)
_TITLES = (
    "Start early", "Set a budget", "Pick the right tools", "Book ahead", "Keep a log",
    "Rest and recover", "Ask for feedback", "Go local", "Plan for bad weather", "Prepare a backup",
    "Measure twice", "Mind the details", "Build a routine", "Stay flexible", "Choose quality",
    "Compare prices", "Learn the basics", "Invite the right people", "Protect your time",
    "Check the rules", "Pack light", "Track progress", "Celebrate small wins", "Keep it simple",
)
_NOUNS = (
    "morning", "market", "station", "museum", "garden", "kitchen", "notebook", "schedule",
    "neighbourhood", "temple", "river", "bakery", "ticket", "backpack", "spreadsheet", "calendar",
    "coach", "teacher", "landlord", "friend", "partner", "sister", "colleague", "manager",
    "budget", "deposit", "playlist", "checklist", "recipe", "oven", "trail", "campsite", "map",
    "weather", "forecast", "guidebook", "library", "workshop", "studio", "café", "ferry", "bridge",
    "castle", "harbour", "hill", "valley", "beach", "festival", "concert", "exhibition", "course",
)
_ADJECTIVES = (
    "quiet", "affordable", "popular", "seasonal", "traditional", "modern", "reliable", "flexible",
    "comfortable", "practical", "scenic", "lively", "historic", "local", "fresh", "simple",
    "detailed", "realistic", "gentle", "steady", "careful", "generous", "compact", "sturdy",
)
_VERBS = (
    "visit", "reserve", "compare", "prepare", "schedule", "review", "practise", "avoid", "choose",
    "bring", "check", "try", "plan", "measure", "write down", "set aside", "ask about", "book",
)
_SENTENCES = (
    "I would {v} the {a} {n} first, ideally before {t}, because it gets busy later in the day.",
    "Many people {v} a {n} at this stage; a {a} one costs about {p} and lasts for years.",
    "If you can, {v} the {n} near the {n2}: it is {a} and usually less crowded.",
    "Set aside roughly {h} hours for this, and {v} a {a} {n} so you are not rushed.",
    "A {a} option is to {v} the {n} on {d}, when prices drop by around {k} percent.",
    "Keep a {n} of what worked and what did not; after {w} weeks the pattern will be clear.",
    "Don't forget to {v} your {n2} in advance — it is the step most people skip.",
    "For a {a} result, combine the {n} with a short visit to the {n2} afterwards.",
    "Expect to spend between {p} and {p2} in total, depending on how {a} you want it.",
    "On {d}, the {n} is {a}; the {n2} on the other side is a good alternative.",
)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_TIMES = ("8 am", "9 am", "10 am", "noon", "2 pm", "4 pm", "sunset")
_FACTS = (
    "By the way, I just adopted a {a} dog named {name}.",
    "I started a new job at a {a} {n} last {d}.",
    "My {n2} {name} is visiting next month, so I'll be busy.",
    "I finally finished the {a} {n} project I told you about.",
    "I've switched to a {a} diet and I feel much better.",
)
_NAMES = ("Maya", "Tom", "Priya", "Lukas", "Aiko", "Sam", "Elena", "Omar", "Nina", "Jonas")
_QUESTIONS = (
    "What did you suggest for {s}?",
    "Can you remind me what you recommended for {s}?",
    "In our chat about {s}, what was the tip called \"{title}\" about?",
    "How much did you say {s} would cost in total?",
    "What was your advice about the {n} when we talked about {s}?",
    "Remind me: which day did you say was best for {s}?",
)


def _sentence(rng: random.Random) -> str:
    template = rng.choice(_SENTENCES)
    low = rng.randint(2, 40) * 10
    return template.format(
        v=rng.choice(_VERBS), a=rng.choice(_ADJECTIVES), n=rng.choice(_NOUNS),
        n2=rng.choice(_NOUNS), t=rng.choice(_TIMES), p=f"${low}", p2=f"${low * 3}",
        h=rng.randint(2, 6), d=rng.choice(_DAYS), k=rng.randint(10, 40), w=rng.randint(2, 8))


def _say(messages: list[dict[str, Any]], prefix: str, when: datetime, role: str,
         text: str) -> None:
    stamp = when + timedelta(minutes=2 * len(messages))
    messages.append({"msg_id": f"{prefix}-{len(messages)}", "role": role, "content": text,
                     "timestamp": stamp.isoformat()})


def long_answer(rng: random.Random, subject: str) -> tuple[str, list[str], list[str]]:
    """A LongMemEval-style assistant answer about `subject` (numbered advice, 1.5-4k
    characters), the titles of its points and the nouns it mentions (for questions)."""
    titles = rng.sample(_TITLES, rng.randint(5, 9))
    parts = [f"Great question! Here is a detailed plan for {subject}, step by step."]
    for i, title in enumerate(titles, 1):
        body = " ".join(_sentence(rng) for _ in range(rng.randint(2, 5)))
        parts.append(f"{i}. **{title}**: {body}")
    parts.append("In short: " + " ".join(_sentence(rng) for _ in range(2))
                 + " Let me know if you want me to adjust any of this.")
    text = "\n\n".join(parts)
    nouns = [n for n in _NOUNS if f" {n} " in text]
    return text, titles, nouns


def generated_long(namespaces: int, sessions: int = 40, seed: int = 11) -> RealSet:
    """`namespaces` histories of `sessions` sessions each, one session a day (~70% long-answer
    sessions, the rest short personal notes), and questions about the long answers."""
    rng = random.Random(seed)
    start = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
    stored: list[tuple[str, str, list[dict[str, Any]]]] = []
    per_ns: list[list[tuple[str, str]]] = []
    filler: list[str] = []
    for n in range(namespaces):
        namespace = f"long-{n:02d}"
        asked: list[tuple[str, str]] = []
        for s in range(sessions):
            when = start + timedelta(days=s, minutes=rng.randint(0, 600))
            messages: list[dict[str, Any]] = []
            say = functools.partial(_say, messages, f"{namespace}-{s}", when)
            if rng.random() < 0.7:
                for _ in range(rng.randint(1, 2)):
                    subject = rng.choice(_SUBJECTS)
                    say("user", rng.choice(_ASKS).format(s=subject))
                    answer, titles, nouns = long_answer(rng, subject)
                    say("assistant", answer)
                    filler.append(f"assistant: {answer}")
                    asked.append((namespace, rng.choice(_QUESTIONS).format(
                        s=subject, title=rng.choice(titles),
                        n=rng.choice(nouns or list(_NOUNS)))))
            else:
                fact = rng.choice(_FACTS).format(
                    a=rng.choice(_ADJECTIVES), n=rng.choice(_NOUNS), n2=rng.choice(_NOUNS),
                    d=rng.choice(_DAYS), name=rng.choice(_NAMES))
                say("user", fact)
                say("assistant", "That's wonderful to hear! " + _sentence(rng))
                filler.append(f"user: {fact}")
            stored.append((namespace, f"s{s:03d}", messages))
        per_ns.append(asked)
    questions = [q for group in _interleave(per_ns) for q in group]
    return RealSet("long", stored, questions, filler)


def real_set(name: str, data_dir: Path, namespaces: int | None) -> RealSet:
    """The named set with its default number of queried namespaces (sized so each set's
    queried part is a few hundred to a thousand memories and ingests in minutes)."""
    if name == "long":
        return generated_long(namespaces or 3)
    return from_file(name, data_dir, namespaces or {"zh": 20, "en": 3}[name])
