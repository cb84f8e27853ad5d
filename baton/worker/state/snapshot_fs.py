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

from typing import Any
from urllib.parse import urlparse

from baton.worker.state.snapshot_uri import S3_SCHEMES, S3Settings, readable


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
