"""Deleting memories that a summary covers leaves no dangling link: the summary drops them
(or goes, when it covered nothing else), so the namespace's export still imports. Found by the
stateful test: compress, delete messages until a summarised memory is dropped by its rebuild,
export, import -> 400 "summary_of ... is not a chunk memory of the file"."""

from __future__ import annotations

from tests.compression.helpers import everything, run, set_policy
from tests.helpers import AppClient, store
from tests.integrity.test_compression_archive import chatter
from tests.transfer.test_export_import import export, import_

NAMESPACE, SESSION = "alice", "s1"


async def test_a_summarised_memory_dropped_by_a_rebuild_leaves_no_dangling_link(
        open_client: AppClient) -> None:
    async with open_client(compression_enabled=False) as client:  # type: ignore[operator]
        await set_policy(client, NAMESPACE)
        await store(client, chatter(30), namespace=NAMESPACE, session_id=SESSION)
        await run(client, NAMESPACE, force=True)
        memories = await everything(client, NAMESPACE)
        covered = {s for m in memories.values() for s in m.get("summary_of") or []}
        first = min((memories[i] for i in covered), key=lambda m: int(m["msg_ids"][0][1:]))
        # Its messages but the last, which the next chunk shares: the rebuilt chunk holds
        # only a message another memory holds, and is dropped.
        for msg_id in first["msg_ids"][:-1]:
            response = await client.delete(
                f"/v1/namespaces/{NAMESPACE}/sessions/{SESSION}/messages/{msg_id}")
            assert response.status_code == 200, response.text
        left = await everything(client, NAMESPACE)
        assert first["id"] not in left
        for summary_id, memory in left.items():
            sources = memory.get("summary_of") or []
            assert all(s in left for s in sources), (summary_id, sources)

        copied = await import_(client, await export(client, NAMESPACE), namespace="copy")
        assert copied.status_code == 200, copied.text
        again = await import_(client, await export(client, NAMESPACE), namespace=NAMESPACE)
        assert again.status_code == 200, again.text
        assert (await everything(client, NAMESPACE)).keys() == left.keys()
