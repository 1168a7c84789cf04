"""Bounded memory across many namespaces (issue 37): one real `engram serve` process.

`--namespaces` users (one namespace each) store `--sessions` sessions of `--messages` chat
turns (mixed Chinese and English, `tests.procs.chat_messages`), `--clients` users at a time,
each user's sessions in order (alternately `wait=true` and `wait=false`, as in load.py), and
an assistant recalls in the user's namespace after every `--recall-every` sessions. Every
`--sample-seconds` of the ingest and its builds, the server's RSS and its
`engram_memory_held` gauges are read: whatever grows with the number of namespaces seen
shows there. Then all builds are waited
for (jobs done), and reported: RSS (VmRSS, VmHWM, anonymous and file-backed parts) after the
ingest and after `REST_SECONDS` at rest, every gauge, errors, recall latency, and each
message stored once (read back from the LanceDB files below the API).

Usage (from the repository root; heavy runs under the shared lock):

    flock /work/bench.lock env PYTHONPATH=. .venv/bin/python bench/many_namespaces.py
    PYTHONPATH=. .venv/bin/python bench/many_namespaces.py --namespaces 24 --sessions 3  # quick

Prints a table and writes JSON to bench/results/ (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.load import (  # noqa: E402
    _QUERIES,
    REST_SECONDS,
    against_server,
    http,
    jobs_done,
    memory_gauges,
    resident,
    stats,
    store,
    stored_once,
)
from bench.store_throughput import git_commit  # noqa: E402
from tests.procs import ServerProcess, chat_messages  # noqa: E402

RESULTS_DIR = REPO_ROOT / "bench" / "results"
Json = dict[str, Any]
ONE_GB_KIB = 1024 * 1024


async def snapshot(client: httpx.AsyncClient, server: ServerProcess, done: int,
                   began: float) -> Json:
    """RSS and every gauge; `done` users have sent all their sessions."""
    return {"namespaces_done": done, "seconds": round(time.perf_counter() - began, 1),
            "rss_kib": resident(server),
            "memory_held": memory_gauges((await client.get("/metrics")).text)}


async def queue_empty(client: httpx.AsyncClient) -> None:
    """Wait for the store worker's queue to empty (one /metrics read every 2 s): polling
    a thousand jobs twice a second, as `jobs_done` does, would itself load the server."""
    while True:
        held = memory_gauges((await client.get("/metrics")).text)
        if not held.get("store_queue_sessions") and not held.get("write_queue_writes"):
            return
        await asyncio.sleep(2.0)


async def run(args: argparse.Namespace, server: ServerProcess) -> Json:
    result: Json = {"commit": git_commit(), "args": vars(args),
                    "rss_idle_start_kib": resident(server)}
    sent: dict[tuple[str, str], set[str]] = {}
    errors: list[str] = []
    statuses: Counter[int] = Counter()
    job_ids: list[str] = []
    recalls: list[float] = []
    recall_empty = 0
    samples: list[Json] = []
    waiting = list(range(args.namespaces))
    done = 0
    async with http(server.base_url) as client:
        began = time.perf_counter()

        async def user(index: int) -> None:
            nonlocal recall_empty
            rng = random.Random(args.seed * 100_003 + index)
            namespace = f"user-{index:04d}"
            for s in range(args.sessions):
                msgs = chat_messages(rng, args.messages, id_prefix=f"u{index}s{s}-")
                sent[(namespace, f"s{s}")] = {m["msg_id"] for m in msgs}
                response = await store(client, namespace, f"s{s}", msgs,
                                       wait=(s + index) % 2 == 0)
                statuses[response.status_code] += 1
                if response.status_code not in (200, 202):
                    errors.append(f"store {response.status_code}: {response.text[:200]}")
                elif response.json().get("job_id"):
                    job_ids.append(response.json()["job_id"])
                if args.recall_every and ((s + 1) % args.recall_every == 0
                                          or s == args.sessions - 1):
                    started = time.perf_counter()
                    answer = await client.post("/v1/recall", json={
                        "namespace": namespace, "query": rng.choice(_QUERIES), "top_k": 5})
                    recalls.append(time.perf_counter() - started)
                    if answer.status_code != 200:
                        errors.append(f"recall {answer.status_code}: {answer.text[:200]}")
                    elif not answer.json().get("memories"):
                        recall_empty += 1

        async def client_loop() -> None:
            nonlocal done
            while waiting:
                await user(waiting.pop(0))
                done += 1

        async def sampler() -> None:  # through the ingest and its builds
            while True:
                await asyncio.sleep(args.sample_seconds)
                samples.append(await snapshot(client, server, done, began))
                print(json.dumps(samples[-1]), flush=True)

        sampling = asyncio.create_task(sampler())
        await asyncio.gather(*(client_loop() for _ in range(args.clients)))
        acknowledged = time.perf_counter() - began
        await queue_empty(client)
        await jobs_done(client, job_ids)
        built = time.perf_counter() - began
        sampling.cancel()
        messages = args.namespaces * args.sessions * args.messages
        result["ingest"] = {
            "namespaces": args.namespaces, "messages": messages,
            "store_calls": args.namespaces * args.sessions, "statuses": dict(statuses),
            "errors": len(errors), "error_samples": errors[:5],
            "acknowledged_seconds": round(acknowledged, 1), "built_seconds": round(built, 1),
            "messages_per_second": round(messages / built, 1)}
        result["recall"] = {**stats(recalls), "empty": recall_empty}
        result["samples"] = samples
        result["rss_after_ingest_kib"] = resident(server)
        result["memory_held"] = memory_gauges((await client.get("/metrics")).text)
        # ... and at rest: the store worker hands freed pages back once its queue has been
        # empty a few seconds (app/store/service.py).
        await asyncio.sleep(REST_SECONDS)
        result["rss_at_rest_after_ingest_kib"] = resident(server)
        result["memory_held_at_rest"] = memory_gauges((await client.get("/metrics")).text)
    result["stored_once"] = stored_once(server.data_dir, sent)
    result["rss_within_1gb"] = result["rss_after_ingest_kib"]["VmRSS"] <= ONE_GB_KIB
    return result


def report(result: Json) -> str:
    ingest = result["ingest"]
    lines = [
        f"commit {result['commit']}",
        f"ingest: {ingest['namespaces']} namespaces, {ingest['store_calls']} store calls, "
        f"{ingest['messages']} messages, statuses {ingest['statuses']}, errors "
        f"{ingest['errors']}; acknowledged in {ingest['acknowledged_seconds']} s, built in "
        f"{ingest['built_seconds']} s ({ingest['messages_per_second']} messages/s)",
        f"recall during ingest: {result['recall']}",
        f"stored once: {result['stored_once']}",
        f"RSS at idle start: {result['rss_idle_start_kib']} KiB",
        f"RSS after ingest: {result['rss_after_ingest_kib']} KiB "
        f"(<= 1 GB: {result['rss_within_1gb']})",
        f"RSS after ingest, {REST_SECONDS:g} s at rest: "
        f"{result['rss_at_rest_after_ingest_kib']} KiB",
        "memory held after ingest / at rest:",
        *(f"  {k:28} {v:>14,.0f} {result['memory_held_at_rest'].get(k, 0):>14,.0f}"
          for k, v in result["memory_held"].items()),
        "namespaces done, seconds: VmRSS KiB, anonymous KiB, namespace cache rows, locks, "
        "raw-log sessions, LanceDB cache MB",
        *(f"  {s['namespaces_done']:5} {s['seconds']:8.1f} s {s['rss_kib']['VmRSS']:>9,} "
          f"{s['rss_kib'].get('Anonymous', 0):>9,} "
          f"{s['memory_held'].get('namespace_cache_rows', 0):>8,.0f} "
          f"{s['memory_held'].get('namespace_locks', 0):>6,.0f} "
          f"{s['memory_held'].get('raw_log_cache_sessions', 0):>6,.0f} "
          f"{s['memory_held'].get('lancedb_cache_bytes', 0) / 2**20:>7.1f}"
          for s in result["samples"]),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--namespaces", type=int, default=400)
    parser.add_argument("--sessions", type=int, default=6, help="per namespace")
    parser.add_argument("--messages", type=int, default=21, help="per session")
    parser.add_argument("--clients", type=int, default=12,
                        help="users storing at once (store calls in flight)")
    parser.add_argument("--recall-every", type=int, default=3,
                        help="a recall after every N sessions of a user (and after its "
                        "last); 0: no recalls")
    parser.add_argument("--sample-seconds", type=float, default=30.0,
                        help="read RSS and the gauges every N seconds of the ingest")
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a server setting, e.g. namespace_cache_max_rows=20000")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable of the server (e.g. MALLOC_ARENA_MAX=1)")
    parser.add_argument("--log", type=Path, default=None, help="keep the server's log here")
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the JSON here (e.g. under /work/logs/)")
    args = parser.parse_args()
    result = against_server(run, args, name="ns", settings=args.set,
                            env=dict(item.split("=", 1) for item in args.env), log_path=args.log)
    print(report(result))
    text = json.dumps(result, indent=2, default=str)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / f"many_namespaces-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(text)
    print(f"written {out}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(f"written {args.out}")


if __name__ == "__main__":
    main()
