"""A real server with real data for the memory inspector's browser tests and screenshots.

`inspector_server(root)` starts `engram serve` (tests/procs.py) with an admin key and a key
scoped to `alice`, stores an English and a Chinese conversation for alice, a few notes for
bob, and small talk for `team` that a compression pass (with a shadow policy) compresses.
Short chunks (two turns) make each exchange its own memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.compression.fixtures import CHATTER_EN, CHATTER_ZH, FACTS, messages
from tests.procs import ServerProcess

ADMIN_KEY = "ui-admin-key-0123456789abcdef"
ALICE_KEY = "ui-alice-key-0123456789abcdef"

ALICE_EN = [
    ("user", "We decided to use PostgreSQL for the billing service instead of MongoDB."),
    ("assistant", "Noted: the billing service moves to PostgreSQL; MongoDB stays for logs."),
    ("user", "My dentist appointment is on Thursday at 3pm at the clinic on Main Street."),
    ("assistant", "Got it, dentist on Thursday at 3pm, Main Street. I'll remind you."),
    ("user", "Our cat Miso is allergic to chicken, so she only eats fish-based food."),
    ("assistant", "I'll remember: Miso eats fish-based food only, no chicken."),
    ("user", "I'm training for a half marathon in October, running four times a week."),
    ("assistant", "Four runs a week until October: a long run on Sundays helps."),
]
ALICE_ZH = [
    ("user", "下周二上午体检，医生说前一天晚上十点以后不要吃东西。"),
    ("assistant", "好的，已经记下：下周二上午体检，前一晚十点后禁食。"),
    ("user", "我女儿下个月过生日，想送她一辆粉色的自行车。"),
    ("assistant", "明白，下个月女儿生日，礼物是一辆粉色自行车。"),
    ("user", "最近在学吉他，每天练习半个小时指法。"),
    ("assistant", "每天半小时指法练习，坚持下去进步会很快。"),
]
# Markup in a memory must show as text, never run (tests/ui: test_memory_text_is_not_html).
MARKUP = [("user", "Remember the snippet <b id=\"injected\">bold</b> <img src=x "
           "onerror=\"window.injected=1\"> from the docs.")]
BOB = [("user", "Bob's notes: the staging database password rotates every Monday.")]

# Score = task relevance only (as in tests/compression): chatter is low, facts high; the
# shadow policy, a stricter threshold, reports what it would do differently.
TASK_ONLY: dict[str, Any] = {"weights": {"novelty": 0, "entropy": 0, "task": 1, "emotion": 0},
                             "base_threshold": 0.45, "emergency_hold": 0.6}


@dataclass
class Inspector:
    server: ServerProcess

    @property
    def url(self) -> str:
        return f"{self.server.base_url}/ui/"

    def client(self, key: str = ADMIN_KEY) -> httpx.Client:
        return httpx.Client(base_url=self.server.base_url, timeout=120,
                            headers={"Authorization": f"Bearer {key}"})

    def memories(self, namespace: str, **params: Any) -> list[dict[str, Any]]:
        with self.client() as c:
            response = c.get("/v1/memories", params={"namespace": namespace, "limit": 500,
                                                     **params})
            response.raise_for_status()
            items: list[dict[str, Any]] = response.json()["items"]
            return items

    def memory_holding(self, namespace: str, text: str) -> dict[str, Any]:
        found = [m for m in self.memories(namespace, state="any") if text in m["text"]]
        assert found, f"no memory holds {text!r}"
        return found[0]


def _turns(pairs: list[tuple[str, str]], prefix: str, day: int) -> list[dict[str, Any]]:
    return [{"msg_id": f"{prefix}{i}", "role": role, "content": content,
             "timestamp": f"2026-11-{day:02d}T{9 + i // 2:02d}:{(i % 2) * 5:02d}:00Z"}
            for i, (role, content) in enumerate(pairs)]


def seed(client: httpx.Client) -> None:
    def store(namespace: str, session_id: str, msgs: list[dict[str, Any]]) -> None:
        response = client.post("/v1/store", json={"namespace": namespace,
                                                  "session_id": session_id, "messages": msgs,
                                                  "wait": "built"})
        response.raise_for_status()

    store("alice", "en-1", _turns(ALICE_EN, "e", 20))
    store("alice", "zh-1", _turns(ALICE_ZH, "z", 24))
    store("alice", "markup", _turns(MARKUP, "x", 26))
    store("bob", "b-1", _turns(BOB, "b", 25))
    for session_id, contents in (("facts", FACTS), ("en", CHATTER_EN), ("zh", CHATTER_ZH)):
        store("team", session_id, messages(contents, prefix=session_id))
    policy = client.put("/v1/compression/policies/team", json={
        "preset": "default", "overrides": TASK_ONLY,
        "shadow": {"preset": "default", "overrides": {**TASK_ONLY, "base_threshold": 0.1}}})
    assert policy.status_code == 200, policy.text
    passed = client.post("/v1/compression/run", json={"namespace": "team"})
    passed.raise_for_status()
    (result,) = passed.json()["namespaces"]
    assert result["ok"] and result["compressed"], result
    # A pass over alice that compresses nothing (nothing scores below 0.01) gives her
    # memories their four dimension scores.
    calm = client.put("/v1/compression/policies/alice", json={
        "preset": "default", "overrides": {"base_threshold": 0.01}})
    assert calm.status_code == 200, calm.text
    passed = client.post("/v1/compression/run", json={"namespace": "alice"})
    passed.raise_for_status()
    (result,) = passed.json()["namespaces"]
    assert result["ok"] and not result["compressed"], result


@contextmanager
def inspector_server(root: Path) -> Iterator[Inspector]:
    env = {
        "ENGRAM_ADMIN_KEYS": f'["{ADMIN_KEY}"]',
        "ENGRAM_NAMESPACE_KEYS": f'{{"{ALICE_KEY}": ["alice"]}}',
        "ENGRAM_CHUNK_MAX_TURNS": "2",
        "ENGRAM_CHUNK_OVERLAP_RATIO": "0",
        "ENGRAM_COMPRESSION_CAPACITY_CHARS": "1000",
        "ENGRAM_COMPRESSION_INTERVAL_SECONDS": "86400",  # only the seeded pass runs
    }
    with ServerProcess(root / "data", env=env, name="inspector") as server:
        inspector = Inspector(server)
        with inspector.client() as client:
            seed(client)
        yield inspector
