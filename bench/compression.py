"""Compression on LoCoMo: how much stored text it saves, and what recall loses.

Protocol (through the HTTP API, as a client would; ../shared/BENCHMARK.md for LoCoMo):

1. One namespace per conversation, each session one store call (as bench/locomo.py).
2. **Before**: every question (categories 1–4) recalled at a 1,500-token budget. Evidence
   recall = share of the question's evidence dia_ids among the returned memories' msg_ids,
   a summary counting as covering every message of its sources. Answer-token coverage =
   share of the gold answer's words (lower-cased, stop words dropped unless that leaves
   none) found in the returned injection block (memory texts and their dates).
3. **Compression**: the namespace gets the chosen preset and one pass runs with `force`
   (LoCoMo conversations are far below the default capacity, so memory pressure never
   reaches the alarm level; force skips only that check — the report says where it was
   needed). While each pass runs, a probe stores one new message into the same namespace
   every 50 ms and times it; the same probe without a pass is the baseline.
4. **After**: the same recalls, the same scores; stored text before and after.
5. **Restorability**: every compressed memory is restored through `POST
   /v1/memories/{id}/restore` and compared byte for byte with its text before compression.

Usage::

    PYTHONPATH=. .venv/bin/python bench/compression.py ../shared/data/locomo-dev.json \
        --preset default --preset noisy_chitchat --out docs/compression.md

The data never enters the repository: the script reads it from the path given. The app runs
in-process (httpx over ASGI, the real lifespan, the real model); one ingest is copied for
every preset, so each preset starts from the same store.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bench.locomo import (  # noqa: E402
    CATEGORY_NAMES,
    SKIPPED_CATEGORIES,
    Question,
    Sample,
    ingest,
    load,
    normalise_evidence,
)

_WORD = re.compile(r"[a-z0-9]+")
BUDGET = 1500


@dataclass
class Scored:
    recall: float
    coverage: float
    tokens: int


@dataclass
class PresetReport:
    preset: str
    namespaces: list[dict[str, Any]] = field(default_factory=list)
    before: list[Scored] = field(default_factory=list)
    after: list[Scored] = field(default_factory=list)
    chars_before: int = 0
    chars_after: int = 0
    active_before: int = 0
    active_after: int = 0
    memories: int = 0
    restored_ok: int = 0
    restored_total: int = 0
    probe_baseline: list[float] = field(default_factory=list)
    probe_during: list[float] = field(default_factory=list)


def answers(path: Path, samples: list[Sample]) -> list[str]:
    """Gold answers in the order of `load`'s questions (same filters)."""
    raw = json.loads(path.read_text(encoding="utf-8"))[: len(samples)]
    found: list[str] = []
    for item, sample in zip(raw, samples, strict=True):
        known = {m["msg_id"] for _, msgs in sample.sessions for m in msgs}
        for qa in item["qa"]:
            if qa["category"] in SKIPPED_CATEGORIES:
                continue
            if normalise_evidence(qa.get("evidence", []), known):
                found.append(str(qa.get("answer", "")))
    return found


def answer_words(answer: str) -> set[str]:
    from app.classify.stopwords import EN_STOP_WORDS

    words = set(_WORD.findall(answer.lower()))
    content = {w for w in words if w not in EN_STOP_WORDS}
    return content or words


@asynccontextmanager
async def open_app(data_dir: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    from app.config import Settings
    from app.main import create_app

    settings = Settings(data_dir=data_dir, environment="testing", log_level="WARNING",
                        compression_enabled=False, _env_file=None)  # type: ignore[call-arg]
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engram.bench",
                                     timeout=600) as client:
            yield client, app


