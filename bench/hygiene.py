"""Recall hygiene: what an assistant injects when it recalls on every turn, through the API.

Scenario sets written for this bench from everyday user scenarios (bench/hygiene/*.jsonl;
never from evaluation data), in Chinese, English and mixed text. Each case's namespace holds
a realistic background (bench/hygiene/background.jsonl: a dozen facts of one user, or a
timeline of dated sessions) plus the case's own sessions; cases of one `group` share a
namespace, as the several facts of one user do. One store call per session, with its
conversation time. Families and the metric a case passes on:

- **changed** (changed facts): an older statement, then months later in another session a
  newer one that changes it; the question asks the current value. Pass: the newer fact's
  memory is returned and ranked before the older one. Also reported: the older one returned
  at all.
- **smalltalk**: greetings, thanks, jokes, acknowledgements, on a namespace of real facts.
  Pass: recall returns nothing.
- **unanswerable**: a question whose answer is not stored, asked `repeat` times (5). Pass:
  every ask returns nothing. Then the hits are flushed and the namespace's memories read
  (GET /v1/memories): memories with hits and promotions to `daily` / `longterm` are
  reported; the target is 0 promotions.
- **ridealong**: answerable questions on the background. Pass: no returned memory's
  `explain.relevance` is below the response's `min_score` (stricter than the stated floor,
  `context_min_score`, down to which context fills after an answer), and POST
  /v1/recall/why_not on the returned ids calls every one of them `recalled`. Also
  reported: the answer first. Ride-alongs and why_not are also counted over every recall of
  every family (the last lines of the report).
- **dated**: questions naming a day, week, month or relative period (with and without a
  year), on a timeline of sessions; `as_of` is the case's fixed "now", so relative dates and
  yearless dates resolve the same on every run. Pass: for a period holding sessions,
  something is returned and every returned memory lies in the period (and `best`, when
  given, comes first); for an empty period, nothing is returned.
- **crosslang**: a fact stored in one language, asked in the other (food, places, money,
  dates, people). Pass: the fact's memory comes first. `lang` is the question's language.

Targets (issue 34): changed >= 95 %, smalltalk 100 %, 0 promotions from unanswerable
questions, crosslang >= 90 %, dated >= 90 %.

Usage::

    PYTHONPATH=. .venv/bin/python bench/hygiene.py                 # in-process, temp store
    PYTHONPATH=. .venv/bin/python bench/hygiene.py --dump /tmp/hygiene.jsonl --failures 5
    PYTHONPATH=. .venv/bin/python bench/hygiene.py --families changed,dated
    PYTHONPATH=. .venv/bin/python bench/hygiene.py --url http://127.0.0.1:8420 --flush-wait 12

The in-process app keeps the default promotion thresholds (the unanswerable family measures
them) and flushes hits only when a family asks for it; `--url` waits `--flush-wait` seconds
for the server's own flush instead (its `hit_flush_seconds`). Namespaces are named
`hyg-<family>-<group>`; against a server, use one that holds no such namespace.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

CASES_DIR = Path(__file__).resolve().parent / "hygiene"
FAMILIES = ("changed", "smalltalk", "unanswerable", "ridealong", "dated", "crosslang")
LANGS = ("zh", "en", "mixed")
METRICS = {
    "changed": "newer fact ranked before the older",
    "smalltalk": "returns nothing",
    "unanswerable": "returns nothing, every ask",
    "ridealong": "no memory below min_score, why_not agrees",
    "dated": "in the named period (best first); empty period: nothing",
    "crosslang": "the answer's memory first",
}
# The fields each family's cases must carry besides id, lang, group, background, question.
REQUIRED = {
    "changed": ("sessions", "old", "new"),
    "smalltalk": (),
    "unanswerable": ("repeat",),
    "ridealong": ("answer",),
    "dated": ("as_of", "period", "best"),
    "crosslang": ("sessions", "answer"),
}
MIN_CASES = 30


# --- cases -------------------------------------------------------------------------------


@dataclass
class Session:
    session: str
    time: datetime
    messages: list[dict[str, str]]

    def body(self, namespace: str) -> dict[str, Any]:
        """The store request: msg_ids 1, 2, 3 as a client numbers a session's messages."""
        return {"namespace": namespace, "session_id": self.session, "messages": [
            {"msg_id": str(i), "role": m["role"], "content": m["content"],
             "timestamp": self.time.isoformat()} for i, m in enumerate(self.messages, 1)],
            "wait": "built"}


