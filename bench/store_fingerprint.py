"""What a store writes, as a comparable dump: run it on two versions of the code and diff.

Stores sessions in-process (the real app, model and LanceDB in a temp dir, one `wait=true`
call per session, as an import does) and writes every memory and event of each namespace,
read back through the repository, as sorted JSON lines: memory fields (vectors rounded to
4 decimals: bf16 kernels may round the last bits differently across runs), event ids,
kinds, notes and metadata. Times the store stamps with the wall clock (created_at,
updated_at, last_accessed, an event's timestamp) are left out; message times are in.

Input: bilingual sessions generated from a fixed seed (English, Chinese, mixed; a fact
restated in a later session so the superseded search finds something), and with `--locomo
FILE` the first `--conversations` LoCoMo conversations too (read at run time, as bench
input only).

Usage (from the repository root of each version; the script may be copied beside it):

    PYTHONPATH=. .venv/bin/python bench/store_fingerprint.py OUT.jsonl \
        [--locomo ../shared/data/locomo-dev.json --conversations 1]
    diff BEFORE.jsonl AFTER.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from app.embedding.backends import load_model
from app.embedding.pool import EmbeddingPool
from app.main import create_app
from tests.conftest import make_settings
from tests.procs import chat_messages

_CLOCK_FIELDS = {"created_at", "updated_at", "last_accessed", "timestamp"}

# A fact and its later change, in both languages (the superseded search's case).
_RESTATED = [
    ("I booked the dentist for Tuesday at 9am, the clinic on Baker Street.",
     "The dentist on Baker Street moved my appointment to Thursday at 9am."),
    ("下周二上午我要去医院体检，已经预约好了。", "医院体检改到周四上午了，预约也改好了。"),
]


def bilingual_sessions(seed: int) -> list[tuple[str, str, list[dict[str, Any]]]]:
    rng = random.Random(seed)
    day = datetime(2026, 3, 1, 9, tzinfo=UTC)
    sessions = []
    for index, share in enumerate((0.0, 1.0, 0.5, 0.3, 0.0, 1.0)):
        messages = chat_messages(rng, 8 + index, id_prefix=f"s{index}-", zh_share=share)
        first, later = _RESTATED[index % 2]
        messages.insert(2, {"msg_id": f"s{index}-fact", "role": "user",
                            "content": first if index < 2 else later})
        when = day + timedelta(days=7 * index)
        for turn, message in enumerate(messages):
            message["timestamp"] = (when + timedelta(minutes=turn)).isoformat()
        sessions.append(("fingerprint", f"s{index}", messages))
    return sessions


def locomo_sessions(path: str, conversations: int) -> list[tuple[str, str, list[Any]]]:
    from bench.locomo import load

    return [(s.namespace, sid, msgs) for s in load(Path(path), limit=conversations)
            for sid, msgs in s.sessions]


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in sorted(row.items()):
        if key in _CLOCK_FIELDS:
            continue
        if key == "vector" and value is not None:
            value = [round(float(x), 4) for x in value]
        elif isinstance(value, datetime):
            value = value.isoformat()
        out[key] = value
    return out


async def run(sessions: list[tuple[str, str, list[Any]]], data_dir: Path) -> list[str]:
    settings = make_settings(data_dir, compression_enabled=False, embedding_threads=1,
                             log_level="WARNING")
    model = await asyncio.to_thread(load_model, settings.embedding_model, threads=1)
    pool = EmbeddingPool.from_model(model, settings)
    app = create_app(settings, pool=pool)
    lines: list[str] = []
    async with app.router.lifespan_context(app):
        repo = app.state.engram.repo
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://fingerprint",
                                     timeout=600) as client:
            for namespace, session_id, messages in sessions:
                response = await client.post("/v1/store", json={
                    "namespace": namespace, "session_id": session_id,
                    "messages": messages, "wait": "built"})
                response.raise_for_status()
        for namespace in sorted({ns for ns, _, _ in sessions}):
            for memory in await repo.namespace_memories(namespace, with_vector=True):
                lines.append(json.dumps({"memory": _plain(memory.to_row())},
                                        ensure_ascii=False, sort_keys=True))
            for event in await repo.namespace_events(namespace):
                lines.append(json.dumps({"event": _plain(event.to_row())},
                                        ensure_ascii=False, sort_keys=True))
    await pool.close()
    return sorted(lines)


def write(out: Path, lines: list[str], sessions: int) -> None:
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    memories = sum(line.startswith('{"memory"') for line in lines)
    events = len(lines) - memories
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
    print(f"{sessions} sessions: {memories} memories, {events} events; sha256 {digest}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--locomo", default="", help="LoCoMo JSON: its sessions too")
    parser.add_argument("--conversations", type=int, default=1)
    args = parser.parse_args()
    sessions = bilingual_sessions(args.seed)
    if args.locomo:
        sessions += locomo_sessions(args.locomo, args.conversations)
    with tempfile.TemporaryDirectory(prefix="engram-fingerprint-") as tmp:
        write(args.out, asyncio.run(run(sessions, Path(tmp))), len(sessions))


if __name__ == "__main__":
    main()
