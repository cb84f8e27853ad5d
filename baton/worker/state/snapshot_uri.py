"""Snapshot store URIs as the operator and the worker's config check them: which are object stores,
which a worker can read, and the S3 settings that go with them. Pure: the filesystem behind
a URI is ``snapshot_fs.py``'s (pyarrow), imported only where snapshots are read."""

from __future__ import annotations

from dataclasses import dataclass
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
