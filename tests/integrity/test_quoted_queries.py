"""Any user text is a valid recall query once the full-text index is in use: quotes,
boolean words, wildcards, field syntax, brackets, backslashes and Chinese quotes never reach
LanceDB as query syntax (issue 13, item 7). The index has no positions, so a phrase query
would fail; the words still find what they name."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import AppClient, store

NOTES = [
    "We said the first release is called one and the second release is called two.",
    "The boiler service is booked for the 14th; the plumber brings the spare valve.",
    "我们说过第一个版本叫一号，第二个版本叫二号。",
    "锅炉检修约在十四号，水管工会带备用阀门。",
]
QUERIES = [
    'did we say "one" and "two"',
    'did we say "one',
    '"',
    '""',
    "boiler AND valve",
    "boiler OR NOT valve",
    "NOT",
    "AND OR NOT",
    "boil*",
    "*",
    "text:boiler",
    ":",
    "(boiler",
    "boiler)",
    "()",
    "[boiler] {valve}",
    "boiler\\",
    "\\",
    "\\\"one\\\"",
    "boiler^2 valve~1",
    "+boiler -valve",
    "'one' 'two'",
    "我们说过「一号」和「二号」吗",
    "“一号”和“二号”",
    "『锅炉』",
    "锅炉 AND 阀门",
    "!@#$%^&*()_+=-`~<>?/|",
]


@asynccontextmanager
async def indexed_client(open_client: Any) -> AsyncIterator[AppClient]:
    async with open_client() as client:
        for i, note in enumerate(NOTES):
            await store(client, [{"msg_id": "1", "role": "user", "content": note}],
                        session_id=f"note-{i}")
        # Builds the full-text index over these rows (as the recall index tests do).
        await client.app.state.engram.maintenance.run_once(force=True)  # type: ignore[attr-defined]
        yield client


async def recall(client: AppClient, query: str) -> dict[str, Any]:
    response = await client.post("/v1/recall", json={"namespace": "alice", "query": query})
    assert response.status_code < 500, (query, response.text)
    body: dict[str, Any] = response.json()
    return body


class TestQuerySyntaxIsText:
    async def test_every_query_answers(self, open_client: Any) -> None:
        async with indexed_client(open_client) as client:
            for query in QUERIES:
                body = await recall(client, query)
                assert "memories" in body, (query, body)

    @pytest.mark.parametrize(("query", "expected"), [
        ('did we say "one" and "two"', NOTES[0]),
        ("boiler AND valve", NOTES[1]),
        ("我们说过「一号」和「二号」吗", NOTES[2]),
        ("“锅炉”检修", NOTES[3]),
    ])
    async def test_quoted_words_still_find_what_they_name(
            self, open_client: Any, query: str, expected: str) -> None:
        async with indexed_client(open_client) as client:
            body = await recall(client, query)
            assert body["memories"], query
            assert expected in body["memories"][0]["text"]


async def test_arbitrary_text_never_answers_5xx(open_client: Any) -> None:
    """Hypothesis drives the endpoint from a worker thread; the requests run on this test's
    event loop, against one indexed store (storing per example would take minutes)."""
    loop = asyncio.get_running_loop()
    async with indexed_client(open_client) as client:

        @settings(max_examples=100, deadline=None, database=None)
        @given(query=st.text(min_size=1, max_size=80) | st.lists(
            st.sampled_from(['"', "“", "”", "「", "」", "AND", "OR", "NOT", "*", ":", "(", ")",
                             "\\", "one", "锅炉", " "]), min_size=1).map("".join))
        def check(query: str) -> None:
            future = asyncio.run_coroutine_threadsafe(
                client.post("/v1/recall", json={"namespace": "alice", "query": query}), loop)
            response = future.result(timeout=120)
            assert response.status_code < 500, (query, response.text)

        await asyncio.to_thread(check)
