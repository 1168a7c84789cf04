"""A store -> recall -> job -> evolution round trip through the client generated from
/openapi.json.

Usage: PYTHONPATH=<dir holding engram_client> python scripts/client_roundtrip.py BASE_URL KEY
Run by scripts/api-checks; exits non-zero (an assertion) when the typed client and the
served API disagree.
"""

from __future__ import annotations

import sys
import time

from engram_client import AuthenticatedClient
from engram_client.api.memories import memory_evolution
from engram_client.api.recall import recall
from engram_client.api.store import get_job, store
from engram_client.models import JobState, MessageIn, RecallRequest, Role, StoreRequest


def main(base_url: str, key: str) -> None:
    client = AuthenticatedClient(base_url=base_url, token=key, raise_on_unexpected_status=True)
    stored = store.sync(client=client, body=StoreRequest(
        namespace="client-check", session_id="s1",
        messages=[
            MessageIn(role=Role.USER, content="下周二上午我要去医院体检，要空腹。", msg_id="1"),
            MessageIn(role=Role.ASSISTANT, content="好的，记下了：下周二上午体检。", msg_id="2"),
            MessageIn(role=Role.USER, content="We decided to use LanceDB for the memory store.",
                      msg_id="3"),
        ],
    ))
    assert stored is not None and stored.new == 3 and stored.job_id, stored
    question = RecallRequest(namespace="client-check", query="我的体检安排是哪天")
    found = recall.sync(client=client, body=question)  # at once: wait=true, findable
    assert found is not None and found.memories, found
    assert "体检" in found.memories[0].text, found.memories[0].text
    for _ in range(1200):  # the build follows the answer
        job = get_job.sync(job_id=str(stored.job_id), client=client)
        assert job is not None, stored.job_id
        if job.state != JobState.QUEUED:
            break
        time.sleep(0.1)
    assert job.state == JobState.DONE, job
    found = recall.sync(client=client, body=question)
    assert found is not None and found.memories, found
    first = found.memories[0]
    assert "体检" in first.text and not first.provisional, first
    history = memory_evolution.sync(memory_id=first.id, client=client)
    assert history is not None and history.events[0].event == "created", history
    print(f"client round trip ok: stored {stored.new}, recalled {found.count} "
          f"({found.tokens} tokens), {len(history.events)} events on {first.id}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
