"""The filesystem behind a snapshot store URI, as a worker reads it (pyarrow; workers have no JVM).

The compactor writes snapshots through Hadoop's filesystems (``s3a://``, ``hdfs://``, a
path); a worker reads the same URI here:

* ``/x`` and ``file:///x``: the local filesystem (a shared volume);
* ``s3a://bucket/prefix`` (Hadoop's name) and ``s3://bucket/prefix``: the same objects
  through pyarrow's S3 client. Credentials come from the standard AWS chain (the
  ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` variables the operator sets from
  ``spec.compaction.objectStore.credentialsSecret``, or the Pod's web identity), exactly
  as the job's S3A client finds them. ``endpoint`` points both at an S3-compatible server
  (MinIO, Ceph, SeaweedFS), addressed path-style as such servers expect;
* anything else (``hdfs://``) is refused with the URI in the message: pyarrow's HDFS
  needs libhdfs and a Hadoop install that worker images do not carry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

S3_SCHEMES = ("s3", "s3a")


@dataclass(frozen=True)
class S3Settings:
    """Where an S3-compatible store is, beyond what the AWS chain finds: None means AWS's own."""

    endpoint: str | None = None  # http(s)://host[:port]
    region: str | None = None

    def __post_init__(self) -> None:
        if self.endpoint is not None:
            parsed = urlparse(self.endpoint)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise ValueError(
                    f"S3 endpoint {self.endpoint!r} must be an http:// or https:// URL, e.g. http://minio:9000"
                )


def is_object_store(root: str) -> bool:
    return urlparse(root).scheme in S3_SCHEMES


def readable(root: str) -> None:
    """Raise ValueError, saying why, unless workers can read snapshots from ``root``."""
    parsed = urlparse(root)
    if parsed.scheme in S3_SCHEMES and not parsed.netloc:
        raise ValueError(f"snapshot store {root!r} names no bucket (s3a://bucket/prefix)")
    if parsed.scheme not in ("", "file", *S3_SCHEMES):
        raise ValueError(
            f"snapshot store {root!r}: workers read local paths, file:// and s3a:// (or s3://) stores; "
            f"{parsed.scheme}:// is written by the compactor only"
        )


def open_store(root: str, s3: S3Settings | None = None) -> tuple[Any, str]:
    """(pyarrow FileSystem, the root as a path within it) for a snapshot store URI."""
    from pyarrow import fs

    readable(root)
    parsed = urlparse(root)
    if parsed.scheme in ("", "file"):
        return fs.LocalFileSystem(), (parsed.path if parsed.scheme else root).rstrip("/") or "/"
    if parsed.scheme in S3_SCHEMES:
        s3 = s3 or S3Settings()
        options: dict[str, Any] = {
            "retry_strategy": fs.AwsStandardS3RetryStrategy(max_attempts=5),
            "connect_timeout": 10,
            "request_timeout": 60,
        }
        if s3.endpoint:
            endpoint = urlparse(s3.endpoint)
            # with an endpoint override pyarrow addresses buckets path-style, as MinIO & co expect
            options |= {"endpoint_override": endpoint.netloc, "scheme": endpoint.scheme}
        if s3.region:
            options["region"] = s3.region
        return fs.S3FileSystem(**options), f"{parsed.netloc}{parsed.path}".rstrip("/")
    raise AssertionError(root)  # readable() refused it
