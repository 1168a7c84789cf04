"""Vectors of pending messages stored with `wait=true`, held until their build lands.

A `wait=true` store embeds each new or changed turn on its own (as its build will cut it:
the recall firewall's rule 1) before it answers, and puts the vectors here; the pending
search (app/recall/pending.py) then finds those messages by their own vector as well as by
their words, with no model call in the recall. The grown chunk's vector is the build's.

Keyed by (namespace, session, msg_id) and checked against the message's content hash: a
vector is only ever used for the content it was computed from, so an edited message, a
deleted and re-stored one, or another process's write can never be matched by a stale
vector. Entries go when their message is marked built (`forget_built`, the build landing),
with their session or namespace when it is deleted, and oldest first past `max_rows`.
What is left behind (a message built by another process, or marked built while its
vector was being computed) is never used, since the pending search looks vectors up only
for messages still pending, and it ages out.

Memory: `max_rows` vectors of the model's dimension (384 floats: 1.5 KB each).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

import numpy as np

_Key = tuple[str, str, str]  # (namespace, session id, msg_id)


class PendingVectors:
    """A bounded, process-wide map from pending messages to their own vectors.

    Args:
        max_rows: vectors held in all; 0 holds none (`wait=true` is then as `false`).
    """

    def __init__(self, *, max_rows: int) -> None:
        self.max_rows = max_rows
        self._held: OrderedDict[_Key, tuple[str, np.ndarray]] = OrderedDict()

    @property
    def held_rows(self) -> int:
        return len(self._held)

    def put(self, namespace: str, session_id: str,
            vectors: Iterable[tuple[str, str, np.ndarray]]) -> None:
        """Hold `(msg_id, content hash, vector)` of a session's messages, newest last."""
        if self.max_rows <= 0:
            return
        for msg_id, digest, vector in vectors:
            key = (namespace, session_id, msg_id)
            self._held.pop(key, None)
            self._held[key] = (digest, vector.astype(np.float32, copy=False))
        while len(self._held) > self.max_rows:
            self._held.popitem(last=False)  # the oldest first

    def get(self, namespace: str, session_id: str, msg_id: str, digest: str
            ) -> np.ndarray | None:
        """The vector held for this message with this content, if any."""
        held = self._held.get((namespace, session_id, msg_id))
        if held is None or held[0] != digest:
            return None
        return held[1]

    def forget_built(self, done: Iterable[tuple[str, str, str, str]]) -> None:
        """Drop the vectors of messages marked built: (namespace, session, msg_id, content
        hash), each only if it is the content held (an edit made during the build keeps the
        new content's vector)."""
        for namespace, session_id, msg_id, digest in done:
            key = (namespace, session_id, msg_id)
            held = self._held.get(key)
            if held is not None and held[0] == digest:
                del self._held[key]

    def forget_session(self, namespace: str, session_id: str) -> None:
        for key in [k for k in self._held if k[0] == namespace and k[1] == session_id]:
            del self._held[key]

    def forget_namespace(self, namespace: str) -> None:
        for key in [k for k in self._held if k[0] == namespace]:
            del self._held[key]

    def clear(self) -> None:
        self._held.clear()