async def memories_of(client: httpx.AsyncClient, namespace: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    offset = 0
    while True:
        page = (await client.get("/v1/memories", params={
            "namespace": namespace, "state": "any", "limit": 500, "offset": offset})).json()
        found.update({m["id"]: m for m in page["items"]})
        offset += 500
        if offset >= page["count"]:
            return found


async def evaluate(client: httpx.AsyncClient, questions: list[Question], golds: list[str],
                   sources: dict[str, list[str]]) -> list[Scored]:
    scored = []
    for q, gold in zip(questions, golds, strict=True):
        response = await client.post("/v1/recall", json={
            "namespace": q.namespace, "query": q.text, "max_tokens": BUDGET, "top_k": 100})
        response.raise_for_status()
        body = response.json()
        returned: set[str] = set()
        for memory in body["memories"]:
            returned.update(memory["msg_ids"])
            returned.update(sources.get(memory["id"], []))  # a summary covers its sources
        words = answer_words(gold)
        text = set(_WORD.findall(body["block"].lower()))
        scored.append(Scored(
            recall=len(q.evidence & returned) / len(q.evidence),
            coverage=len(words & text) / len(words) if words else 1.0,
            tokens=int(body["tokens"])))
    return scored


async def probe(client: httpx.AsyncClient, namespace: str, stop: asyncio.Event,
                latencies: list[float], tag: str) -> list[str]:
    """Store one message every 50 ms until `stop`; return the probe session ids."""
    sessions = []
    n = 0
    while not stop.is_set():
        session = f"probe-{tag}-{n}"
        started = time.perf_counter()
        response = await client.post("/v1/store", json={
            "namespace": namespace, "session_id": session, "messages": [
                {"msg_id": "p", "role": "user",
                 "content": f"probe message {tag} {n}: the parcel locker code is {1000 + n}"}],
            "wait": "built"})
        latencies.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
        sessions.append(session)
        n += 1
        with suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.05)
    return sessions


async def run_preset(preset: str, data_dir: Path, samples: list[Sample],
                     questions: list[Question], golds: list[str],
                     overrides: dict[str, Any]) -> PresetReport:
    report = PresetReport(preset=preset)
    async with open_app(data_dir) as (client, _):
        before_memories = {}
        for sample in samples:
            before_memories.update(await memories_of(client, sample.namespace))
        report.memories = len(before_memories)
        report.chars_before = sum(len(m["text"]) for m in before_memories.values())
        report.active_before = sum(len(m["text"]) for m in before_memories.values()
                                   if m["state"] == "active")
        print(f"  [{preset}] recall before", file=sys.stderr)
        report.before = await evaluate(client, questions, golds, {})

        for sample in samples:
            ns = sample.namespace
            put = await client.put(f"/v1/compression/policies/{ns}",
                                   json={"preset": preset, "overrides": overrides})
            put.raise_for_status()
            # Baseline: the same probe into another namespace, no pass running.
            stop = asyncio.Event()
            baseline: list[float] = []
            task = asyncio.create_task(probe(client, "probe-baseline", stop, baseline, ns))
            await asyncio.sleep(2.0)
            stop.set()
            await task

            stop = asyncio.Event()
            during: list[float] = []
            started = time.perf_counter()
            run = asyncio.create_task(client.post("/v1/compression/run", json={
                "namespace": ns, "force": True}))
            await asyncio.sleep(0.05)  # the pass reads its snapshot first
            task = asyncio.create_task(probe(client, ns, stop, during, "pass"))
            result = (await run).json()
            seconds = time.perf_counter() - started
            stop.set()
            probe_sessions = await task
            (outcome,) = result["namespaces"]
            if not outcome["ok"]:
                raise RuntimeError(f"compression of {ns} failed: {outcome['error']}")
            report.probe_baseline += baseline
            report.probe_during += during
            for session in probe_sessions:  # the probes must not change the evaluation
                (await client.delete(f"/v1/namespaces/{ns}/sessions/{session}")
                 ).raise_for_status()
            ours = set(before_memories)  # probe memories are not part of the evaluation
            outcome["compressed"] = [i for i in outcome["compressed"] if i in ours]
            report.namespaces.append({
                "namespace": ns, "seconds": round(seconds, 1), "phases": outcome["phases"],
                "lock_seconds": outcome["lock_seconds"], "forced": outcome["forced"],
                "alarm": outcome["pressure_alarm"], "pressure": outcome["pressure"],
                "stream": outcome["stream"], "decisions": outcome["decisions"],
                "compressed": len(outcome["compressed"]),
                "summaries": len(outcome["summaries"]), "held": len(outcome["held"]),
                "promoted": len(outcome["promoted"]), "probes": len(during),
                "aged": len(outcome.get("aged", [])), "gate": outcome.get("gate"),
                "worst_store_ms": round(max(during, default=0.0), 1)})
            print(f"  [{preset}] {ns}: {len(outcome['compressed'])} compressed into "
                  f"{len(outcome['summaries'])} summaries in {seconds:.1f} s", file=sys.stderr)

        after_memories = {}
        for sample in samples:
            after_memories.update(await memories_of(client, sample.namespace))
        report.chars_after = sum(len(m["text"]) for m in after_memories.values())
        report.active_after = sum(len(m["text"]) for m in after_memories.values()
                                  if m["state"] == "active")
        sources = {
            m["id"]: [i for s in m["summary_of"] for i in before_memories[s]["msg_ids"]]
            for m in after_memories.values() if m["summary_of"]}
        print(f"  [{preset}] recall after", file=sys.stderr)
        report.after = await evaluate(client, questions, golds, sources)

        compressed = [i for i, m in after_memories.items() if m["state"] == "compressed"]
        report.restored_total = len(compressed)
        for memory_id in compressed:
            response = await client.post(f"/v1/memories/{memory_id}/restore")
            response.raise_for_status()
            if response.json()["text"].encode() == before_memories[memory_id]["text"].encode():
                report.restored_ok += 1
    return report


