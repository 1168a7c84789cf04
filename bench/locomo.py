"""Evidence recall of Engram on LoCoMo (and MemDaily, same schema), through the HTTP API.

Protocol: ../shared/BENCHMARK.md. One namespace per conversation, one store call per session
(`msg_id` = `dia_id`, text `"<speaker>: <text>"` plus ` [shares <caption>]`, timestamp = the
session date, or the turn's own time when the file has one), then one recall per question
and setting. Evidence recall of a question = the share of its evidence dia_ids among the
msg_ids of the returned memories; reported per category and overall at token budgets
(top_k not binding) and at top-k (budget not binding), with the tokens and turns returned,
hit@1 (the first returned memory holds an evidence turn) and recall latency.

Usage::

    PYTHONPATH=. .venv/bin/python bench/locomo.py ../shared/data/locomo-dev.json
    PYTHONPATH=. .venv/bin/python bench/locomo.py ../shared/data/memdaily-zh-dev.json
    # the other role protocol (every turn stored as `user`); always report both:
    PYTHONPATH=. .venv/bin/python bench/locomo.py ../shared/data/locomo-dev.json --roles user
    # keep the ingested store and try other recall settings on it:
    ... bench/locomo.py DATA --data-dir /tmp/engram-locomo --set recall_equivalents=false

The data never enters the repository: the script reads it from the path given. The app runs
in-process (httpx over ASGI, the real lifespan, the real model); `--url` targets a running
server instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

CATEGORY_NAMES = {
    1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
    11: "simple", 12: "conditional", 13: "comparative", 14: "aggregative",
    15: "post_processing", 16: "noisy",
}
SKIPPED_CATEGORIES = {5}  # LoCoMo adversarial: no usable evidence
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_EVIDENCE_ID = re.compile(r"^D(\d+):(\d+)$")


# --- data ------------------------------------------------------------------------------


@dataclass
class Question:
    namespace: str
    text: str
    category: int
    evidence: set[str]


@dataclass
class Sample:
    namespace: str
    sessions: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def parse_session_date(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def normalise_evidence(raw: Iterable[str], known: set[str]) -> set[str]:
    """BENCHMARK.md rule 4: split on `;`, `,` and spaces, `D:11:26` -> `D11:26`, strip
    leading zeros, drop ids that do not exist."""
    found: set[str] = set()
    for item in raw:
        for part in re.split(r"[;,\s]+", str(item)):
            part = re.sub(r"^D:(\d)", r"D\1", part.strip())
            match = _EVIDENCE_ID.match(part)
            if match:
                dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
                if dia_id in known:
                    found.add(dia_id)
    return found


ROLE_PROTOCOLS = ("speakers", "user")


def role_of(speaker: str, speaker_a: str | None, protocol: str) -> str:
    """BENCHMARK.md's two role protocols: `speakers` stores speaker A as `user` and speaker
    B as `assistant` (a chat with an assistant); `user` stores every turn as `user` (notes,
    imports, group chats)."""
    if protocol == "user":
        return "user"
    return "user" if speaker == speaker_a else "assistant"


def load(path: Path, *, limit: int | None = None, roles: str = "speakers") -> list[Sample]:
    samples: list[Sample] = []
    for raw in json.loads(path.read_text(encoding="utf-8"))[:limit]:
        conv = raw["conversation"]
        sample = Sample(namespace=re.sub(r"[^A-Za-z0-9_.:-]", "-", raw["sample_id"])[:128])
        speaker_a = conv.get("speaker_a")
        known: set[str] = set()
        numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.match(k)))
        for n in numbers:
            turns = conv[f"session_{n}"]
            if not turns:
                continue
            date = parse_session_date(conv[f"session_{n}_date_time"])
            messages = []
            for turn in turns:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares {turn['blip_caption']}]"
                when = (datetime.strptime(turn["time"], "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
                        if turn.get("time") else date)
                messages.append({
                    "msg_id": turn["dia_id"],
                    "role": role_of(turn["speaker"], speaker_a, roles),
                    "content": text,
                    "timestamp": when.isoformat(),
                })
                known.add(turn["dia_id"])
            sample.sessions.append((f"session_{n}", messages))
        for qa in raw["qa"]:
            if qa["category"] in SKIPPED_CATEGORIES:
                continue
            evidence = normalise_evidence(qa.get("evidence", []), known)
            if evidence:
                sample.questions.append(
                    Question(sample.namespace, qa["question"], qa["category"], evidence))
        samples.append(sample)
    return samples


# --- client ----------------------------------------------------------------------------


def setting_overrides(items: Iterable[str]) -> dict[str, Any]:
    """`--set NAME=VALUE` items as Settings keyword arguments: a value that parses as JSON
    (numbers, true/false, lists) is that, anything else a plain string."""
    overrides: dict[str, Any] = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return overrides


@asynccontextmanager
async def engram_client(args: argparse.Namespace) -> AsyncIterator[httpx.AsyncClient]:
    if args.url:
        headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
        async with httpx.AsyncClient(base_url=args.url, headers=headers, timeout=300) as client:
            yield client
        return
    from app.config import Settings
    from app.main import create_app

    # Retrieval is measured on a store that the measurement does not change: the
    # compression scheduler (its own benchmark) would turn these year-old conversations into
    # summaries halfway through the run, and recall hits would promote the memories asked
    # about most to the long-term tier (boosted, listed first), so that each question's
    # answer would depend on the questions before it.
    # No recall deadline: quality is that of the complete recall, whatever the machine's
    # load (a degraded answer would make the figure depend on it).
    overrides: dict[str, Any] = {"log_level": "WARNING", "compression_enabled": False,
                                 "recall_deadline_ms": 0,
                                 "promote_daily_hits": 10**9, "promote_longterm_hits": 10**9}
    overrides.update(setting_overrides(args.set))
    settings = Settings(data_dir=Path(args.data_dir), environment="testing",
                        _env_file=None, **overrides)  # type: ignore[call-arg]
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engram.bench",
                                     timeout=300) as client:
            client.app = app  # type: ignore[attr-defined]
            yield client


async def settle(client: httpx.AsyncClient) -> None:
    """In-process only: finish queued builds and run the maintenance pass (compaction folds
    the new rows into the indexes), as an idle server does on its own within seconds."""
    app = getattr(client, "app", None)
    if app is None:
        return
    state = app.state.engram
    await state.store.idle()
    started = time.perf_counter()
    await state.maintenance.run_once(force=True)
    print(f"  maintenance pass: {time.perf_counter() - started:.1f} s", file=sys.stderr)


async def ingest(client: httpx.AsyncClient, samples: list[Sample], *, parallel: int) -> None:
    started = time.perf_counter()
    gate = asyncio.Semaphore(parallel)
    done = 0
    total = sum(len(s.sessions) for s in samples)

    async def store_sample(sample: Sample) -> None:
        nonlocal done
        async with gate:
            for session_id, messages in sample.sessions:
                response = await client.post("/v1/store", json={
                    "namespace": sample.namespace, "session_id": session_id,
                    "messages": messages, "source": "import", "wait": "built"})
                response.raise_for_status()
                done += 1
        print(f"\r  stored {done}/{total} sessions", end="", file=sys.stderr, flush=True)

    await asyncio.gather(*(store_sample(s) for s in samples))
    messages = sum(len(m) for s in samples for _, m in s.sessions)
    seconds = time.perf_counter() - started
    print(f"\n  ingest: {messages} messages in {seconds:.1f} s "
          f"({messages / seconds:.0f} msg/s)", file=sys.stderr)


# --- evaluation ------------------------------------------------------------------------


@dataclass
class Outcome:
    recall: float
    hit1: bool
    tokens: int
    turns: int
    memories: int
    seconds: float
    first: list[str] = field(default_factory=list)  # msg_ids of the first memory
    missed: list[str] = field(default_factory=list)  # evidence not returned
    # (memory id, its msg_ids, score) in the order returned: what a refactor must keep
    returned: list[tuple[str, list[str], float]] = field(default_factory=list)


@dataclass
class Setting:
    label: str
    max_tokens: int
    top_k: int


async def recall_one(client: httpx.AsyncClient, q: Question, setting: Setting,
                     extra: dict[str, Any]) -> Outcome:
    body = {"namespace": q.namespace, "query": q.text, "max_tokens": setting.max_tokens,
            "top_k": setting.top_k, **extra}
    started = time.perf_counter()
    response = await client.post("/v1/recall", json=body)
    seconds = time.perf_counter() - started
    response.raise_for_status()
    result = response.json()
    memories = result["memories"]
    returned = {i for m in memories for i in m["msg_ids"]}
    first = set(memories[0]["msg_ids"]) if memories else set()
    return Outcome(
        recall=len(q.evidence & returned) / len(q.evidence),
        hit1=bool(q.evidence & first),
        tokens=int(result["tokens"]),
        turns=len(returned),
        memories=len(memories),
        seconds=seconds,
        first=sorted(first),
        missed=sorted(q.evidence - returned),
        returned=[(m["id"], m["msg_ids"], m["score"]) for m in memories],
    )


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


def report(questions: list[Question], results: dict[str, list[Outcome]],
           settings: list[Setting], *, title: str) -> str:
    categories = sorted({q.category for q in questions})
    lines = [f"### {title}", "",
             "| setting | " + " | ".join(f"{CATEGORY_NAMES.get(c, c)} ({c})" for c in categories)
             + " | **overall** | hit@1 | tokens (mean) | turns (mean) | memories (mean) |",
             "|---" * (len(categories) + 6) + "|"]
    for s in settings:
        outcomes = results[s.label]
        by_cat: dict[int, list[float]] = defaultdict(list)
        for q, o in zip(questions, outcomes, strict=True):
            by_cat[q.category].append(o.recall)
        cells = [f"{statistics.mean(by_cat[c]):.3f}" for c in categories]
        overall = statistics.mean(o.recall for o in outcomes)
        lines.append(
            f"| {s.label} | " + " | ".join(cells) + f" | **{overall:.3f}** | "
            f"{statistics.mean(o.hit1 for o in outcomes):.3f} | "
            f"{statistics.mean(o.tokens for o in outcomes):.0f} | "
            f"{statistics.mean(o.turns for o in outcomes):.1f} | "
            f"{statistics.mean(o.memories for o in outcomes):.1f} |")
    counts = ", ".join(f"{CATEGORY_NAMES.get(c, c)} {sum(q.category == c for q in questions)}"
                       for c in categories)
    lines += ["", f"{len(questions)} questions ({counts})."]
    latencies = [o.seconds * 1000 for s in settings for o in results[s.label]]
    if not latencies:
        return "\n".join(lines)  # ingest only
    lines.append(
        f"Recall latency over {len(latencies)} calls (in-process HTTP, sequential): "
        f"p50 {percentile(latencies, 50):.1f} ms, p95 {percentile(latencies, 95):.1f} ms, "
        f"p99 {percentile(latencies, 99):.1f} ms.")
    return "\n".join(lines)


async def evaluate(args: argparse.Namespace) -> str:
    samples = load(Path(args.data), limit=args.samples, roles=args.roles)[::args.every]
    questions = [q for s in samples for q in s.questions]
    if args.with_list_terms:
        questions = [q for q in questions if has_list_term(q.text)]
    settings = [Setting(f"budget {b}", b, 100) for b in args.budgets]
    settings += [Setting(f"top-{k}", 32_000, k) for k in args.topks]
    extra: dict[str, Any] = {}
    if args.min_score is not None:
        extra["min_score"] = args.min_score
    async with engram_client(args) as client:
        if not args.skip_ingest:
            await ingest(client, samples, parallel=args.parallel)
        await settle(client)
        results: dict[str, list[Outcome]] = {}
        for setting in settings:
            started = time.perf_counter()
            results[setting.label] = [await recall_one(client, q, setting, extra)
                                      for q in questions]
            print(f"  {setting.label}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
        cross = await unrelated(client, samples, extra) if args.cross else None
    if args.dump:
        write_dump(Path(args.dump), questions, results)
    title = f"{Path(args.data).name}, roles: {args.roles}" + (
        f" ({' '.join(args.set)})" if args.set else "")
    text = report(questions, results, settings, title=title)
    if cross is not None:
        text += (f"\nAsked of another sample's namespace (defaults: 1,500 tokens, top-10), "
                 f"{cross[0]:.0%} of the questions got any memory back, "
                 f"{cross[1]:.2f} memories per question on average.")
    return text


def has_list_term(question: str) -> bool:
    """Whether a question holds a word of recall's word lists (app/recall/data/): the only
    questions `--set recall_equivalents=false` can change, but for a second hop whose line
    holds one (the hop starts from one speaker's statements only, rare in dialogue)."""
    from app.recall.text import _EQUIVALENTS, query_terms
    terms = query_terms(question)
    return any(t in _EQUIVALENTS for t in (*terms.latin, *terms.cjk))


def write_dump(path: Path, questions: list[Question],
               results: dict[str, list[Outcome]]) -> None:
    """Each question's outcome per setting, for looking at the misses (JSON lines)."""
    rows = [json.dumps({
        "namespace": q.namespace, "question": q.text, "category": q.category,
        "evidence": sorted(q.evidence),
        "results": {label: {"recall": round(outcomes[index].recall, 3),
                            "first": outcomes[index].first, "missed": outcomes[index].missed,
                            "returned": outcomes[index].returned}
                    for label, outcomes in results.items()},
    }, ensure_ascii=False) for index, q in enumerate(questions)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


async def unrelated(client: httpx.AsyncClient, samples: list[Sample],
                    extra: dict[str, Any]) -> tuple[float, float]:
    """What `min_score` lets through when the store holds nothing on the question: every
    question asked of the next sample's namespace."""
    counts = []
    for i, sample in enumerate(samples):
        other = samples[(i + 1) % len(samples)].namespace
        for q in sample.questions:
            response = await client.post("/v1/recall", json={
                "namespace": other, "query": q.text, **extra})
            response.raise_for_status()
            counts.append(response.json()["count"])
    return (sum(c > 0 for c in counts) / len(counts), statistics.mean(counts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="locomo-dev.json or memdaily-zh-dev.json (same schema)")
    parser.add_argument("--data-dir", default="",
                        help="Engram data directory to use and keep (default: a temporary one)")
    parser.add_argument("--skip-ingest", action="store_true",
                        help="the data directory already holds the store")
    parser.add_argument("--roles", choices=ROLE_PROTOCOLS, default="speakers",
                        help="role protocol: speaker A user / B assistant, or every turn "
                             "user (BENCHMARK.md; measure both; a kept --data-dir holds "
                             "one protocol's store)")
    parser.add_argument("--samples", type=int, default=None, help="only the first N samples")
    parser.add_argument("--every", type=int, default=1,
                        help="only every N-th sample (a spread-out subset)")
    parser.add_argument("--budgets", type=lambda s: [int(x) for x in s.split(",") if x],
                        default=[500, 1000, 1500])
    parser.add_argument("--topks", type=lambda s: [int(x) for x in s.split(",") if x],
                        default=[1, 5, 10])
    parser.add_argument("--min-score", type=float, default=None,
                        help="per-call min_score (default: the server's)")
    parser.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE",
                        help="a Settings override for the in-process app, e.g. "
                             "chunk_max_turns=4 (repeatable)")
    parser.add_argument("--cross", action="store_true",
                        help="also ask every question of an unrelated namespace")
    parser.add_argument("--parallel", type=int, default=2, help="namespaces ingested at once")
    parser.add_argument("--url", default="", help="a running server instead of in-process")
    parser.add_argument("--api-key", default=os.environ.get("ENGRAM_API_KEY", ""))
    parser.add_argument("--out", default="", help="also append the markdown report here")
    parser.add_argument("--with-list-terms", action="store_true",
                        help="only the questions holding a word of recall's word lists "
                             "(what recall_equivalents=false can change; merge with a full "
                             "run's --dump for the overall figure)")
    parser.add_argument("--dump", default="",
                        help="write each question's outcome per setting here (JSON lines)")
    args = parser.parse_args()
    if not args.url and not args.data_dir:
        args.data_dir = tempfile.mkdtemp(prefix="engram-bench-")
    text = asyncio.run(evaluate(args))
    print(text)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(text + "\n\n")


if __name__ == "__main__":
    main()
