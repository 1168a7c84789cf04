"""Start-up on an object store: everything in the bucket, and a clear sentence for each way
the bucket can be out of reach (real S3 API: moto in server mode)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from app.errors import Unavailable
from tests.conftest import make_settings
from tests.helpers import all_memories, messages, store
from tests.procs import LOOPBACK, ServerProcess, free_port
from tests.s3.moto_server import AuthEnforcingMoto, MotoS3


async def test_tables_and_leases_live_in_the_bucket_not_on_the_local_disk(
        open_client: Any, moto_s3: MotoS3, bucket: str, data_dir: Path) -> None:
    async with open_client() as client:
        result = await store(client, messages(0, 8))
        assert result["new"] == 8
        assert {i for m in await all_memories(client) for i in m["msg_ids"]} == \
            {f"m{i}" for i in range(8)}
    keys = moto_s3.keys(bucket, "engram/")
    tables = {k.split("/")[1] for k in keys if k.endswith(".manifest")}
    assert {"messages.lance", "memories.lance", "schema_migrations.lance"} <= tables
    assert "engram/_engram/leases/alice.lease" in keys  # the namespace's write lease
    assert not any("_engram/probe" in k for k in keys)  # the start-up probe cleaned up
    # Nothing of the data on the local disk: no tables, no lock files.
    assert not (data_dir / "lancedb").exists()
    assert not (data_dir / "locks").exists()


async def test_restart_on_the_bucket_keeps_everything(open_client: Any) -> None:
    async with open_client() as client:
        await store(client, messages(0, 6))
        before = await all_memories(client)
    async with open_client() as client:  # migrations already applied: nothing redone
        assert await all_memories(client) == before
        again = await store(client, messages(0, 6))
        assert (again["new"], again["skipped"]) == (0, 6)


async def _start_fails(open_client: Any, **settings: Any) -> str:
    with pytest.raises(Unavailable) as failure:
        async with open_client(**settings):
            pass
    return str(failure.value)


async def test_missing_bucket_is_named(open_client: Any, moto_s3: MotoS3) -> None:
    message = await _start_fails(open_client, lancedb_uri="s3://no-such-bucket-here/engram")
    assert "bucket 'no-such-bucket-here' does not exist" in message
    assert moto_s3.endpoint in message


async def test_unreachable_endpoint_is_named(open_client: Any, moto_s3: MotoS3) -> None:
    dead = f"http://{LOOPBACK}:{free_port()}"  # nothing listens there
    message = await _start_fails(
        open_client, storage_options=moto_s3.storage_options(aws_endpoint=dead))
    assert message.startswith("cannot reach the object store"), message
    assert dead in message and "aws_endpoint" in message


async def test_plain_http_endpoint_without_allow_http_is_named(open_client: Any,
                                                               moto_s3: MotoS3) -> None:
    options = moto_s3.storage_options()
    del options["allow_http"]
    message = await _start_fails(open_client, storage_options=options)
    assert "plain HTTP" in message and '"allow_http": "true"' in message


async def test_refused_credentials_are_named(open_client: Any, tmp_path: Path,
                                             moto_s3: MotoS3) -> None:
    with AuthEnforcingMoto(tmp_path / "moto-auth.log") as strict:
        options = moto_s3.storage_options(aws_endpoint=strict.endpoint)
        message = await _start_fails(open_client, lancedb_uri="s3://any-bucket/engram",
                                     storage_options=options)
    assert "refused the credentials (InvalidAccessKeyId)" in message, message
    assert "AWS_ACCESS_KEY_ID" in message


@pytest.mark.slow
def test_server_process_refused_credentials_exits_with_the_reason(tmp_path: Path,
                                                                  moto_s3: MotoS3) -> None:
    """What an operator sees: the process exits, and its log says why in one sentence."""
    with AuthEnforcingMoto(tmp_path / "moto-auth.log") as strict:
        env = moto_s3.env("any-bucket")
        env["ENGRAM_STORAGE_OPTIONS"] = env["ENGRAM_STORAGE_OPTIONS"].replace(
            moto_s3.endpoint, strict.endpoint)
        server = ServerProcess(tmp_path / "data", name="refused", env=env)
        server.start(wait=False)
        try:
            server.proc.wait(timeout=300)  # type: ignore[union-attr]
        finally:
            server.stop()
    assert server.returncode not in (None, 0)
    log = server.log_tail(80)
    assert "the object store refused the credentials (InvalidAccessKeyId)" in log, log


def test_lease_backend_needs_an_object_store(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="ENGRAM_LOCK_BACKEND=lease needs an s3://"):
        make_settings(tmp_path, lock_backend="lease")
    assert not make_settings(tmp_path).uses_leases
    assert make_settings(tmp_path, lancedb_uri="s3://bucket/engram").uses_leases
    assert not make_settings(tmp_path, lancedb_uri="s3://bucket/engram",
                             lock_backend="file").uses_leases
