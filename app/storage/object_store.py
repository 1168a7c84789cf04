"""The object store under an `s3://` LanceDB URI: one client for what LanceDB does not do.

LanceDB reaches the bucket itself (through the Rust `object_store` crate). Engram needs the
same bucket for two more things, done here with `obstore` (Python bindings of that same
crate, so `ENGRAM_STORAGE_OPTIONS` means the same to both):

- the start-up check: is the bucket reachable, are the credentials accepted, does the store
  honour conditional writes (`If-None-Match`, which LanceDB's commits rely on too)? Each
  failure stops start-up with a sentence naming what is wrong, instead of a stack trace from
  the first table operation minutes of retries later;
- the namespace leases (leases.py): the write locks of servers that share no file system.

Only S3 and S3-compatible stores are supported for several servers; a local directory
needs none of this.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlparse

import structlog

from app.errors import Unavailable

log = structlog.get_logger(__name__)

OBJECT_STORE_SCHEMES = frozenset({"s3", "s3a"})

# HTTP client options of object_store (ClientConfigKey): the rest of a storage option is an
# S3 option, spelled with or without the `aws_` prefix, or one LanceDB alone reads (retry
# counts, for instance), which the lease client ignores.
_CLIENT_KEYS = frozenset({
    "allow_http", "allow_invalid_certificates", "connect_timeout", "timeout",
    "pool_idle_timeout", "pool_max_idle_per_host", "proxy_url", "proxy_ca_certificate",
    "proxy_excludes", "randomize_addresses", "read_timeout",
})
_S3_KEYS = frozenset({
    "access_key_id", "secret_access_key", "session_token", "region", "default_region",
    "endpoint", "virtual_hosted_style_request", "skip_signature", "unsigned_payload",
    "checksum_algorithm", "conditional_put", "request_payer", "role_arn", "role_session_name",
    "web_identity_token_file", "sts_endpoint", "server_side_encryption", "sse_kms_key_id",
    "sse_bucket_key_enabled", "metadata_endpoint", "container_credentials_relative_uri",
    "container_credentials_full_uri", "container_authorization_token_file",
})
_ALIASES = {"endpoint_url": "endpoint", "key_id": "access_key_id",
            "secret_key": "secret_access_key", "token": "session_token"}
_CHECK_RETRIES = {"max_retries": 2, "retry_timeout": timedelta(seconds=10),
                  "backoff": {"init_backoff": timedelta(milliseconds=100),
                              "max_backoff": timedelta(seconds=1), "base": 2.0}}
PROBE_PREFIX = "_engram/probe"


def is_object_store_uri(uri: str) -> bool:
    return urlparse(uri).scheme.lower() in OBJECT_STORE_SCHEMES


def _option_key(key: str) -> tuple[str, str] | None:
    """(kind, obstore key) of a LanceDB storage option or AWS_* variable; None: not ours."""
    name = key.strip().lower()
    if name in _CLIENT_KEYS:
        return "client", name
    if name.startswith("aws_"):
        name = name[4:]
        if name in _CLIENT_KEYS:  # AWS_ALLOW_HTTP
            return "client", name
    name = _ALIASES.get(name, name)
    if name in _S3_KEYS:
        return "s3", name
    return None


def split_options(storage_options: dict[str, str], environ: dict[str, str] | None = None
                  ) -> tuple[dict[str, str], dict[str, str]]:
    """The S3 options and the HTTP client options, from `AWS_*` variables (as LanceDB reads
    them) overridden by the storage options."""
    s3: dict[str, str] = {}
    client: dict[str, str] = {}
    env = os.environ if environ is None else environ
    sources = [{k: v for k, v in env.items() if k.upper().startswith("AWS_")}, storage_options]
    for source in sources:
        for key, value in source.items():
            found = _option_key(key)
            if found is not None:
                (s3 if found[0] == "s3" else client)[found[1]] = str(value)
    return s3, client


@dataclass(frozen=True)
class ObjectStoreLocation:
    """Where an `s3://bucket/prefix` LanceDB URI points, with a client for it."""

    uri: str
    bucket: str
    prefix: str
    endpoint: str  # for messages: the configured endpoint, or "AWS S3"
    store: Any  # obstore S3Store, rooted at the prefix
    options: dict[str, str]  # the storage options it was made from

    @classmethod
    def from_uri(cls, uri: str, storage_options: dict[str, str], *,
                 retries: dict[str, Any] | None = None) -> ObjectStoreLocation:
        from obstore.store import S3Store

        parsed = urlparse(uri)
        bucket, prefix = parsed.netloc, parsed.path.strip("/")
        s3, client = split_options(storage_options)
        store = S3Store(bucket, prefix=prefix or None, config=s3,  # type: ignore[arg-type]
                        client_options=client,  # type: ignore[arg-type]
                        retry_config=retries)  # type: ignore[arg-type]
        return cls(uri=uri, bucket=bucket, prefix=prefix,
                   endpoint=s3.get("endpoint", "AWS S3"), store=store,
                   options=dict(storage_options))

    def describe(self) -> str:
        return f"bucket {self.bucket!r} at {self.endpoint}"

    async def check(self) -> None:
        """Start-up check: reachable, credentials accepted, conditional writes honoured.

        Raises:
            Unavailable: with a sentence naming the problem and the settings to look at.
        """
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        # A client that retries briefly: a wrong endpoint must not hold start-up for minutes.
        probe_store = ObjectStoreLocation.from_uri(self.uri, self.options,
                                                   retries=_CHECK_RETRIES).store
        try:
            await obstore.list_with_delimiter_async(probe_store)
        except Exception as error:
            raise Unavailable(self._explain(error)) from None
        probe = f"{PROBE_PREFIX}/{uuid.uuid4().hex}"
        try:
            await obstore.put_async(probe_store, probe, b"1", mode="create")
            try:
                await obstore.put_async(probe_store, probe, b"2", mode="create")
            except (AlreadyExistsError, PreconditionError):
                pass  # as it must
            else:
                raise Unavailable(
                    f"the object store ({self.describe()}) ignores conditional writes "
                    "(a PUT with If-None-Match: * replaced an existing object): LanceDB's "
                    "commits and Engram's namespace leases need them; use a store that "
                    "supports S3 conditional writes")
            await obstore.delete_async(probe_store, probe)
        except Unavailable:
            raise
        except Exception as error:
            raise Unavailable(self._explain(error, writing=True)) from None

    def _explain(self, error: BaseException, *, writing: bool = False) -> str:
        text = str(error)
        where = f"ENGRAM_LANCEDB_URI={self.uri} ({self.describe()})"
        detail = text.split("Debug source")[0].strip().replace("\n", " ")[:300]
        if "NoSuchBucket" in text:
            return (f"the bucket {self.bucket!r} does not exist at {self.endpoint}: create it, "
                    f"or fix ENGRAM_LANCEDB_URI={self.uri}")
        refused = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied",
                   "ExpiredToken", "InvalidToken", "403 Forbidden", "401 Unauthorized")
        if any(marker in text for marker in refused):
            code = next(m for m in refused if m in text)
            action = "writing to" if writing else "listing"
            return (f"the object store refused the credentials ({code}) when {action} {where}: "
                    "check the access key and secret (AWS_ACCESS_KEY_ID / "
                    "AWS_SECRET_ACCESS_KEY, or aws_access_key_id / aws_secret_access_key in "
                    "ENGRAM_STORAGE_OPTIONS) and the key's permissions on the bucket")
        if "builder error" in text and self.endpoint.startswith("http://"):
            return (f"the endpoint {self.endpoint} is plain HTTP: set \"allow_http\": \"true\" "
                    "in ENGRAM_STORAGE_OPTIONS to allow it")
        if "error sending request" in text or "connect" in text.lower() or "dns" in text.lower():
            return (f"cannot reach the object store for {where}: {detail}. Check the "
                    "endpoint (aws_endpoint in ENGRAM_STORAGE_OPTIONS), the region and the "
                    "network")
        return f"the object store for {where} failed: {detail}"


def location_for(uri: str, storage_options: dict[str, str]) -> ObjectStoreLocation | None:
    """The object store behind `uri`, or None for a local directory."""
    if not is_object_store_uri(uri):
        return None
    return ObjectStoreLocation.from_uri(uri, storage_options)

