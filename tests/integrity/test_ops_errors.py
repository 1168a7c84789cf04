"""Issue 13, item 8: errors a client can rely on.

- a bug answers a JSON 500 with the request id, and the keep-alive connection stays usable
  (checked against a real uvicorn process: only a real server drops connections);
- a 405 names the allowed methods (`Allow`) and has the one error shape;
- request bodies take JSON types as they are: `"yes"` is not true, `0` is not false, `"5"`
  is not 5 — every bool and int field of every request body, found by walking OpenAPI.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from tests.helpers import store
from tests.procs import ServerProcess, free_port

Json = dict[str, Any]


# --- a 500 keeps the connection --------------------------------------------------------

def faulty_app() -> FastAPI:
    """The real app plus one route with a bug (`uvicorn --factory` target of the test)."""
    app = create_app()

    async def boom() -> None:
        raise RuntimeError("a bug in a handler")

    app.add_api_route("/test-only/boom", boom, methods=["GET"])
    return app


class FaultyServer(ServerProcess):
    """`ServerProcess` running `faulty_app` under uvicorn instead of `engram serve`."""

    def start(self, *, wait: bool = True) -> ServerProcess:
        self.port = self._fixed_port or free_port()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--factory",
             "tests.integrity.test_ops_errors:faulty_app", "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "warning"],
            cwd=str(self.data_dir.parent), env=self.environment(),
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        self.starts += 1
        if wait:
            self.wait_ready()
        return self


def _client_port(response: httpx.Response) -> int:
    stream = response.extensions["network_stream"]
    return int(stream.get_extra_info("client_addr")[1])


@pytest.mark.slow
def test_a_500_is_json_and_keeps_the_connection(tmp_path: Path) -> None:
    with FaultyServer(tmp_path / "data", name="faulty") as server, \
            httpx.Client(base_url=server.base_url, timeout=60) as client:
        first = client.get("/test-only/boom", headers={"X-Request-ID": "trace-500"})
        assert first.status_code == 500
        assert first.headers["content-type"] == "application/json"
        error = first.json()["error"]
        assert error["code"] == "internal_error"
        assert "logged" in error["message"]
        assert error["details"] == {"request_id": "trace-500"}
        assert first.headers["x-request-id"] == "trace-500"
        assert first.headers.get("connection") != "close"
        second = client.get("/healthz")
        assert second.status_code == 200
        assert _client_port(second) == _client_port(first), "the connection was dropped"
        # and the server counted the 500
        metrics = client.get("/metrics").text
        assert 'route="/test-only/boom",status="500"' in metrics
    assert "a bug in a handler" in server.log_path.read_text()  # the traceback was logged


# --- 405 --------------------------------------------------------------------------------

class TestMethodNotAllowed:
    @pytest.mark.parametrize(("method", "path", "allowed"), [
        ("GET", "/v1/store", {"POST"}),
        ("PUT", "/v1/recall", {"POST"}),
        ("POST", "/healthz", {"GET"}),
        ("DELETE", "/v1/compression/run", {"POST"}),
    ])
    async def test_405_carries_allow_and_the_error_shape(
            self, client: Any, method: str, path: str, allowed: set[str]) -> None:
        response = await client.request(method, path)
        assert response.status_code == 405
        assert {m.strip() for m in response.headers["allow"].split(",")} == allowed
        assert response.json()["error"]["code"] == "http_405"


# --- strict types in request bodies -----------------------------------------------------

_VALID_STORE: Json = {"namespace": "alice", "session_id": "s1",
                      "messages": [{"msg_id": "m1", "role": "user",
                                    "content": "I moved to Berlin last spring."}]}


class TestStrictTypes:
    @pytest.mark.parametrize(("path", "body", "field"), [
        ("/v1/store", {**_VALID_STORE, "wait": "yes"}, "wait"),
        ("/v1/store", {**_VALID_STORE, "wait": 1}, "wait"),
        ("/v1/store", {**_VALID_STORE, "incremental": 1}, "incremental"),
        ("/v1/store", {**_VALID_STORE, "incremental": "false"}, "incremental"),
        ("/v1/compression/run", {"namespace": "alice", "force": 0}, "force"),
        ("/v1/compression/run", {"namespace": "alice", "dry_run": "true"}, "dry_run"),
        ("/v1/recall", {"namespace": "alice", "query": "where do I live", "top_k": "5"},
         "top_k"),
        ("/v1/recall", {"namespace": "alice", "query": "我住在哪里", "max_tokens": "100"},
         "max_tokens"),
        ("/v1/recall", {"namespace": "alice", "query": "where", "other_branches": "no"},
         "other_branches"),
    ])
    async def test_lax_values_are_422_naming_the_field(
            self, client: Any, path: str, body: Json, field: str) -> None:
        response = await client.post(path, json=body)
        assert response.status_code == 422, response.text
        fields = [p["field"] for p in response.json()["error"]["details"]]
        assert fields == [f"body.{field}"]
        assert field in response.json()["error"]["message"]

    async def test_json_types_and_iso_datetimes_still_pass(self, client: Any) -> None:
        zh = {"msg_id": "z1", "role": "user", "content": "我去年春天搬到了柏林。",
              "timestamp": "2024-05-01T10:00:00+08:00"}
        en = {"msg_id": "e1", "role": "user", "content": "I moved to Berlin last spring.",
              "timestamp": "2024-05-01T10:00:00Z"}
        await store(client, [zh, en], wait="built", incremental=True)
        response = await client.post("/v1/recall", json={
            "namespace": "alice", "query": "where did I move", "top_k": 5, "max_tokens": 200,
            "other_branches": False, "time_from": "2024-01-01T00:00:00Z", "min_score": 0})
        assert response.status_code == 200, response.text
        response = await client.post("/v1/compression/run",
                                     json={"namespace": "alice", "force": False,
                                           "dry_run": True})
        assert response.status_code == 200, response.text

    async def test_every_bool_and_int_of_every_request_body_is_strict(self, client: Any
                                                                     ) -> None:
        """Walks OpenAPI: each JSON request body's boolean and integer fields, lax values."""
        spec = (await client.get("/openapi.json")).json()
        components = spec["components"]["schemas"]
        checked: list[str] = []
        for path, operations in spec["paths"].items():
            for method, operation in operations.items():
                content = operation.get("requestBody", {}).get("content", {})
                if "application/json" not in content:
                    continue
                ref = content["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
                url = path.replace("{namespace}", "alice").replace("{memory_id}", "mem_x")
                for name, prop in components[ref].get("properties", {}).items():
                    kind = _json_type(prop, components)
                    lax_values = {"boolean": ["yes", 1, "true"], "integer": ["5", "1", 2.5]
                                  }.get(kind or "", [])
                    for lax in lax_values:
                        response = await client.request(method, url, json={name: lax})
                        assert response.status_code == 422, (method, path, name, lax)
                        fields = [p["field"] for p in response.json()["error"]["details"]]
                        assert f"body.{name}" in fields, (method, path, name, lax, fields)
                    if lax_values:
                        checked.append(f"{ref}.{name}")
        # the walk found the fields it is meant to cover
        for expected in ("StoreRequest.wait", "StoreRequest.incremental", "RunRequest.force",
                         "RunRequest.dry_run", "RecallRequest.top_k", "RecallRequest.max_tokens",
                         "RecallRequest.other_branches", "MemoryUpdate.importance",
                         "MemoryUpdate.protected", "DumpRequest.limit", "DumpRequest.offset"):
            assert expected in checked


def _json_type(prop: Json, components: Json) -> str | None:
    """The JSON type of a property, through `anyOf [T, null]` and `anyOf [T, literal words]`.

    Literal words (`wait: true | "built" | "findable"`, a `const` or an `enum` in the anyOf):
    no lax value below equals one, so the field is walked as T. Enums alone are not walked.

    (FastAPI validates a decoded body in pydantic's Python mode, where a strict IntEnum
    refuses plain JSON ints: enum fields keep lax validation.)
    """
    if "$ref" in prop or "enum" in prop:
        return None
    if "anyOf" in prop:
        kinds = {_json_type(p, components) for p in prop["anyOf"]
                 if "const" not in p and "enum" not in p} - {"null"}
        return kinds.pop() if len(kinds) == 1 else None
    kind = prop.get("type")
    return kind if isinstance(kind, str) else None
