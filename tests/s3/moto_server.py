"""A real S3 API on loopback for tests and benchmarks: moto in server mode.

`MotoS3` is moto's `ThreadedMotoServer` (the same WSGI app, request handler and threaded
werkzeug server) with one change: requests that write (PUT, POST, DELETE) run one at a time.
moto checks a conditional write (`If-None-Match: *`, `If-Match`) and then stores the object
in two steps; two threads can both pass the check. Real S3 decides conditional writes
atomically, and both LanceDB's commits and Engram's leases depend on that, so the test
server must too. Reads still run in parallel.

Credentials are not checked (any key is accepted), except on a server started with
`enforce_auth=True`: then every request with a key moto does not know is refused with 403
`InvalidAccessKeyId`, as S3 refuses a wrong key. moto reads that switch from the
environment once per process, so that server runs in a child process (`moto_server`).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx

from tests.procs import LOOPBACK, free_port

REGION = "us-east-1"
ACCESS_KEY = "engram-test-key"
SECRET_KEY = "engram-test-secret"

_WRITES = frozenset({"PUT", "POST", "DELETE"})


class _OneWriteAtATime:
    """WSGI middleware: write requests run alone, so conditional writes are atomic."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]
                 ) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") not in _WRITES:
            return self._app(environ, start_response)
        with self._lock:
            return list(self._app(environ, start_response))


class MotoS3:
    """An S3-compatible server on a free loopback port (path-style, plain HTTP)."""

    def __init__(self) -> None:
        self.port = 0
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> MotoS3:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request
        app = _OneWriteAtATime(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(LOOPBACK, 0, app, threaded=True,
                                   request_handler=MotoRequestHandler)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="moto-s3")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    # --- buckets and settings -----------------------------------------------------------

    def create_bucket(self, name: str | None = None) -> str:
        """A new empty bucket (a fresh name per test keeps tests apart)."""
        bucket = name or f"engram-{uuid.uuid4().hex[:12]}"
        response = httpx.put(f"{self.endpoint}/{bucket}", timeout=30)
        response.raise_for_status()
        return bucket

    def storage_options(self, **overrides: str) -> dict[str, str]:
        """ENGRAM_STORAGE_OPTIONS for this server: endpoint override, HTTP, path-style."""
        return {"aws_endpoint": self.endpoint, "allow_http": "true",
                "aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": SECRET_KEY,
                "aws_region": REGION, "aws_virtual_hosted_style_request": "false",
                **overrides}

    def settings(self, bucket: str, prefix: str = "engram") -> dict[str, Any]:
        """Settings overrides (make_settings / open_client) for tables in `bucket`."""
        return {"lancedb_uri": f"s3://{bucket}/{prefix}",
                "storage_options": self.storage_options()}

    def env(self, bucket: str, prefix: str = "engram") -> dict[str, str]:
        """The same as ENGRAM_* variables, for a server process."""
        return {"ENGRAM_LANCEDB_URI": f"s3://{bucket}/{prefix}",
                "ENGRAM_STORAGE_OPTIONS": json.dumps(self.storage_options())}

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key under `prefix` in `bucket`."""
        import obstore
        from obstore.store import S3Store

        store = S3Store(bucket, endpoint=self.endpoint, region=REGION,
                        access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY,
                        client_options={"allow_http": True})
        return [meta["path"] for batch in obstore.list(store, prefix=prefix or None)
                for meta in batch]


class AuthEnforcingMoto:
    """`moto_server` in a child process with credential checks on (see the module doc)."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self._log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def __enter__(self) -> AuthEnforcingMoto:
        env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"}
        with self._log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(self.port)],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.endpoint}/moto-api/", timeout=2)
                return self
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError(f"moto_server did not start: {self._log_path.read_text()[-2000:]}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