@dataclass
class Case:
    id: str
    family: str
    lang: str
    group: str
    background: str | None
    question: str
    sessions: list[Session] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def namespace(self) -> str:
        return f"hyg-{self.family}-{self.group}"


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _session(raw: dict[str, Any]) -> Session:
    return Session(raw["session"], _time(raw["time"]), list(raw["messages"]))


def load_backgrounds(directory: Path = CASES_DIR) -> dict[str, list[Session]]:
    sets: dict[str, list[Session]] = {}
    for line in (directory / "background.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            raw = json.loads(line)
            sets.setdefault(raw["set"], []).append(_session(raw))
    return sets


def load_cases(directory: Path = CASES_DIR,
               families: Iterable[str] = FAMILIES) -> dict[str, list[Case]]:
    cases: dict[str, list[Case]] = {}
    for family in families:
        rows = (directory / f"{family}.jsonl").read_text(encoding="utf-8").splitlines()
        cases[family] = []
        for line in rows:
            if not line.strip():
                continue
            raw = json.loads(line)
            cases[family].append(Case(
                id=raw["id"], family=family, lang=raw["lang"], group=raw["group"],
                background=raw.get("background"), question=raw["question"],
                sessions=[_session(s) for s in raw.get("sessions", [])], raw=raw))
    return cases


def problems(cases: dict[str, list[Case]], backgrounds: dict[str, list[Session]]) -> list[str]:
    """What is wrong with the scenario sets (empty when they are well-formed)."""
    found: list[str] = []
    ids: set[str] = set()
    for family, items in cases.items():
        if len(items) < MIN_CASES:
            found.append(f"{family}: {len(items)} cases, fewer than {MIN_CASES}")
        for lang in ("zh", "en"):
            if sum(c.lang == lang for c in items) < 10:
                found.append(f"{family}: fewer than 10 {lang} cases")
        sessions_of: dict[str, set[str]] = {}
        for c in items:
            where = f"{family}/{c.id}"
            if c.id in ids:
                found.append(f"{where}: duplicate id")
            ids.add(c.id)
            if c.lang not in LANGS:
                found.append(f"{where}: lang {c.lang!r}")
            if not c.question.strip():
                found.append(f"{where}: empty question")
            missing = [k for k in REQUIRED[family] if k not in c.raw]
            if missing:
                found.append(f"{where}: missing {', '.join(missing)}")
                continue
            if c.background is not None and c.background not in backgrounds:
                found.append(f"{where}: unknown background {c.background!r}")
            held = sessions_of.setdefault(c.namespace, {
                s.session for s in backgrounds.get(c.background or "", [])})
            for s in c.sessions:
                if s.session in held:
                    found.append(f"{where}: session {s.session} twice in {c.namespace}")
                held.add(s.session)
                if not s.messages or any(not m["content"].strip() for m in s.messages):
                    found.append(f"{where}: empty message in {s.session}")
            every = {s.session: s for s in
                     [*backgrounds.get(c.background or "", []), *c.sessions]}
            for key in ("old", "new", "answer", "best"):
                named = c.raw.get(key)
                if named is not None and named not in every:
                    found.append(f"{where}: {key} names no session ({named})")
            if family == "changed":
                old, new = every.get(c.raw["old"]), every.get(c.raw["new"])
                if old and new and (new.time - old.time).days < 60:
                    found.append(f"{where}: the newer fact is not months after the older")
            if family == "unanswerable" and not (
                    isinstance(c.raw["repeat"], int) and c.raw["repeat"] >= 2):
                found.append(f"{where}: repeat must be an integer >= 2")
            if family == "dated":
                start, end = (_time(t) for t in c.raw["period"])
                inside = [s for s in every.values() if start <= s.time < end]
                if start >= end:
                    found.append(f"{where}: empty period")
                best = c.raw["best"]
                if best is not None and best not in {s.session for s in inside}:
                    found.append(f"{where}: best {best} is outside the period")
    return found


# --- client ------------------------------------------------------------------------------


@asynccontextmanager
async def engram_client(args: argparse.Namespace) -> AsyncIterator[httpx.AsyncClient]:
    if args.url:
        headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
        async with httpx.AsyncClient(base_url=args.url, headers=headers, timeout=300) as client:
            yield client
        return
    from app.config import Settings
    from app.main import create_app
    from bench.locomo import setting_overrides

    # The compression scheduler stays off (these sessions are months old: it would turn them
    # into summaries mid-run); hits are flushed only when a family asks (`flush_hits`), so
    # one family's hits do not reorder another's. Promotion thresholds stay the defaults:
    # the unanswerable family measures what they do.
    # No recall deadline: the complete recall is measured, whatever the machine's load.
    overrides: dict[str, Any] = {"log_level": "ERROR", "compression_enabled": False,
                                 "hit_flush_seconds": 3600, "recall_deadline_ms": 0}
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


async def flush_hits(client: httpx.AsyncClient, wait: float) -> None:
    app = getattr(client, "app", None)
    if app is None:
        await asyncio.sleep(wait)  # a server flushes every `hit_flush_seconds`
        return
    await app.state.engram.hits.flush()


def namespaces(cases: dict[str, list[Case]], backgrounds: dict[str, list[Session]]
               ) -> dict[str, list[Session]]:
    """Each namespace's sessions: its background once, then its cases' own sessions."""
    plan: dict[str, list[Session]] = {}
    for items in cases.values():
        for c in items:
            sessions = plan.setdefault(c.namespace, list(backgrounds.get(c.background or "", [])))
            sessions.extend(c.sessions)
    return plan


async def ingest(client: httpx.AsyncClient, cases: dict[str, list[Case]],
                 backgrounds: dict[str, list[Session]], *, parallel: int) -> None:
    plan = namespaces(cases, backgrounds)
    started = time.perf_counter()
    gate = asyncio.Semaphore(parallel)
    total = sum(len(s) for s in plan.values())
    done = 0

    async def store(namespace: str, sessions: list[Session]) -> None:
        nonlocal done
        async with gate:
            # In conversation order, as they happened.
            for s in sorted(sessions, key=lambda s: s.time):
                response = await client.post("/v1/store", json=s.body(namespace))
                response.raise_for_status()
                done += 1
        print(f"\r  stored {done}/{total} sessions", end="", file=sys.stderr, flush=True)

    await asyncio.gather(*(store(ns, s) for ns, s in plan.items()))
    app = getattr(client, "app", None)
    if app is not None:
        await app.state.engram.store.idle()
        await app.state.engram.maintenance.run_once(force=True)
    print(f"\n  ingest: {total} sessions in {len(plan)} namespaces, "
          f"{time.perf_counter() - started:.1f} s", file=sys.stderr)


# --- evaluation --------------------------------------------------------------------------


@dataclass
class Result:
    case: Case
    passed: bool
    detail: dict[str, Any] = field(default_factory=dict)
    recalls: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Hygiene:
    """Counts over every recall of the run: ride-alongs and why_not disagreements."""

    recalls: int = 0
    returning: int = 0
    with_ridealong: int = 0
    ridealongs: int = 0
    below_context_floor: int = 0  # memories below the stated floor, `context_min_score`
    memories: int = 0
    why_not_checked: int = 0
    why_not_disagree: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)


