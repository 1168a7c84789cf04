"""The API half of scripts/container-smoke: talk to a running Engram container over HTTP.

    smoke_api.py seed   BASE_URL KEY STATE_FILE   store Chinese and English sessions, read them
                                                 back (list, and recall when the route exists),
                                                 write what was seen to STATE_FILE
    smoke_api.py verify BASE_URL KEY STATE_FILE   the same memories and recall answers are there,
                                                 and re-sending the sessions stores nothing new

Standard library only: it runs with any python3 on the host. Exits non-zero on any mismatch.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from typing import Any

NAMESPACE = "container-smoke"

SESSIONS: list[dict[str, Any]] = [
    {
        "session_id": "zh-2026-11-28",
        "source": "telegram",
        "messages": [
            {"msg_id": "1", "role": "user",
             "content": "下周二上午我要去协和医院体检，记得提醒我前一天晚上十点以后空腹。"},
            {"msg_id": "2", "role": "assistant",
             "content": "好的，我记下了：下周二上午在协和医院体检，前一晚十点后不要进食。"},
            {"msg_id": "3", "role": "user",
             "content": "另外我对花生过敏，以后帮我订餐的时候一定要避开花生。"},
        ],
    },
    {
        "session_id": "en-2026-11-29",
        "source": "api",
        "messages": [
            {"msg_id": "1", "role": "user",
             "content": "We decided to use LanceDB as the memory store because it is embedded "
                        "and needs no separate server."},
            {"msg_id": "2", "role": "assistant",
             "content": "Noted: the memory store is LanceDB, embedded, with no server to run."},
            {"msg_id": "3", "role": "user",
             "content": "明天的 standup 改到 10:30，remember to tell Bob about the new time."},
        ],
    },
]

# (query, a word the recalled memories must contain)
RECALLS = [
    ("我的体检安排是哪天？", "体检"),
    ("Which database did we pick for the memory store?", "LanceDB"),
]


class Api:
    def __init__(self, base: str, key: str) -> None:
        self.base = base.rstrip("/")
        self.key = key

    def call(self, method: str, path: str, body: Any = None, *, auth: bool = True,
             expect: int = 200) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("accept", "application/json")
        if data is not None:
            request.add_header("content-type", "application/json")
        if auth:
            request.add_header("authorization", f"Bearer {self.key}")
        try:
            with urllib.request.urlopen(request, timeout=180) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        if status != expect:
            raise SystemExit(f"{method} {path}: expected {expect}, got {status}: "
                             f"{raw[:500].decode(errors='replace')}")
        return json.loads(raw) if raw else None


def memories(api: Api) -> list[dict[str, Any]]:
    """Every active memory of the namespace, as (id, session, msg_ids, text), sorted by id."""
    page = api.call("GET", f"/v1/memories?namespace={NAMESPACE}&limit=500")
    if page["count"] != len(page["items"]):
        raise SystemExit(f"memory list: count {page['count']} but {len(page['items'])} items")
    return sorted(({"id": m["id"], "session_id": m["session_id"], "msg_ids": m["msg_ids"],
                    "text": m["text"]} for m in page["items"]), key=lambda m: m["id"])


def recall(api: Api) -> dict[str, list[str]] | None:
    """Recalled memory ids per query, or None when this build has no recall route."""
    paths = api.call("GET", "/openapi.json", auth=False)["paths"]
    if "post" not in paths.get("/v1/recall", {}):
        print("  recall: no POST /v1/recall in /openapi.json: skipped")
        return None
    found: dict[str, list[str]] = {}
    for query, word in RECALLS:
        answer = api.call("POST", "/v1/recall", {"namespace": NAMESPACE, "query": query})
        texts = [m["text"] for m in answer["memories"]]
        if not any(word in text for text in texts):
            raise SystemExit(f"recall {query!r}: no memory mentions {word!r}: {texts}")
        found[query] = [m["id"] for m in answer["memories"]]
        print(f"  recall {query!r}: {answer['count']} memories, {answer['tokens']} tokens, "
              f"first: {texts[0][:60]!r}")
    return found


def store_all(api: Api) -> list[dict[str, Any]]:
    results = []
    for session in SESSIONS:
        result = api.call("POST", "/v1/store", {"namespace": NAMESPACE, "wait": "built",
                                                 **session})
        print(f"  store {session['session_id']}: status={result['status']} new={result['new']} "
              f"skipped={result['skipped']} memories={len(result['memories_created'])}")
        results.append(result)
    return results


def seed(api: Api, state_file: str) -> None:
    api.call("GET", f"/v1/memories?namespace={NAMESPACE}", auth=False, expect=401)
    print("  no key: 401")
    for result, session in zip(store_all(api), SESSIONS, strict=True):
        if result["new"] != len(session["messages"]) or not result["memories_created"]:
            raise SystemExit(f"store {session['session_id']}: nothing new was stored: {result}")
    listed = memories(api)
    texts = " ".join(m["text"] for m in listed)
    for word in ("体检", "花生", "LanceDB", "standup"):
        if word not in texts:
            raise SystemExit(f"memory list: no memory mentions {word!r}")
    print(f"  list: {len(listed)} memories")
    state = {"memories": listed, "recall": recall(api)}
    with open(state_file, "w", encoding="utf-8") as out:
        json.dump(state, out, ensure_ascii=False, indent=1)


def verify(api: Api, state_file: str) -> None:
    with open(state_file, encoding="utf-8") as src:
        state = json.load(src)
    listed = memories(api)
    if listed != state["memories"]:
        raise SystemExit(f"memories changed:\nbefore {state['memories']}\nafter  {listed}")
    print(f"  list: the same {len(listed)} memories (ids, sessions, msg_ids, texts)")
    recalled = recall(api)
    if state["recall"] is not None and recalled is not None:
        for query, ids in state["recall"].items():
            if set(ids) != set(recalled[query]):
                raise SystemExit(f"recall {query!r}: {ids} before, {recalled[query]} after")
        print("  recall: the same memories for every query")
    for result in store_all(api):
        if result["new"] or result["updated"] or result["memories_created"]:
            raise SystemExit(f"re-sent session was stored again: {result}")
    if memories(api) != listed:
        raise SystemExit("re-sending the sessions changed the memories")
    print("  re-sent sessions: every message recognised, nothing stored twice")


def main() -> None:
    if len(sys.argv) != 5 or sys.argv[1] not in ("seed", "verify"):
        raise SystemExit(__doc__)
    command, base, key, state_file = sys.argv[1:]
    api = Api(base, key)
    (seed if command == "seed" else verify)(api, state_file)


if __name__ == "__main__":
    main()
