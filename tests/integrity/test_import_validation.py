"""An import file is client input: the API's rules apply to every record, and a bad line is a
400 naming it, with nothing written — the namespace exports and lists as before, also after
a restart."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.helpers import all_memories, store

CHAT_ZH = [
    {"msg_id": "1", "role": "user", "content": "下周二上午我要去医院体检，记得提醒我空腹。",
     "timestamp": "2026-11-20T08:00:00+08:00"},
    {"msg_id": "2", "role": "assistant", "content": "好的，下周二上午体检，需要空腹。"},
]
CHAT_EN = [
    {"msg_id": "1", "role": "user", "content": "We decided to use LanceDB for the memory store."},
    {"msg_id": "2", "role": "assistant", "content": "Noted: LanceDB, embedded, no server."},
]
NDJSON = {"content-type": "application/x-ndjson"}

Edit = Callable[[dict[str, Any]], None]


def setter(**values: Any) -> Edit:
    return lambda data: data.update(values)


def dropper(name: str) -> Edit:
    return lambda data: data.pop(name)


# (record type, change to its first record, words the 400 must contain)
BAD_RECORDS: list[tuple[str, Edit, str]] = [
    ("message", setter(timestamp="9999-12-31T23:59:59-14:00"), "timestamp"),
    ("message", setter(timestamp="0001-01-01T00:00:00+14:00"), "timestamp"),
    ("message", setter(received_at="1969-07-20T20:17:00Z"), "received_at"),
    ("message", setter(session_id="alice\x1fother"), "session_id"),
    ("message", setter(role="god"), "role"),
    ("message", setter(content=""), "content"),
    ("message", setter(content=" \n "), "content"),
    ("message", setter(seq=-1), "seq"),
    ("message", setter(state="half-done"), "state"),
    ("memory", dropper("created_at"), "created_at"),
    ("memory", setter(created_at="9999-12-31T23:59:59-14:00"), "created_at"),
    ("memory", setter(state="deleted"), "state"),
    ("memory", setter(tier="eternal"), "tier"),
    ("memory", setter(hit_count=-1), "hit_count"),
    ("memory", setter(access_count=10**12), "access_count"),
    ("memory", setter(importance=11), "importance"),
    ("memory", setter(category="secret"), "category"),
    ("memory", setter(text=""), "text"),
    ("memory", setter(entities="not json"), "entities"),
    ("memory", setter(summary_of=["mem_not_in_this_file"]), "summary_of"),
    ("memory", setter(session_id="x\x00y"), "session_id"),
    ("event", setter(metadata="[1, 2"), "metadata"),
    ("event", setter(memory_id="mem_not_in_this_file"), "mem_not_in_this_file"),
    ("event", setter(timestamp="2201-01-01T00:00:00Z"), "timestamp"),
    ("session", setter(session_id=""), "session_id"),
    ("archive", setter(memory_id="mem_not_in_this_file"), "mem_not_in_this_file"),
]


def records(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in body.splitlines() if line.strip()]


def encode(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in lines)


async def export(client: Any) -> bytes:
    response = await client.get("/v1/namespaces/alice/export")
    assert response.status_code == 200, response.text
    body: bytes = response.content
    return body


def without_header_time(body: bytes) -> list[dict[str, Any]]:
    lines = records(body)
    lines[0].pop("exported_at")
    return lines


async def fill(client: Any) -> None:
    await store(client, CHAT_ZH, session_id="health")
    await store(client, CHAT_EN, session_id="arch")
    first = (await all_memories(client))[0]
    await client.post(f"/v1/memories/{first['id']}/access", json={"note": "checked"})


async def assert_rejected(client: Any, body: bytes, status: int, *words: str) -> None:
    for namespace in ("alice", "fresh"):
        response = await client.post(f"/v1/namespaces/{namespace}/import", content=body,
                                     headers=NDJSON)
        assert response.status_code == status, (words, response.text)
        message = response.json()["error"]["message"]
        for word in words:
            assert word in message, (word, message)


class TestInvalidRecords:
    async def test_every_bad_record_is_400_with_its_line_and_nothing_is_written(
        self, open_client: Any
    ) -> None:
        async with open_client(max_message_chars=200) as client:
            await fill(client)
            good = await export(client)
            before = without_header_time(good)
            lines = records(good)
            first = {kind: next(i for i, line in enumerate(lines) if line.get("type") == kind)
                     for kind in ("message", "memory", "event", "session")}
            compressed_like = dict(lines[first["memory"]]["data"], state="compressed")
            lines.append({"type": "archive", "data": {
                "memory_id": compressed_like["id"], "namespace": "alice",
                "session_id": compressed_like["session_id"], "text": "the original"}})
            first["archive"] = len(lines) - 1
            assert (await client.post("/v1/namespaces/check/import", content=encode(lines),
                                      headers=NDJSON)).status_code == 200
            await client.delete("/v1/namespaces/check")

            for kind, edit, word in BAD_RECORDS:
                bad = json.loads(json.dumps(lines))
                edit(bad[first[kind]]["data"])
                await assert_rejected(client, encode(bad), 400, f"line {first[kind] + 1} ",
                                      word)

            tail = len(lines) + 1  # the line after the last one
            await assert_rejected(client, encode([*lines, lines[first["message"]]]), 400,
                                  f"line {tail} ", "appears twice")
            long = json.loads(json.dumps(lines))
            long[first["message"]]["data"]["content"] = "很长的消息 long message " * 20
            await assert_rejected(client, encode(long), 413, f"line {first['message'] + 1}:",
                                  "content")
            raw = encode(lines).splitlines()
            undecodable = b"\n".join([*raw[:3], b'{"type": "message", "data": "\xff\xfe"}',
                                      *raw[3:]])
            await assert_rejected(client, undecodable, 400, "line 4 ", "UTF-8")
            deep = b"\n".join([*raw, b"[" * 100_000 + b"]" * 100_000])
            await assert_rejected(client, deep, 400, f"line {len(raw) + 1} ", "nested")
            deep_object = b"\n".join([*raw, b'{"a": ' * 100_000 + b"1" + b"}" * 100_000])
            await assert_rejected(client, deep_object, 400, f"line {len(raw) + 1} ")
            blank_lines = b"\n\n".join([*raw, b'{"type": "memory"}'])
            await assert_rejected(client, blank_lines, 400, f"line {2 * len(raw) + 1} ")
            await assert_rejected(client, b"\xff" + good, 400, "line 1 ")
            await assert_rejected(client, b"[" * 100_000 + b"\n" + good, 400, "line 1 ")

            assert without_header_time(await export(client)) == before
            assert await all_memories(client, "fresh") == []
            assert (await client.get("/v1/namespaces/fresh/export")).status_code == 200
        async with open_client() as restarted:
            assert without_header_time(await export(restarted)) == before
            assert len(await all_memories(restarted)) == 2
            again = await store(restarted, CHAT_ZH, session_id="health")
            assert again["status"] == "unchanged"