async def recall(client: httpx.AsyncClient, case: Case, hygiene: Hygiene, *,
                 why_not: bool, **extra: Any) -> dict[str, Any]:
    body = {"namespace": case.namespace, "query": case.question, **extra}
    response = await client.post("/v1/recall", json=body)
    response.raise_for_status()
    result = response.json()
    floor = result["min_score"]
    memories = [{
        "id": m["id"], "session": m["session_id"], "relevance": m["explain"]["relevance"],
        "score": m["score"], "time": m["time_start"], "tier": m["tier"],
        "text": m["text"][:80].replace("\n", " / "),
    } for m in result["memories"]]
    below = [m for m in memories if m["relevance"] < floor]
    hygiene.recalls += 1
    hygiene.returning += bool(memories)
    hygiene.memories += len(memories)
    hygiene.with_ridealong += bool(below)
    hygiene.ridealongs += len(below)
    hygiene.below_context_floor += sum(m["relevance"] < result["context_min_score"]
                                       for m in memories)
    out: dict[str, Any] = {
        "min_score": floor, "memories": memories, "below": [m["id"] for m in below],
        "time_window": result.get("time_window"),
    }
    if why_not and memories:
        response = await client.post("/v1/recall/why_not", json={
            **body, "memory_ids": [m["id"] for m in memories]})
        response.raise_for_status()
        verdicts = {item["memory_id"]: item["verdict"] for item in response.json()["items"]}
        disagree = {i: v for i, v in verdicts.items() if v != "recalled"}
        hygiene.why_not_checked += 1
        hygiene.why_not_disagree += bool(disagree)
        for verdict in disagree.values():
            hygiene.verdicts[verdict] = hygiene.verdicts.get(verdict, 0) + 1
        out["why_not"] = disagree
    return out


