"""Many users at once (issue 14): one real `engram serve` process, one run.

1. Idle recall: 2 clients recall in two namespaces (seeded first) -> p50 / p99.
2. Ingest: `--tenants` tenants each store `--sessions` sessions x `--messages` messages
   concurrently (one call per session, alternately `wait=true` and `wait=false`), while the
   same 2 clients keep recalling in two of the namespaces being written. Errors (any status
   but 200/202), recall p50 / p99 during the ingest against idle, and every message stored
   once (read back from the LanceDB files below the API, all built). The share of recalls
   the server's default deadline answered degraded (`recall_deadline_ms`, issue 37), idle
   and during the ingest, with the stages they skipped.
3. Server RSS (VmRSS / VmHWM) at idle start (ready, nothing stored), after the ingest and
   after `REST_SECONDS` more at rest, each with its anonymous (heap) and file-backed (mapped
   libraries, the model file) parts from /proc/PID/smaps_rollup, and the server's own
   `engram_memory_held` gauges.
4. Small appends into an existing session: 2 messages with `wait=true` (the default: the
   new turns findable), `wait="built"` (p50) and the `wait=false` acknowledgement (p50),
   one client.
5. LoCoMo-style import, one `wait="built"` store call per session (`--locomo`, a LoCoMo
   JSON file read at run time; input data only): turns/s; then, with the server stopped,
   the bare model's throughput on the same memory texts (this process loads it). One
   client by default, each session waiting for the one before; `--locomo-clients N` sends
   N conversations at once (each its sessions in order), as an importer moving many users
   would: one client measures a store's round trip, several whether the server keeps the
   model busy.

Usage (from the repository root):

    PYTHONPATH=. .venv/bin/python bench/load.py --locomo ../shared/data/locomo-dev.json
    PYTHONPATH=. .venv/bin/python bench/load.py --tenants 4 --sessions 3   # quick

Prints a table and writes JSON to bench/results/ (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from statistics import median
from typing import Any

import httpx
import lancedb
from prometheus_client.parser import text_string_to_metric_families

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.store_throughput import encode_seconds, git_commit, percentile  # noqa: E402
from tests.procs import ServerProcess, chat_messages  # noqa: E402

RESULTS_DIR = REPO_ROOT / "bench" / "results"
Json = dict[str, Any]

_QUERIES = ("Where is the meeting with Alice?", "我的预算是多少？", "What do I prefer to drink?",
            "下周二要做什么？", "When does my flight leave?", "谁会参加装修的讨论？",
            "What happened with the Rust rewrite?", "What am I allergic to?")


def http(base_url: str) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64,
                          keepalive_expiry=2.0)
    return httpx.AsyncClient(base_url=base_url, timeout=300, limits=limits)


async def store(client: httpx.AsyncClient, namespace: str, session_id: str,
                messages: list[Json], *, wait: bool | str) -> httpx.Response:
    return await client.post("/v1/store", json={
        "namespace": namespace, "session_id": session_id, "messages": messages, "wait": wait})


async def recall_loop(client: httpx.AsyncClient, namespace: str, rng: random.Random,
                      *, count: int | None, until: asyncio.Event | None
                      ) -> tuple[list[float], list[str], list[float], list[list[str]]]:
    """Recall one query after another; latencies (s), errors, each recall's time outside
    the recall service (s: the client's latency less the response's `took_ms`: HTTP, the
    request waiting for the event loop, validation, serialisation), and the stages each
    answered recall skipped for its deadline (the server's default: none passed here)."""
    latencies: list[float] = []
    errors: list[str] = []
    outside: list[float] = []
    skipped: list[list[str]] = []
    while (count is None or len(latencies) < count) and not (until and until.is_set()):
        started = time.perf_counter()
        response = await client.post("/v1/recall", json={
            "namespace": namespace, "query": rng.choice(_QUERIES), "top_k": 5})
        latencies.append(time.perf_counter() - started)
        if response.status_code != 200:
            errors.append(f"recall {response.status_code}: {response.text[:200]}")
        else:
            outside.append(latencies[-1] - response.json()["took_ms"] / 1000)
            skipped.append(response.json().get("skipped", []))
    return latencies, errors, outside, skipped


def degraded(skipped: list[list[str]]) -> Json:
    """The share of answered recalls that skipped a stage for their deadline, and how often
    each stage was skipped."""
    stages = Counter(stage for row in skipped for stage in row)
    share = sum(1 for row in skipped if row) / len(skipped) if skipped else 0.0
    return {"n": len(skipped), "share": round(share, 3), "skipped": dict(stages)}


def slowest(during: list[tuple[list[float], list[str], list[float], list[list[str]]]]
            ) -> Json:
    """The answered recalls at or above their p99: how many, and the medians of their
    latency and of its part outside the recall service (which no deadline bounds), and
    the share of them the deadline degraded: what the tail is made of. (A client with a
    failed recall is left out: its lists no longer line up.)"""
    rows = [(lat, out, bool(sk)) for lats, _, outs, sks in during if len(lats) == len(outs)
            for lat, out, sk in zip(lats, outs, sks, strict=True)]
    if not rows:
        return {"n": 0}
    cut = percentile([r[0] for r in rows], 0.99)
    tail = [r for r in rows if r[0] >= cut]
    return {"n": len(tail), "latency_p50_ms": round(1000 * median(r[0] for r in tail), 1),
            "outside_p50_ms": round(1000 * median(r[1] for r in tail), 1),
            "degraded_share": round(sum(r[2] for r in tail) / len(tail), 2)}


async def jobs_done(client: httpx.AsyncClient, job_ids: list[str]) -> None:
    waiting = list(job_ids)
    while waiting:
        still = []
        for start in range(0, len(waiting), 32):
            part = waiting[start: start + 32]
            responses = await asyncio.gather(*(client.get(f"/v1/jobs/{j}") for j in part))
            still += [j for j, r in zip(part, responses, strict=True)
                      if r.status_code != 200 or r.json()["state"] != "done"]
        waiting = still
        if waiting:
            await asyncio.sleep(0.5)


def stats(latencies: list[float]) -> Json:
    ms = [1000 * x for x in latencies]
    return {"n": len(ms), "p50_ms": round(percentile(ms, 0.5), 1),
            "p99_ms": round(percentile(ms, 0.99), 1)} if ms else {"n": 0}


def stored_once(data_dir: Path, sent: dict[tuple[str, str], set[str]]) -> Json:
    """Compare the raw log in the LanceDB files with what was sent."""
    table = lancedb.connect(str(data_dir / "lancedb")).open_table("messages")
    rows = (table.search().select(["namespace", "session_id", "msg_id", "state"])
            .limit(None).to_arrow().to_pylist())
    seen = Counter((r["namespace"], r["session_id"], r["msg_id"]) for r in rows)
    expected = {(ns, sid, m) for (ns, sid), ids in sent.items() for m in ids}
    return {
        "messages_sent": len(expected),
        "rows_for_sent": sum(n for k, n in seen.items() if k in expected),
        "duplicates": sum(n - 1 for n in seen.values() if n > 1),
        "missing": len(expected - set(seen)),
        "pending": sum(1 for r in rows if r["state"] != "done"),
    }


def metric_samples(text: str) -> Iterator[tuple[str, dict[str, str], float]]:
    """Every sample of a /metrics text: its name, labels and value (prometheus_client's own
    parser, so the benches below read the exposition format one way)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            yield sample.name, sample.labels, sample.value


def memory_gauges(text: str) -> Json:
    found = {}
    for name, labels, value in metric_samples(text):
        if name == "engram_memory_held":
            found[labels["what"]] = value
        elif name == "engram_namespace_cache_loads":
            found["namespace_cache_loads"] = value
    return found


# Where a recall's time goes, from the server's own histograms (bucket bounds, so coarse):
# the whole recall inside the server, its stages (RecallService.recall), its question's wait
# for a vector (queue + passes, inside the search stage), and the event loop's lag.
_WAITS: dict[str, tuple[str, dict[str, str]]] = {
    "recall_in_server": ("engram_recall_seconds_bucket", {}),
    **{f"stage_{stage}": ("engram_recall_stage_seconds_bucket", {"stage": stage})
       for stage in ("read", "search", "order", "pack")},
    **{f"search_{step}": ("engram_recall_search_seconds_bucket", {"step": step})
       for step in ("keyword", "vector_ready", "vector", "keyword_left", "extra")},
    "question_vector_wait": ("engram_embedding_wait_seconds_bucket", {"lane": "query"}),
    "question_encoding": ("engram_embedding_batch_seconds_bucket", {"kind": "query"}),
    "event_loop_lag": ("engram_event_loop_lag_seconds_bucket", {}),
    # Python's full cycle collections: each stops the loop, and the recalls in flight.
    "gc_full": ("engram_gc_pause_seconds_bucket", {"generation": "2"}),
    # Where a store's time goes (StoreService, MemoryBuilder.build_session).
    **{f"store_{stage}": ("engram_store_stage_seconds_bucket", {"stage": stage})
       for stage in ("ack", "log_and_read", "read", "firewall", "embed", "recall_first",
                     "memories", "events", "done", "jobs")}}


def histogram_buckets(text: str) -> dict[str, dict[float, float]]:
    """Cumulative bucket counts of the `_WAITS` histograms in a /metrics text."""
    found: dict[str, dict[float, float]] = {name: {} for name in _WAITS}
    for sample, labels, value in metric_samples(text):
        for name, (metric, wanted) in _WAITS.items():
            if sample == metric and wanted.items() <= labels.items():
                found[name][float(labels["le"])] = value
    return found


def seconds_spent(text: str) -> dict[str, float]:
    """Total seconds per store stage, and in stored text's forward passes, in a /metrics
    text: where an import's time goes (the stages are sequential within one store)."""
    spent: dict[str, float] = {}
    for name, labels, value in metric_samples(text):
        if name == "engram_store_stage_seconds_sum":
            spent[labels["stage"]] = value
        elif name == "engram_embedding_batch_seconds_sum" and labels == {"kind": "passage"}:
            spent["model_stored_text"] = value
        elif name == "engram_store_seconds_sum":
            spent[f"store_call_{labels['mode']}"] = value
    return spent


def bucket_quantiles(before: dict[str, dict[float, float]],
                     after: dict[str, dict[float, float]]) -> Json:
    """p50 / p99 upper bounds (ms) of what the histograms counted between two scrapes."""
    out: Json = {}
    for name, buckets in after.items():
        counts = sorted((bound, n - before.get(name, {}).get(bound, 0.0))
                        for bound, n in buckets.items())
        total = counts[-1][1] if counts else 0
        if not total:
            continue
        def bound_at(q: float, counts: list[tuple[float, float]] = counts,
                     total: float = total) -> float:
            return next(b for b, n in counts if n >= q * total)
        out[name] = {"n": int(total), "p50_le_ms": 1000 * bound_at(0.5),
                     "p99_le_ms": 1000 * bound_at(0.99)}
    return out


def locomo_sessions(path: Path, limit: int | None) -> list[tuple[str, str, list[Json]]]:
    from bench.locomo import load

    return [(s.namespace, sid, msgs) for s in load(path, limit=limit)
            for sid, msgs in s.sessions]


# Seconds a server rests after the ingest before its RSS is read again.
REST_SECONDS = 10.0


def resident(server: ServerProcess) -> dict[str, int]:
    """VmRSS / VmHWM, and the anonymous and file-backed parts of the resident set (KiB)."""
    figures = server.memory_kib()
    for line in Path(f"/proc/{server.pid}/smaps_rollup").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Anonymous", "Pss_File"):
            figures[key] = int(value.split()[0])
    return figures


async def run(args: argparse.Namespace, server: ServerProcess) -> Json:
    result: Json = {"commit": git_commit(), "args": vars(args)}
    rng = random.Random(args.seed)
    sent: dict[tuple[str, str], set[str]] = {}
    result["rss_idle_start_kib"] = resident(server)
    async with http(server.base_url) as client:
        recall_namespaces = ["tenant-0", "tenant-1"]
        for namespace in recall_namespaces:  # something to recall before the ingest
            for s in range(2):
                msgs = chat_messages(rng, args.messages, id_prefix=f"seed{s}-")
                response = await store(client, namespace, f"seed-{s}", msgs, wait="built")
                response.raise_for_status()
                sent[(namespace, f"seed-{s}")] = {m["msg_id"] for m in msgs}

        # 1. idle recall
        scraped = histogram_buckets((await client.get("/metrics")).text)
        idle = await asyncio.gather(*(
            recall_loop(client, ns, random.Random(i), count=args.idle_recalls, until=None)
            for i, ns in enumerate(recall_namespaces)))
        idle_latencies = [x for lat, _, _, _ in idle for x in lat]
        result["recall_idle"] = stats(idle_latencies)
        result["recall_idle_outside_service"] = stats([x for _, _, out, _ in idle for x in out])
        result["recall_idle_degraded"] = degraded([x for *_, sk in idle for x in sk])
        result["recall_idle_server"] = {
            k: v for k, v in bucket_quantiles(scraped, histogram_buckets(
                (await client.get("/metrics")).text)).items() if not k.startswith("store_")}
        progress(result)

        # 2. ingest with recalls running
        errors: list[str] = [e for _, errs, _, _ in idle for e in errs]
        job_ids: list[str] = []
        statuses: Counter[int] = Counter()

        async def tenant(index: int) -> None:
            trng = random.Random(1000 + index)
            namespace = f"tenant-{index}"
            for s in range(args.sessions):
                msgs = chat_messages(trng, args.messages, id_prefix=f"t{index}s{s}-")
                sent[(namespace, f"s{s}")] = {m["msg_id"] for m in msgs}
                response = await store(client, namespace, f"s{s}", msgs,
                                       wait=(s + index) % 2 == 0)
                statuses[response.status_code] += 1
                if response.status_code not in (200, 202):
                    errors.append(f"store {response.status_code}: {response.text[:200]}")
                elif response.json().get("job_id"):
                    job_ids.append(response.json()["job_id"])

        scraped = histogram_buckets((await client.get("/metrics")).text)
        ingest_done = asyncio.Event()
        began = time.perf_counter()
        recalls = [asyncio.create_task(recall_loop(client, ns, random.Random(10 + i),
                                                   count=None, until=ingest_done))
                   for i, ns in enumerate(recall_namespaces)]
        await asyncio.gather(*(tenant(i) for i in range(args.tenants)))
        acknowledged = time.perf_counter() - began
        await jobs_done(client, job_ids)
        built = time.perf_counter() - began
        ingest_done.set()
        during = await asyncio.gather(*recalls)
        errors += [e for _, errs, _, _ in during for e in errs]
        busy = stats([x for lat, _, _, _ in during for x in lat])
        messages = args.tenants * args.sessions * args.messages
        result["ingest"] = {
            "messages": messages, "store_calls": args.tenants * args.sessions,
            "statuses": dict(statuses), "errors": len(errors), "error_samples": errors[:5],
            "acknowledged_seconds": round(acknowledged, 1), "built_seconds": round(built, 1),
            "messages_per_second": round(messages / built, 1),
        }
        result["recall_during_ingest"] = busy
        result["recall_during_ingest_outside_service"] = stats(
            [x for _, _, out, _ in during for x in out])
        result["recall_during_ingest_degraded"] = degraded([x for *_, sk in during for x in sk])
        result["recall_during_ingest_slowest"] = slowest(during)
        result["recall_during_ingest_server"] = bucket_quantiles(
            scraped, histogram_buckets((await client.get("/metrics")).text))
        if result["recall_idle"].get("p99_ms"):
            result["recall_p99_ratio"] = round(busy["p99_ms"] / result["recall_idle"]["p99_ms"],
                                               2)
        result["stored_once"] = stored_once(server.data_dir, sent)
        progress(result)

        # 3. memory after the ingest
        result["rss_after_ingest_kib"] = resident(server)
        metrics = await client.get("/metrics")
        result["memory_held"] = memory_gauges(metrics.text)
        # ... and at rest: the store worker hands freed pages back once its queue has been
        # empty a few seconds (app/store/service.py).
        await asyncio.sleep(REST_SECONDS)
        result["rss_at_rest_after_ingest_kib"] = resident(server)

        # 4. small appends
        modes: dict[str, bool | str] = {"wait": True, "built": "built", "ack": False}
        appends: dict[str, list[float]] = {mode: [] for mode in modes}
        for mode, wait in modes.items():
            scraped = histogram_buckets((await client.get("/metrics")).text)
            arng = random.Random({"wait": 7, "built": 9, "ack": 8}[mode])
            for i in range(args.appends):
                msgs = chat_messages(arng, 2, id_prefix=f"{mode}{i}-")
                started = time.perf_counter()
                response = await store(client, "tenant-2", f"append-{mode}", msgs,
                                       wait=wait)
                appends[mode].append(time.perf_counter() - started)
                response.raise_for_status()
                if response.json().get("job_id"):
                    job_ids.append(response.json()["job_id"])
            await jobs_done(client, job_ids)
            result[f"append_{mode}_server"] = {  # store stages only (and its builds')
                k: v for k, v in bucket_quantiles(scraped, histogram_buckets(
                    (await client.get("/metrics")).text)).items() if k.startswith("store_")}
        result["append_2_wait_true"] = stats(appends["wait"])
        result["append_2_wait_built"] = stats(appends["built"])
        result["append_2_wait_false_ack"] = stats(appends["ack"])
        progress(result)

        # 5. LoCoMo-style import
        if args.locomo:
            sessions = locomo_sessions(Path(args.locomo), args.locomo_conversations)
            turns = sum(len(m) for _, _, m in sessions)
            conversations: dict[str, list[tuple[str, list[Json]]]] = {}
            for namespace, session_id, msgs in sessions:
                conversations.setdefault(namespace, []).append((session_id, msgs))
            waiting = list(conversations.items())

            async def importer() -> None:
                while waiting:
                    namespace, own = waiting.pop(0)
                    for session_id, msgs in own:
                        response = await store(client, f"locomo-{namespace}", session_id,
                                               msgs, wait="built")
                        response.raise_for_status()

            spent_before = seconds_spent((await client.get("/metrics")).text)
            began = time.perf_counter()
            await asyncio.gather(*(importer() for _ in range(args.locomo_clients)))
            seconds = time.perf_counter() - began
            spent = seconds_spent((await client.get("/metrics")).text)
            texts: dict[str, list[str]] = {}
            for namespace, session_id, _ in sessions:
                page = (await client.get("/v1/memories", params={
                    "namespace": f"locomo-{namespace}", "session_id": session_id,
                    "limit": 500})).json()
                texts[f"{namespace}/{session_id}"] = [m["text"] for m in page["items"]]
            result["locomo"] = {"clients": args.locomo_clients,
                                "sessions": len(sessions), "turns": turns,
                                "chunks": sum(len(t) for t in texts.values()),
                                "seconds": round(seconds, 1),
                                "turns_per_second": round(turns / seconds, 1),
                                "seconds_spent": {k: round(v - spent_before.get(k, 0.0), 2)
                                                  for k, v in sorted(spent.items())
                                                  if v > spent_before.get(k, 0.0)}}
            result["_locomo_texts"] = texts
            result["rss_after_locomo_kib"] = server.memory_kib()
    return result


def progress(result: Json) -> None:
    """Print what is measured so far (a long run on a busy machine shows it as it goes)."""
    print(json.dumps({k: v for k, v in result.items() if not k.startswith("_")},
                     default=str), flush=True)


def report(result: Json) -> str:
    ingest, once = result["ingest"], result["stored_once"]
    lines = [
        f"commit {result['commit']}",
        f"ingest: {ingest['store_calls']} store calls, {ingest['messages']} messages, "
        f"statuses {ingest['statuses']}, errors {ingest['errors']}; acknowledged in "
        f"{ingest['acknowledged_seconds']} s, built in {ingest['built_seconds']} s "
        f"({ingest['messages_per_second']} messages/s)",
        f"stored once: {once}",
        f"recall idle: {result['recall_idle']}; during ingest: "
        f"{result['recall_during_ingest']}; p99 ratio {result.get('recall_p99_ratio')}",
        f"recall time outside the recall service (HTTP, loop waits): idle "
        f"{result.get('recall_idle_outside_service')}; during ingest "
        f"{result.get('recall_during_ingest_outside_service')}",
        f"recall degraded by the deadline (share, skipped stages): idle "
        f"{result.get('recall_idle_degraded')}; during ingest "
        f"{result.get('recall_during_ingest_degraded')}",
        f"the slowest 1 % of recalls during ingest: "
        f"{result.get('recall_during_ingest_slowest')}",
        f"recall idle, server histograms: {result.get('recall_idle_server')}",
        f"recall during ingest, server histograms: {result.get('recall_during_ingest_server')}",
        f"RSS at idle start: {result['rss_idle_start_kib']} KiB",
        f"RSS after ingest: {result['rss_after_ingest_kib']} KiB",
        f"RSS after ingest, {REST_SECONDS:g} s at rest: "
        f"{result['rss_at_rest_after_ingest_kib']} KiB",
        f"memory held: {result['memory_held']}",
        f"2-message append wait=true: {result['append_2_wait_true']}",
        f"2-message append wait=built: {result['append_2_wait_built']}",
        f"2-message append wait=false ack: {result['append_2_wait_false_ack']}",
        f"  store stages (server histograms, bucket bounds): wait=true "
        f"{result.get('append_wait_server')}; built {result.get('append_built_server')}; "
        f"wait=false and its builds "
        f"{result.get('append_ack_server')}",
    ]
    if "locomo" in result:
        lines.append(f"LoCoMo import: {result['locomo']}")
        lines.append(f"RSS after LoCoMo: {result['rss_after_locomo_kib']} KiB")
    if "raw_encode" in result:
        lines.append(f"raw model on the same chunk texts: {result['raw_encode']}")
    return "\n".join(lines)


def against_server(run_bench: Callable[[argparse.Namespace, ServerProcess], Awaitable[Json]],
                   args: argparse.Namespace, *, name: str, settings: list[str],
                   env: dict[str, str] | None = None, log_path: Path | None = None) -> Json:
    """`run_bench(args, server)` against one real `engram serve` on a temporary data
    directory, stopped after: compression off (its background passes would make runs
    differ), each `NAME=VALUE` of `settings` as `ENGRAM_NAME`, then `env` as is."""
    with tempfile.TemporaryDirectory(prefix=f"engram-{name}-") as tmp:
        chosen = dict(item.split("=", 1) for item in settings)
        server = ServerProcess(Path(tmp) / "data", name=f"{name}-server", log_path=log_path,
                               env={"ENGRAM_COMPRESSION_ENABLED": "false",
                                    **{f"ENGRAM_{k.upper()}": v for k, v in chosen.items()},
                                    **(env or {})})
        server.start(wait=False)
        try:
            server.wait_ready(timeout=900)  # the shared machine can be very busy
            return asyncio.run(run_bench(args, server))
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tenants", type=int, default=16)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--idle-recalls", type=int, default=40, help="per recall client")
    parser.add_argument("--appends", type=int, default=40, help="per mode")
    parser.add_argument("--locomo", default="", help="LoCoMo JSON (input data only)")
    parser.add_argument("--locomo-clients", type=int, default=1,
                        help="conversations imported at once (each its sessions in order)")
    parser.add_argument("--locomo-conversations", type=int, default=None,
                        help="only the first N conversations (default all)")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a server setting, e.g. recall_first_max_wait_ms=0 (repeatable)")
    parser.add_argument("--log", type=Path, default=None,
                        help="keep the server's log here (a stalled worker's task stacks)")
    args = parser.parse_args()
    result = against_server(run, args, name="load", settings=args.set, log_path=args.log)
    texts = result.pop("_locomo_texts", None)
    if texts:
        timings = encode_seconds(texts, threads=1, batch_size=32, per_session=True)
        turns = result["locomo"]["turns"]
        result["raw_encode"] = {
            "seconds": round(timings["one_call"], 2),
            # one pass per session's chunks, as a store encodes them: what batching costs
            "seconds_per_session": round(timings["per_session"], 2),
            "turns_per_second_equivalent": round(turns / timings["one_call"], 1),
            "store_to_raw_ratio": round(timings["one_call"] / result["locomo"]["seconds"], 3)}
    print(report(result))
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / f"load-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=2, default=str))
    print(f"written {out}")


if __name__ == "__main__":
    main()
