"""An export holding two chunks that start at one message imports whole, into a fresh
namespace and into its own: a rebuilt memory keeps its id when its first message is deleted
(issue 13, item 3), so the import cannot derive ids from (session, first message, part)
alone and must neither refuse the file nor duplicate or overwrite a chunk."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import AppClient, all_memories, store
from tests.transfer.test_export_import import export, import_

SESSION = "s1"
_TEXT = {"en": "We compared the {n} offers for the new office lease line by line. ",
         "zh": "我们把第{n}份新办公室租约的报价逐条比较了一遍，每一项都核对过。"}


def turn(msg_id: str, n: int, chars: int, *, language: str) -> dict[str, Any]:
    text = (_TEXT[language].format(n=n) * 40)[:chars]
    return {"msg_id": msg_id, "role": "user" if n % 2 == 0 else "assistant", "content": text}


def shape(memories: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    return sorted(tuple(m["msg_ids"]) for m in memories)


@pytest.mark.parametrize("language", ["en", "zh"])
async def test_two_chunks_starting_at_one_message_survive_export_and_import(
        client: AppClient, language: str) -> None:
    # [a, b] fills a chunk; deleting a leaves [b] under a's id, too full to grow, so the next
    # message starts a new chunk on the overlap message: [b] and [b, c] both start at b.
    await store(client, [turn("a", 0, 100, language=language),
                         turn("b", 1, 750, language=language)], session_id=SESSION)
    response = await client.delete(f"/v1/namespaces/alice/sessions/{SESSION}/messages/a")
    assert response.status_code == 200, response.text
    await store(client, [turn("c", 2, 80, language=language)], session_id=SESSION)
    source = await all_memories(client)
    assert shape(source) == [("b",), ("b", "c")]

    body = await export(client)
    copied = await import_(client, body, namespace="alice-copy")
    assert copied.status_code == 200, copied.text
    copy = await all_memories(client, "alice-copy")
    assert shape(copy) == shape(source)
    assert len({m["id"] for m in copy}) == 2
    assert {m["text"] for m in copy} == {m["text"] for m in source}

    again = await import_(client, body, namespace="alice")  # into itself: nothing changes
    assert again.status_code == 200, again.text
    after = await all_memories(client)
    assert sorted((m["id"], tuple(m["msg_ids"]), m["text"]) for m in after) == sorted(
        (m["id"], tuple(m["msg_ids"]), m["text"]) for m in source)