def _rank(memories: list[dict[str, Any]], session: str) -> int | None:
    return next((i for i, m in enumerate(memories) if m["session"] == session), None)


async def run_case(client: httpx.AsyncClient, case: Case, hygiene: Hygiene, *,
                   why_not: bool, stored: list[Session]) -> Result:
    """One case's recall(s) and verdict; `stored`: the sessions of its namespace."""
    family, raw = case.family, case.raw
    if family == "unanswerable":
        asks = [await recall(client, case, hygiene, why_not=why_not and i == 0)
                for i in range(raw["repeat"])]
        returned = [len(a["memories"]) for a in asks]
        return Result(case, not any(returned), {"returned": returned}, asks)
    extra = {"as_of": raw["as_of"]} if family == "dated" else {}
    one = await recall(client, case, hygiene, why_not=why_not, **extra)
    memories = one["memories"]
    if family == "changed":
        new, old = _rank(memories, raw["new"]), _rank(memories, raw["old"])
        passed = new is not None and (old is None or new < old)
        return Result(case, passed, {"new_rank": new, "old_rank": old}, [one])
    if family == "smalltalk":
        return Result(case, not memories, {"returned": len(memories)}, [one])
    if family == "ridealong":
        clean = not one["below"] and not one.get("why_not")
        return Result(case, clean, {"answer_rank": _rank(memories, raw["answer"]),
                                    "below": len(one["below"]),
                                    "why_not": one.get("why_not", {})}, [one])
    if family == "dated":
        start, end = (_time(t) for t in raw["period"])
        inside = [m for m in memories if m["time"] and start <= _time(m["time"]) < end]
        empty = not any(start <= s.time < end for s in stored)
        if empty:
            passed = not memories
        else:
            passed = bool(memories) and len(inside) == len(memories) and (
                raw["best"] is None or _rank(memories, raw["best"]) == 0)
        first = bool(memories) and bool(inside) and inside[0] is memories[0]
        return Result(case, passed, {"empty_period": empty, "in_period": len(inside),
                                     "first_in_period": first,
                                     "returned": len(memories),
                                     "window": one["time_window"]}, [one])
    rank = _rank(memories, raw["answer"])  # crosslang
    return Result(case, rank == 0, {"answer_rank": rank}, [one])


async def tiers_of(client: httpx.AsyncClient, namespace: str) -> list[dict[str, Any]]:
    memories: list[dict[str, Any]] = []
    offset = 0
    while True:
        response = await client.get("/v1/memories", params={
            "namespace": namespace, "limit": 200, "offset": offset})
        response.raise_for_status()
        page = response.json()
        memories += page["items"]
        offset += len(page["items"])
        if not page["items"] or offset >= page["count"]:
            return memories


@dataclass
class Promotions:
    memories: int = 0
    with_hits: int = 0
    hits: int = 0
    daily: int = 0
    longterm: int = 0
    top: list[tuple[int, str, str]] = field(default_factory=list)  # hits, tier, text


