"""An import races `wait=false` stores of the session it brings.

Namespace A holds session S (Chinese and English turns); its export is imported into
namespace B while other clients store into B's session S without waiting: some messages the
file holds too (same msg_id, same content), some that change a message of the file, some new
ones. Both paths write the raw log under its lock (the import also holds the write lock, a
`wait=false` store only the raw-log lock), so for every interleaving, once everything settled:

- every acknowledged message is in B's raw log exactly once, built (nothing pending), and
  every job is done;
- a message both paths wrote holds the content of the later raw-log write, as the API told
  it: a store that reported the message `updated` came after the import (its content wins),
  one that reported it `new` came before (the import's content wins);
- every message is in exactly one memory (no overlap configured), every memory is its
  messages as they are now, the ledger lists them;
- recall finds a Chinese and an English turn of S in B; namespace A is untouched.

Once with B's session S stored before (some of the file's messages, and one of B's own),
once into a namespace without the session.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from typing import Any

import httpx
import pytest

from tests.helpers import all_memories, job_state, store, wait_idle

NDJSON = {"content-type": "application/x-ndjson"}
# Windows of three turns, no overlap: each message belongs to exactly one memory.
SETTINGS: dict[str, Any] = {"chunk_max_turns": 3, "chunk_overlap_ratio": 0.0,
                            "compression_enabled": False, "skip_small_talk": False}
SESSION = "s"
ROUNDS = 3
EXTRA_ROUNDS = 3

ZH = ["我们下周三去杭州出差，住在西湖边的酒店。", "会议定在周四上午九点，地点是阿里巴巴园区。",
      "记得带上笔记本电脑和投影仪的转接头。", "回来的火车票已经订好了，周五下午三点出发。"]
EN = ["The quarterly report is due on the fifteenth of next month.",
      "Marta will review the budget section before we send it out.",
      "We agreed to move the database migration to the weekend window.",
      "The staging server needs a new certificate before Friday."]


def source_chat() -> list[dict[str, Any]]:
    turns = [text for pair in zip(ZH, EN, strict=True) for text in pair]
    return [{"msg_id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": text}
            for i, text in enumerate(turns)]


def render(role: str, content: str) -> str:
    return f"{role}: {content}"


async def export_lines(client: httpx.AsyncClient, namespace: str) -> list[str]:
    response = await client.get(f"/v1/namespaces/{namespace}/export")
    assert response.status_code == 200, response.text
    return response.content.decode().splitlines()


async def records(client: httpx.AsyncClient, namespace: str) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {
        k: [] for k in ("session", "message", "memory", "event", "archive")}
    for line in (await export_lines(client, namespace))[1:]:
        item = json.loads(line)
        found[item["type"]].append(item["data"])
    return found


async def later(delay: float, call: Any) -> Any:
    await asyncio.sleep(delay)
    return await call


async def race(client: httpx.AsyncClient, rng: random.Random, target: str, export: bytes,
               chat: list[dict[str, Any]], *, prior: bool, spread: float) -> Counter[str]:
    """One interleaving: stores spread over `spread` seconds around the import; what each
    store of a file's message saw (`before`: the import's rows were not there yet)."""
    file_content = {m["msg_id"]: (m["role"], m["content"]) for m in chat}
    # What the raw log must hold: msg_id -> (role, content); filled as answers come in.
    expected: dict[str, tuple[str, str]] = {}
    if prior:
        # B's S before the race: two of the file's messages as they are, one changed, and
        # one of B's own.
        seeded = [chat[0], chat[1], {**chat[2], "content": chat[2]["content"] + "（旧版）"},
                  {"msg_id": "b-own", "role": "user",
                   "content": "B's own note: the printer on floor two is broken again."}]
        await store(client, seeded, namespace=target, session_id=SESSION)
        expected.update({m["msg_id"]: (m["role"], m["content"]) for m in seeded})
    seeded_ids = set(expected)

    ids = list(file_content)
    rng.shuffle(ids)
    same = ids[:3]
    # Changes only of messages B did not hold: what a store reports then tells its order.
    changed = [i for i in ids[3:] if i not in expected][:3]
    batches: list[list[dict[str, Any]]] = []
    for msg_id in same:
        role, content = file_content[msg_id]
        batches.append([{"msg_id": msg_id, "role": role, "content": content}])
    for n, msg_id in enumerate(changed):
        role, content = file_content[msg_id]
        extra = f"（修改{n}）更正：时间改到下午。" if n % 2 == 0 else f" (edit {n}: moved to noon)"
        batches.append([{"msg_id": msg_id, "role": role, "content": content + extra}])
    for n in range(3):
        batches.append([{"msg_id": f"new{n}", "role": "user" if n % 2 == 0 else "assistant",
                         "content": f"新消息{n}：周末一起去爬山吧。" if n % 2 == 0 else
                         f"New message {n}: the hiking trail opens at seven."}])
    rng.shuffle(batches)

    async def one_store(batch: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Any]:
        response = await client.post("/v1/store", json={
            "namespace": target, "session_id": SESSION, "messages": batch, "wait": False})
        assert response.status_code in (200, 202), response.text
        return batch, response.json()

    async def do_import() -> Any:
        response = await client.post(f"/v1/namespaces/{target}/import", content=export,
                                     headers=NDJSON)
        assert response.status_code == 200, response.text
        return response.json()

    calls = [later(rng.uniform(0, spread), one_store(batch)) for batch in batches]
    calls.insert(rng.randrange(len(calls) + 1), later(rng.uniform(0, spread / 4), do_import()))
    results = await asyncio.gather(*calls)
    assert sum(isinstance(r, dict) for r in results) == 1  # the import answered 200
    stores = [r for r in results if isinstance(r, tuple)]

    # The oracle: the file's messages, then every store by what it reported.
    expected.update(file_content)  # the import's rows are later than B's earlier ones
    jobs = []
    orders: Counter[str] = Counter()
    for batch, body in stores:
        (message,) = batch
        msg_id, value = message["msg_id"], (message["role"], message["content"])
        if msg_id in file_content and msg_id not in seeded_ids:
            orders["before" if body["new"] else "after"] += 1
        if body.get("job_id"):
            jobs.append(body["job_id"])
        if msg_id.startswith("new"):
            assert (body["new"], body["updated"]) == (1, 0), body
            expected[msg_id] = value
        elif value != file_content[msg_id]:
            # A change of a message the file holds (and B did not): `updated` means it read
            # the import's row, so it is the later write; `new` means it came first, and the
            # import's row is.
            assert (body["new"], body["updated"]) in ((1, 0), (0, 1)), body
            expected[msg_id] = value if body["updated"] else file_content[msg_id]

    await wait_idle(client)
    for job_id in jobs:
        assert await job_state(client, job_id, seconds=60) == "done", job_id
    await check_session(client, target, expected)
    return orders


async def check_session(client: httpx.AsyncClient, namespace: str,
                        expected: dict[str, tuple[str, str]]) -> None:
    found = await records(client, namespace)
    log = [m for m in found["message"] if m["session_id"] == SESSION]
    keys = Counter(m["msg_id"] for m in log)
    assert not [k for k, n in keys.items() if n > 1], f"raw log holds twice: {keys}"
    assert set(keys) == set(expected), (
        f"missing {sorted(set(expected) - set(keys))}, unexpected "
        f"{sorted(set(keys) - set(expected))}")
    by_id = {m["msg_id"]: m for m in log}
    for msg_id, (role, content) in expected.items():
        assert (by_id[msg_id]["role"], by_id[msg_id]["content"]) == (role, content), (
            msg_id, by_id[msg_id]["content"], content)
        assert by_id[msg_id]["state"] == "done", by_id[msg_id]

    memories = [m for m in await all_memories(client, namespace, state="any")
                if m["session_id"] == SESSION and not m["summary_of"]]
    holders = Counter(i for m in memories for i in m["msg_ids"])
    assert {i: n for i, n in holders.items() if n != 1} == {}, (
        "messages in more than one memory", sorted(holders.items()))
    assert set(holders) == set(expected), f"in no memory: {set(expected) - set(holders)}"
    for memory in memories:
        assert memory["state"] == "active", memory
        text = "\n".join(render(*expected[i]) for i in memory["msg_ids"])
        assert memory["text"] == text, (memory["id"], memory["text"], text)
    (ledger,) = [s for s in found["session"] if s["session_id"] == SESSION]
    assert ledger["message_count"] == len(expected), ledger
    assert {m["id"] for m in memories} <= set(ledger["chunk_ids"]), ledger

    seqs = Counter(m["seq"] for m in log)
    assert not [s for s, n in seqs.items() if n > 1], f"two messages share a seq: {seqs}"

    for query, language, word in (("杭州出差住哪里", "zh", "杭州"),
                                  ("when is the quarterly report due", "en", "quarterly")):
        response = await client.post("/v1/recall", json={"namespace": namespace,
                                                          "query": query})
        assert response.status_code == 200, response.text
        hits = response.json()["memories"]
        assert any(h["session_id"] == SESSION and word in h["text"] for h in hits), (
            language, [h["text"] for h in hits])


@pytest.mark.parametrize("prior", [False, True], ids=["fresh-target", "session-in-target"])
async def test_import_racing_background_stores_loses_and_doubles_nothing(
        open_client: Any, prior: bool) -> None:
    async with open_client(**SETTINGS) as client:
        chat = source_chat()
        await store(client, chat, namespace="src", session_id=SESSION)
        source_before = await export_lines(client, "src")
        export = "\n".join(source_before).encode() + b"\n"
        # How long an import takes here and now: the stores are spread over about twice
        # that, so some land before its raw-log write and some after.
        started = time.monotonic()
        response = await client.post("/v1/namespaces/warmup/import", content=export,
                                     headers=NDJSON)
        assert response.status_code == 200, response.text
        spread = 2.5 * (time.monotonic() - started)
        orders: Counter[str] = Counter()
        # ROUNDS seeded interleavings, and a few more while one order has not happened yet
        # (a machine that slowed down after the warm-up shifts the stores to one side).
        for round_ in range(ROUNDS + EXTRA_ROUNDS):
            if round_ >= ROUNDS and orders["before"] and orders["after"]:
                break
            rng = random.Random(f"{prior}-{round_}")
            orders += await race(client, rng, f"dst{round_}", export, chat, prior=prior,
                                 spread=spread)
        # Both orders happened: stores that came before the import's raw-log write and
        # stores that read its rows.
        assert orders["before"] and orders["after"], orders
        assert (await export_lines(client, "src"))[1:] == source_before[1:]


async def test_import_into_a_session_the_target_chunked_otherwise(open_client: Any) -> None:
    """No race needed: B's S, built before the import, holds one of the file's messages
    with other content next to one of its own; the file's memories chunk S otherwise."""
    async with open_client(**SETTINGS) as client:
        chat = source_chat()
        await store(client, chat, namespace="src", session_id=SESSION)
        export = (await client.get("/v1/namespaces/src/export")).content
        own = {"msg_id": "b-own", "role": "user", "content": "B's own note: call the bank."}
        await store(client, [own, {**chat[4], "content": "An older version of m4."}],
                    namespace="dst", session_id=SESSION)
        response = await client.post("/v1/namespaces/dst/import", content=export,
                                     headers=NDJSON)
        assert response.status_code == 200, response.text
        await wait_idle(client)
        expected = {m["msg_id"]: (m["role"], m["content"]) for m in [own, *chat]}
        await check_session(client, "dst", expected)