def mean(values: list[float]) -> float:
    return statistics.mean(values) if values else 0.0


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] if values else 0


def render(report: PresetReport, questions: list[Question]) -> str:
    categories = sorted({q.category for q in questions})
    lines = [f"#### Preset `{report.preset}`", ""]
    compressed = sum(n["compressed"] for n in report.namespaces)
    summaries = sum(n["summaries"] for n in report.namespaces)
    forced = [n["namespace"] for n in report.namespaces if n["forced"]]
    alarmed = [n["namespace"] for n in report.namespaces if n["alarm"]]
    lines += [
        f"- memories: {report.memories}; compressed {compressed} "
        f"({compressed / max(1, report.memories):.0%}) into {summaries} summaries; "
        f"held (protected) {sum(n['held'] for n in report.namespaces)}; "
        f"promoted by age {sum(n['promoted'] for n in report.namespaces)}",
        f"- trigger: pressure reached the alarm level in {len(alarmed)} of "
        f"{len(report.namespaces)} namespaces; **forced** in {len(forced)} "
        f"({', '.join(forced) or 'none'})",
        f"- stored memory text: {report.chars_before:,} → {report.chars_after:,} chars "
        f"(**{1 - report.chars_after / report.chars_before:.1%} smaller**); active "
        f"(searchable) text {report.active_before:,} → {report.active_after:,} "
        f"({1 - report.active_after / report.active_before:.1%} smaller); originals kept "
        "in the archive",
        f"- restorable byte for byte: **{report.restored_ok}/{report.restored_total}**",
        f"- store latency of a probe writing into the namespace being compressed: p50 "
        f"{percentile(report.probe_during, 50):.0f} ms, worst "
        f"**{max(report.probe_during, default=0):.0f} ms** over {len(report.probe_during)} "
        f"stores (baseline without a pass: p50 {percentile(report.probe_baseline, 50):.0f} "
        f"ms, worst {max(report.probe_baseline, default=0):.0f} ms); pass time per "
        f"conversation {min(n['seconds'] for n in report.namespaces)}–"
        f"{max(n['seconds'] for n in report.namespaces)} s, of which the write lock was "
        f"held at most {max(n['lock_seconds'] for n in report.namespaces):.2f} s",
        "",
        f"| at {BUDGET:,} tokens | " + " | ".join(
            f"{CATEGORY_NAMES.get(c, c)} ({c})" for c in categories)
        + " | **overall** | answer-token coverage | tokens (mean) |",
        "|---" * (len(categories) + 4) + "|",
    ]
    for label, scored in (("before", report.before), ("after", report.after)):
        by_cat: dict[int, list[float]] = defaultdict(list)
        for q, s in zip(questions, scored, strict=True):
            by_cat[q.category].append(s.recall)
        lines.append(f"| {label} | " + " | ".join(f"{mean(by_cat[c]):.3f}" for c in categories)
                     + f" | **{mean([s.recall for s in scored]):.3f}** | "
                     f"{mean([s.coverage for s in scored]):.3f} | "
                     f"{mean([float(s.tokens) for s in scored]):.0f} |")
    delta_r = mean([s.recall for s in report.after]) - mean([s.recall for s in report.before])
    delta_c = (mean([s.coverage for s in report.after])
               - mean([s.coverage for s in report.before]))
    lines += ["", f"Change: evidence recall {delta_r:+.3f}, answer-token coverage "
              f"{delta_c:+.3f} ({len(questions)} questions).", ""]
    lines += ["| namespace | stream | decisions | compressed | summaries | forced | gate "
              "(coverage, probes) | pass s (phases) | lock s | worst store ms |",
              "|---" * 10 + "|"]
    for n in report.namespaces:
        decisions = ", ".join(f"{k} {v}" for k, v in sorted(n["decisions"].items()))
        phases = ", ".join(f"{k} {v:.1f}" for k, v in n["phases"].items())
        gate = n.get("gate")
        gate_cell = ("—" if not gate else f"{'passed' if gate['passed'] else '**rolled back**'}"
                     f" {gate['coverage']:.3f}, {gate['evaluated']}/{gate['probes']}")
        lines.append(f"| {n['namespace']} | {n['stream']} | {decisions} | {n['compressed']} | "
                     f"{n['summaries']} | {'yes' if n['forced'] else 'no'} | {gate_cell} | "
                     f"{n['seconds']} ({phases}) | {n['lock_seconds']} | "
                     f"{n['worst_store_ms']} |")
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> str:
    path = Path(args.data)
    samples = load(path, limit=args.samples)
    questions = [q for s in samples for q in s.questions]
    golds = answers(path, samples)
    assert len(golds) == len(questions)
    work = Path(args.data_dir or tempfile.mkdtemp(prefix="engram-compression-"))
    seed = work / "ingested"
    if not seed.exists():
        print(f"ingesting {len(samples)} conversations into {seed}", file=sys.stderr)
        async with open_app(seed) as (client, _):
            await ingest(client, samples, parallel=args.parallel)
    parts = [f"### {path.name}: compression at a {BUDGET:,}-token recall budget", "",
             f"{len(samples)} conversations, {len(questions)} questions (categories 1–4)."]
    for preset in args.preset:
        target = work / preset
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(seed, target)
        report = await run_preset(preset, target, samples, questions, golds,
                                  json.loads(args.overrides))
        report.preset += f" {args.overrides}" if args.overrides != "{}" else ""
        parts += ["", render(report, questions)]
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="locomo-dev.json")
    parser.add_argument("--preset", action="append", default=[],
                        help="compression preset to measure (repeatable; default: default)")
    parser.add_argument("--samples", type=int, default=None, help="only the first N samples")
    parser.add_argument("--overrides", default="{}",
                        help='policy overrides for every preset, JSON: {"summary_ratio": 0.5}')
    parser.add_argument("--data-dir", default="",
                        help="work directory (the ingest is kept there and reused)")
    parser.add_argument("--parallel", type=int, default=2, help="namespaces ingested at once")
    parser.add_argument("--out", default="", help="also append the markdown report here")
    args = parser.parse_args()
    args.preset = args.preset or ["default"]
    text = asyncio.run(main_async(args))
    print(text)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(text + "\n\n")


if __name__ == "__main__":
    main()