async def promotions(client: httpx.AsyncClient, namespaces: Iterable[str],
                     before: dict[str, str]) -> Promotions:
    found = Promotions()
    for namespace in sorted(set(namespaces)):
        for m in await tiers_of(client, namespace):
            found.memories += 1
            found.hits += m["hit_count"]
            found.with_hits += m["hit_count"] > 0
            if m["tier"] != before.get(m["id"], "session"):
                found.daily += m["tier"] == "daily"
                found.longterm += m["tier"] == "longterm"
            if m["hit_count"]:
                found.top.append((m["hit_count"], m["tier"], m["text"][:60]))
    found.top.sort(reverse=True)
    return found


async def evaluate(args: argparse.Namespace) -> tuple[str, list[Result]]:
    families = [f for f in args.families.split(",") if f]
    cases = load_cases(Path(args.cases), families)
    backgrounds = load_backgrounds(Path(args.cases))
    stored = namespaces(cases, backgrounds)
    hygiene = Hygiene()
    results: list[Result] = []
    hits: dict[str, Promotions] = {}
    async with engram_client(args) as client:
        await ingest(client, cases, backgrounds, parallel=args.parallel)
        for family in families:
            started = time.perf_counter()
            spaces = {c.namespace for c in cases[family]}
            before = {m["id"]: m["tier"] for ns in spaces
                      for m in await tiers_of(client, ns)}
            for case in cases[family]:
                results.append(await run_case(client, case, hygiene,
                                              why_not=not args.no_why_not,
                                              stored=stored[case.namespace]))
            if family in ("smalltalk", "unanswerable"):
                await flush_hits(client, args.flush_wait)
                hits[family] = await promotions(client, spaces, before)
            print(f"  {family}: {len(cases[family])} cases, "
                  f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
    return report(families, results, hygiene, hits, failures=args.failures), results


def _rate(results: list[Result]) -> str:
    if not results:
        return "–"
    passed = sum(r.passed for r in results)
    return f"{passed / len(results):.0%} ({passed}/{len(results)})"


def report(families: list[str], results: list[Result], hygiene: Hygiene,
           hits: dict[str, Promotions], *, failures: int) -> str:
    lines = ["| family | pass when | zh | en | mixed | all |", "|---|---|---|---|---|---|"]
    for family in families:
        mine = [r for r in results if r.case.family == family]
        cells = [_rate([r for r in mine if r.case.lang == lang]) for lang in LANGS]
        lines.append(f"| {family} | {METRICS[family]} | " + " | ".join(cells)
                     + f" | **{_rate(mine)}** |")
    lines.append("")
    changed = [r for r in results if r.case.family == "changed"]
    if changed:
        old = sum(r.detail["old_rank"] is not None for r in changed)
        new = sum(r.detail["new_rank"] is not None for r in changed)
        first = sum(r.detail["new_rank"] == 0 for r in changed)
        lines.append(f"- changed: newer returned {new}/{len(changed)}, newer first overall "
                     f"{first}/{len(changed)}, older returned {old}/{len(changed)}.")
    for family, name in (("ridealong", "ridealong"), ("crosslang", "crosslang")):
        mine = [r for r in results if r.case.family == family]
        if mine:
            first = sum(r.detail["answer_rank"] == 0 for r in mine)
            anywhere = sum(r.detail["answer_rank"] is not None for r in mine)
            lines.append(f"- {name}: answer first {first}/{len(mine)}, "
                         f"returned at all {anywhere}/{len(mine)}.")
    dated = [r for r in results if r.case.family == "dated"]
    if dated:
        windows = sum(r.detail["window"] is not None for r in dated)
        empty = [r for r in dated if r.detail["empty_period"]]
        full = [r for r in dated if not r.detail["empty_period"]]
        first = sum(r.detail["first_in_period"] for r in full)
        answered = sum(r.detail["returned"] > 0 for r in full)
        lines.append(f"- dated: a time window found for {windows}/{len(dated)}; periods "
                     f"holding sessions: something returned {answered}/{len(full)}, "
                     f"the first memory in the period "
                     f"{first}/{len(full)}; empty periods answered with nothing "
                     f"{sum(r.passed for r in empty)}/{len(empty)}.")
    unanswerable = [r for r in results if r.case.family == "unanswerable"]
    if unanswerable:
        asks = [n for r in unanswerable for n in r.detail["returned"]]
        lines.append(f"- unanswerable: {sum(n == 0 for n in asks)}/{len(asks)} asks returned "
                     f"nothing.")
    for family, found in hits.items():
        top = "; ".join(f"{h} hits, {tier}: {text}" for h, tier, text in found.top[:3])
        lines.append(f"- {family} namespaces after the hits were flushed: {found.hits} hits on "
                     f"{found.with_hits}/{found.memories} memories, promoted to daily "
                     f"{found.daily}, to long-term **{found.longterm}**"
                     + (f" (most hit: {top})" if top else "") + ".")
    lines.append(
        f"- every recall of the run ({hygiene.recalls}, {hygiene.returning} returning "
        f"memories, {hygiene.memories} memories): {hygiene.with_ridealong} with a memory "
        f"below min_score ({hygiene.ridealongs} such memories, {hygiene.below_context_floor} "
        f"below the stated context floor, context_min_score); why_not on the returned ids "
        f"disagreed for {hygiene.why_not_disagree}/{hygiene.why_not_checked} recalls "
        f"({', '.join(f'{v} {n}' for v, n in sorted(hygiene.verdicts.items())) or 'none'}).")
    if failures:
        lines += ["", "Failures (first per family):", ""]
        for family in families:
            failed = [r for r in results if r.case.family == family and not r.passed]
            for r in failed[:failures]:
                lines.append(f"- {family} {r.case.id}: {r.case.question!r} {_brief(r)}")
    return "\n".join(lines)


def _brief(result: Result) -> str:
    one = result.recalls[0]
    shown = "; ".join(f"{m['session']} rel {m['relevance']:.2f}: {m['text'][:40]}"
                      for m in one["memories"][:3]) or "nothing"
    detail = {k: v for k, v in result.detail.items() if k != "window"}
    return f"→ {shown} (min {one['min_score']}; {detail})"


def write_dump(path: Path, results: list[Result]) -> None:
    rows = [json.dumps({"id": r.case.id, "family": r.case.family, "lang": r.case.lang,
                        "namespace": r.case.namespace, "question": r.case.question,
                        "passed": r.passed, **r.detail, "recalls": r.recalls},
                       ensure_ascii=False, default=str) for r in results]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help="comma-separated subset of " + ", ".join(FAMILIES))
    parser.add_argument("--cases", default=str(CASES_DIR), help="directory of the JSONL sets")
    parser.add_argument("--data-dir", default="",
                        help="Engram data directory (default: a temporary one)")
    parser.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE",
                        help="a Settings override for the in-process app (repeatable)")
    parser.add_argument("--url", default="", help="a running server instead of in-process")
    parser.add_argument("--api-key", default=os.environ.get("ENGRAM_API_KEY", ""))
    parser.add_argument("--flush-wait", type=float, default=12.0,
                        help="--url: seconds to wait for the server's hit flush")
    parser.add_argument("--parallel", type=int, default=2, help="namespaces stored at once")
    parser.add_argument("--no-why-not", action="store_true",
                        help="skip the why_not check of returned memories")
    parser.add_argument("--failures", type=int, default=0,
                        help="list the first N failing cases per family")
    parser.add_argument("--dump", default="", help="write every case's outcome here (JSONL)")
    args = parser.parse_args()
    unknown = set(args.families.split(",")) - set(FAMILIES) - {""}
    if unknown:
        parser.error(f"unknown families: {', '.join(sorted(unknown))}")
    found = problems(load_cases(Path(args.cases)), load_backgrounds(Path(args.cases)))
    if found:
        parser.error("scenario sets are not well-formed:\n" + "\n".join(found))
    if not args.url and not args.data_dir:
        args.data_dir = tempfile.mkdtemp(prefix="engram-hygiene-")
    started = time.perf_counter()
    text, results = asyncio.run(evaluate(args))
    if args.dump:
        write_dump(Path(args.dump), results)
    print(text)
    print(f"\n({time.perf_counter() - started:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
