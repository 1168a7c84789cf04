"""Read-your-writes under load (issue 37): one real `engram serve` process, one run.

`--tenants` background tenants ingest at once (`--sessions` sessions each, one store call per
session, alternately `wait=true` and `wait=false`: synthetic mixed English/Chinese chats of
`--messages` messages, or LoCoMo sessions with `--locomo`). While they ingest, 40 everyday
facts (20 Chinese in namespace `ryw-zh`, 20 English in `ryw-en`, each in its own session)
are stored one after another with `wait=false` (`--fact-wait true`: the default `wait=true`,
the new turn embedded before the answer), and right after each answer a recall asks a
question whose key word is in that fact only. A fact is found when a returned memory's text
holds the fact's text; a recall that does not find it is retried every `--retry-every` s
for up to `--retry-for` s. Measured per fact: found at once, provisional (the pending search
answered, app/recall/pending.py) or built, the time from sending the store to the answer of
the recall that found it (ack-to-found), and whether the tenants were still sending, their
builds still running, or all built when it was stored. Then, everything built: one more
recall per fact (found, no longer provisional), each fact's namespace listed through
GET /v1/memories (each fact in exactly one memory), and every message sent read back from
the LanceDB files (stored once). Errors: any status but 200/202.

Usage (from the repository root):

    flock /work/bench.lock env PYTHONPATH=. .venv/bin/python bench/read_your_writes.py
    ... bench/read_your_writes.py --tenants 4 --sessions 3          # quick
    ... bench/read_your_writes.py --locomo /work/shared/data/locomo-dev.json

Prints a table and writes JSON to bench/results/ (git-ignored); `--json` prints it too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.load import (  # noqa: E402
    RESULTS_DIR,
    against_server,
    http,
    jobs_done,
    locomo_sessions,
    stats,
    store,
    stored_once,
)
from bench.store_throughput import git_commit  # noqa: E402
from tests.procs import ServerProcess, chat_messages  # noqa: E402

Json = dict[str, Any]

# (fact, question, key word): the key word is in the question and in this fact only.
FACTS_ZH: list[tuple[str, str, str]] = [
    ("我女儿的钢琴课改到周四下午四点了。", "女儿的钢琴课改到星期几了？", "钢琴"),
    ("我对花生过敏，吃了会起疹子。", "我对什么东西过敏？", "过敏"),
    ("我们家的小猫叫小白，今年三岁了。", "我们家的小猫叫什么名字？", "小猫"),
    ("下个月十五号我要去成都出差。", "我下个月去哪里出差？", "出差"),
    ("我的牙医预约在下周二上午十点。", "牙医预约是什么时候？", "牙医"),
    ("我老公的生日是九月二十号。", "我老公的生日是哪一天？", "生日"),
    ("新家的无线网密码写在冰箱门的便签上。", "无线网密码写在哪里？", "密码"),
    ("我儿子的足球训练每周六早上八点在体育中心。", "儿子的足球训练在哪里？", "足球"),
    ("我这个月的买菜预算是两千块。", "这个月买菜的预算是多少？", "预算"),
    ("我的车停在公司地下停车场的B2层。", "我的车停在停车场哪一层？", "停车场"),
    ("我妈妈下周三要做眼睛手术。", "妈妈哪天做手术？", "手术"),
    ("我最近开始学西班牙语，每周上两次课。", "我每周上几次西班牙语课？", "西班牙语"),
    ("我的护照放在书房抽屉最下面那层。", "我的护照放在哪里？", "护照"),
    ("我们家的房租每月五号交，三千八百块。", "房租每个月几号交？", "房租"),
    ("我的体检报告显示胆固醇有点高。", "体检报告说了什么？", "体检"),
    ("这个周末我们约了王阿姨一起去爬香山。", "这个周末要和谁去爬山？", "周末"),
    ("我的新手机号码尾号是8826。", "我的手机号码尾号是多少？", "手机"),
    ("女儿的班主任姓李，电话在家长群里。", "女儿的班主任姓什么？", "班主任"),
    ("我每天早上七点要吃降压药。", "我每天几点吃降压药？", "降压药"),
    ("我报名了十月份的上海马拉松。", "我报名了哪个马拉松？", "马拉松"),
]
FACTS_EN: list[tuple[str, str, str]] = [
    ("My new landlord is called Pieter, he lives downstairs.",
     "What is my landlord called?", "landlord"),
    ("I switched my gym membership to the place on Elm Street.",
     "Where is my gym now?", "gym"),
    ("My son's dentist appointment moved to Friday at 3 pm.",
     "When is my son's dentist appointment?", "dentist"),
    ("I'm allergic to penicillin, so it must never be prescribed.",
     "Which medicine am I allergic to?", "allergic"),
    ("Our dog Biscuit needs his vaccine booster in November.",
     "When is the dog's vaccine booster due?", "vaccine"),
    ("My sister Maya is getting married in Lisbon next June.",
     "Where is my sister getting married?", "sister"),
    ("The spare house key is under the blue pot by the back door.",
     "Where is the spare key?", "spare"),
    ("I parked the car on level 4 of the airport garage, row K.",
     "Which level of the garage did I park on?", "garage"),
    ("My daughter's school play is on the 12th, she plays the fox.",
     "What part does my daughter have in the school play?", "school"),
    ("I started a pottery class on Wednesday evenings.",
     "When is my pottery class?", "pottery"),
    ("The hint for my work laptop password is the name of my first bike.",
     "What is the hint for my laptop password?", "laptop"),
    ("The plumber is coming Monday morning to fix the kitchen sink.",
     "When is the plumber coming?", "plumber"),
    ("I've decided to cut back on coffee to one cup a day.",
     "How much coffee do I drink now?", "coffee"),
    ("My flight to Toronto leaves at 6:40 on Saturday morning.",
     "When does my Toronto flight leave?", "toronto"),
    ("My grandmother's favourite flowers are yellow tulips.",
     "What flowers does my grandmother like?", "grandmother"),
    ("Our book club is reading The Remains of the Day this month.",
     "What is the book club reading?", "book"),
    ("My car insurance renews on the 3rd of August with Aviva.",
     "When does my car insurance renew?", "insurance"),
    ("I'm training for a 10k race in September, three runs a week.",
     "What race am I training for?", "race"),
    ("My doctor told me to take vitamin D every morning.",
     "Which vitamin should I take every morning?", "vitamin"),
    ("Our neighbour Tomasz is watering the plants while we're away.",
     "Who is watering the plants while we're away?", "watering"),
]


def facts() -> list[Json]:
    """The 40 facts, Chinese and English interleaved, each with its namespace and session."""
    out: list[Json] = []
    for index in range(max(len(FACTS_ZH), len(FACTS_EN))):
        for language, table in (("zh", FACTS_ZH), ("en", FACTS_EN)):
            if index < len(table):
                text, question, key = table[index]
                out.append({"language": language, "text": text, "question": question,
                            "key": key, "namespace": f"ryw-{language}",
                            "session_id": f"fact-{index:02d}", "msg_id": "m1"})
    for fact in out:  # the key word is the fact's own
        others = [f["text"] for f in out if f is not fact and f["language"] == fact["language"]]
        assert fact["key"].lower() in fact["text"].lower(), fact
        assert fact["key"].lower() in fact["question"].lower(), fact
        assert not any(fact["key"].lower() in o.lower() for o in others), fact
    return out


def holding(body: Json, text: str) -> list[Json]:
    return [m for m in body.get("memories", []) if text in m["text"]]


async def ingest(client: httpx.AsyncClient, args: argparse.Namespace, index: int,
                 plan: list[tuple[str, list[Json]]], sent: dict[tuple[str, str], set[str]],
                 job_ids: list[str], errors: list[str], statuses: Counter[int]) -> None:
    """One background tenant: its sessions one store call after another."""
    namespace = f"tenant-{index}"
    for s, (session_id, msgs) in enumerate(plan):
        sent[(namespace, session_id)] = {m["msg_id"] for m in msgs}
        response = await store(client, namespace, session_id, msgs, wait=(s + index) % 2 == 0)
        statuses[response.status_code] += 1
        if response.status_code not in (200, 202):
            errors.append(f"store {response.status_code}: {response.text[:200]}")
        elif response.json().get("job_id"):
            job_ids.append(response.json()["job_id"])


def tenant_plans(args: argparse.Namespace) -> list[list[tuple[str, list[Json]]]]:
    if args.locomo:
        sessions = locomo_sessions(Path(args.locomo), None)
        return [[(f"{ns}-{sid}", msgs) for ns, sid, msgs in sessions[i::args.tenants]]
                [:args.sessions] for i in range(args.tenants)]
    plans = []
    for index in range(args.tenants):
        rng = random.Random(1000 + index)
        plans.append([(f"s{s}", chat_messages(rng, args.messages, id_prefix=f"t{index}s{s}-"))
                      for s in range(args.sessions)])
    return plans


async def recall(client: httpx.AsyncClient, fact: Json, latencies: list[float],
                 errors: list[str]) -> Json:
    started = time.perf_counter()
    response = await client.post("/v1/recall", json={
        "namespace": fact["namespace"], "query": fact["question"], "top_k": 5})
    latencies.append(time.perf_counter() - started)
    if response.status_code != 200:
        errors.append(f"recall {response.status_code}: {response.text[:200]}")
        return {}
    body: Json = response.json()
    return body


async def write_and_read(client: httpx.AsyncClient, args: argparse.Namespace, fact: Json,
                         job_ids: list[str], errors: list[str], recall_latencies: list[float],
                         stage: str) -> Json:
    """Store one fact (`--fact-wait`), recall right after the answer, retry until found."""
    row: Json = {k: fact[k] for k in ("language", "namespace", "session_id", "key")}
    row["load"] = stage  # the tenants still sending, their builds running, or idle
    started = time.perf_counter()
    response = await store(client, fact["namespace"], fact["session_id"], [
        {"msg_id": fact["msg_id"], "role": "user", "content": fact["text"]}],
        wait=args.fact_wait != "false")
    row["ack_ms"] = round(1000 * (time.perf_counter() - started), 1)
    row["status"] = response.status_code
    if response.status_code != (202 if args.fact_wait == "false" else 200):
        errors.append(f"fact store {response.status_code}: {response.text[:200]}")
        row["found"] = False
        return row
    job_ids.append(response.json()["job_id"])
    attempts = 0
    while True:
        attempts += 1
        body = await recall(client, fact, recall_latencies, errors)
        found = holding(body, fact["text"])
        elapsed = time.perf_counter() - started
        if found or elapsed >= args.retry_for:
            break
        await asyncio.sleep(args.retry_every)
    row.update(found=bool(found), attempts=attempts, found_at_once=bool(found) and attempts == 1,
               ack_to_found_ms=round(1000 * elapsed, 1) if found else None,
               provisional=bool(found) and bool(found[0].get("provisional")),
               rank=next(i for i, m in enumerate(body["memories"])
                         if fact["text"] in m["text"]) + 1 if found else None,
               copies=len(found))
    return row


async def run(args: argparse.Namespace, server: ServerProcess) -> Json:
    result: Json = {"commit": git_commit(), "args": vars(args),
                    "load_average_start": os.getloadavg()}
    sent: dict[tuple[str, str], set[str]] = {}
    job_ids: list[str] = []
    errors: list[str] = []
    statuses: Counter[int] = Counter()
    recall_latencies: list[float] = []
    rows: list[Json] = []
    the_facts = facts()
    plans = tenant_plans(args)
    async with http(server.base_url) as client:
        began = time.perf_counter()
        tenant_jobs: list[str] = []
        marks: dict[str, float] = {}

        async def tenants() -> None:
            await asyncio.gather(*(
                ingest(client, args, i, plan, sent, tenant_jobs, errors, statuses)
                for i, plan in enumerate(plans)))
            marks["acknowledged"] = time.perf_counter() - began
            await jobs_done(client, tenant_jobs)
            marks["built"] = time.perf_counter() - began

        load = asyncio.create_task(tenants())
        await asyncio.sleep(args.warmup)  # the ingest under way before the first fact
        for fact in the_facts:
            stage = ("sending" if "acknowledged" not in marks
                     else "building" if "built" not in marks else "idle")
            rows.append(await write_and_read(client, args, fact, job_ids, errors,
                                             recall_latencies, stage=stage))
            sent[(fact["namespace"], fact["session_id"])] = {fact["msg_id"]}
            if args.gap:
                await asyncio.sleep(args.gap)
        facts_done = time.perf_counter() - began
        result["load_average_facts_done"] = os.getloadavg()
        await load
        job_ids += tenant_jobs
        await jobs_done(client, job_ids)
        built = time.perf_counter() - began

        # Everything built: the real memory, once.
        after: list[float] = []
        for fact, row in zip(the_facts, rows, strict=True):
            body = await recall(client, fact, after, errors)
            found = holding(body, fact["text"])
            row["found_after_build"] = bool(found)
            row["provisional_after_build"] = any(m.get("provisional") for m in found)
        listed: dict[str, list[str]] = {}
        for namespace in sorted({f["namespace"] for f in the_facts}):
            response = await client.get("/v1/memories", params={
                "namespace": namespace, "limit": 500})
            if response.status_code != 200:
                errors.append(f"memories {response.status_code}: {response.text[:200]}")
                continue
            listed[namespace] = [m["text"] for m in response.json()["items"]]
        for fact, row in zip(the_facts, rows, strict=True):
            row["listed_copies"] = sum(fact["text"] in t for t in listed.get(fact["namespace"],
                                                                            []))
        result["load_average_end"] = os.getloadavg()
    found = [r for r in rows if r["found"]]
    times = [r["ack_to_found_ms"] for r in found]
    by_language = {lang: {"facts": sum(r["language"] == lang for r in rows),
                          "found_at_once": sum(r["language"] == lang and r["found_at_once"]
                                               for r in rows),
                          "found": sum(r["language"] == lang and r["found"] for r in rows)}
                   for lang in ("zh", "en")}
    result["facts"] = {
        "n": len(rows), "load": dict(Counter(r["load"] for r in rows)),
        "found_at_once": sum(r["found_at_once"] for r in rows),
        "found": len(found), "by_language": by_language,
        "provisional_share": round(sum(r["provisional"] for r in found) / len(found), 3)
        if found else None,
        "ack_to_found_ms": {"median": round(statistics.median(times), 1),
                            "worst": max(times)} if times else {},
        "found_after_build": sum(r["found_after_build"] for r in rows),
        "provisional_after_build": sum(r["provisional_after_build"] for r in rows),
        "listed_once": sum(r["listed_copies"] == 1 for r in rows),
        "listed_copies": dict(Counter(r["listed_copies"] for r in rows)),
        "not_found": [r["key"] for r in rows if not r["found"]],
        "not_at_once": [r["key"] for r in rows if r["found"] and not r["found_at_once"]],
    }
    result["fact_ack"] = stats([r["ack_ms"] / 1000 for r in rows])
    result["recall_during_load"] = stats(recall_latencies)
    result["recall_after_build"] = stats(after)
    result["ingest"] = {"tenants": args.tenants, "store_calls": sum(statuses.values()),
                        "messages": sum(len(m) for p in plans for _, m in p),
                        "statuses": dict(statuses), "facts_done_seconds": round(facts_done, 1),
                        "acknowledged_seconds": round(marks["acknowledged"], 1),
                        "tenants_built_seconds": round(marks["built"], 1),
                        "all_built_seconds": round(built, 1)}
    result["errors"] = {"n": len(errors), "samples": errors[:5]}
    result["stored_once"] = stored_once(server.data_dir, sent)
    result["rows"] = rows
    return result


def report(result: Json) -> str:
    f, once, ingest = result["facts"], result["stored_once"], result["ingest"]
    zh, en = f["by_language"]["zh"], f["by_language"]["en"]
    worst = f["ack_to_found_ms"].get("worst")
    lines = [
        f"commit {result['commit']}; load average start {result['load_average_start']}, "
        f"facts done {result['load_average_facts_done']}, end {result['load_average_end']}",
        f"ingest: {ingest['tenants']} tenants, {ingest['store_calls']} store calls, "
        f"{ingest['messages']} messages, statuses {ingest['statuses']}; facts done at "
        f"{ingest['facts_done_seconds']} s; tenants acknowledged at "
        f"{ingest['acknowledged_seconds']} s, built at {ingest['tenants_built_seconds']} s; "
        f"all built at {ingest['all_built_seconds']} s",
        "",
        "| what | figure |",
        "|---|---|",
        f"| facts stored while the tenants were sending / building / idle | "
        f"{f['load'].get('sending', 0)} / {f['load'].get('building', 0)} / "
        f"{f['load'].get('idle', 0)} |",
        f"| found at once (zh / en) | {f['found_at_once']}/{f['n']} "
        f"({zh['found_at_once']}/{zh['facts']} / {en['found_at_once']}/{en['facts']}) |",
        f"| found within the retries | {f['found']}/{f['n']} |",
        f"| provisional share of those found | {f['provisional_share']} |",
        f"| ack-to-found median / worst | {f['ack_to_found_ms'].get('median')} / {worst} ms |",
        f"| `wait={result['args']['fact_wait']}` ack p50 / p99 | "
        f"{result['fact_ack'].get('p50_ms')} / "
        f"{result['fact_ack'].get('p99_ms')} ms |",
        f"| recall during the load p50 / p99 ({result['recall_during_load']['n']}) | "
        f"{result['recall_during_load'].get('p50_ms')} / "
        f"{result['recall_during_load'].get('p99_ms')} ms |",
        f"| errors (non-2xx) | {result['errors']['n']} |",
        f"| after the build: found, provisional | {f['found_after_build']}/{f['n']}, "
        f"{f['provisional_after_build']} |",
        f"| each fact listed once (GET /v1/memories) | {f['listed_once']}/{f['n']} "
        f"(copies {f['listed_copies']}) |",
        f"| every message stored once (raw log) | {once['messages_sent']} sent, "
        f"{once['duplicates']} duplicates, {once['missing']} missing, "
        f"{once['pending']} pending |",
    ]
    if f["not_found"] or f["not_at_once"]:
        lines.append(f"not found: {f['not_found']}; found on a retry: {f['not_at_once']}")
    if result["errors"]["samples"]:
        lines.append(f"error samples: {result['errors']['samples']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--tenants", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=10, help="per tenant")
    parser.add_argument("--messages", type=int, default=20, help="per synthetic session")
    parser.add_argument("--locomo", default="",
                        help="LoCoMo JSON (input data only): the tenants store its sessions")
    parser.add_argument("--warmup", type=float, default=1.0,
                        help="seconds of ingest before the first fact")
    parser.add_argument("--gap", type=float, default=0.0, help="seconds between facts")
    parser.add_argument("--retry-for", type=float, default=10.0,
                        help="seconds after the store to keep recalling a fact not found")
    parser.add_argument("--retry-every", type=float, default=0.25)
    parser.add_argument("--fact-wait", choices=("false", "true"), default="false",
                        help="the facts' `wait`: false, or true (their vectors first)")
    parser.add_argument("--json", action="store_true", help="print the result JSON too")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a server setting, e.g. recall_deadline_ms=0 (repeatable)")
    args = parser.parse_args()
    result = against_server(run, args, name="ryw", settings=args.set)
    print(report(result))
    if args.json:
        print(json.dumps(result, indent=2, default=str, ensure_ascii=False))
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / f"read-your-writes-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=2, default=str, ensure_ascii=False))
    print(f"written {out}")


if __name__ == "__main__":
    main()
