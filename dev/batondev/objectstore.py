"""A real S3-compatible server for the snapshot store: MinIO built from the Go module proxy.

One server with one drive under the run folder and a bucket, ``baton``, made at start,
listening on every address: 127.0.0.1 for this machine's clients, the node's address for Pods
(:func:`node_endpoint`). The compactor's Spark job writes it through Hadoop's S3A and the workers read it
through pyarrow, both with the credentials below, exactly as they would an AWS bucket
(only the endpoint differs).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from . import gobuild, paths, ports, procs

NAME = "minio"
BUCKET = "baton"
ACCESS_KEY = "baton"
SECRET_KEY = "baton-local-secret"  # the local stack's only; MinIO wants 8+ characters
REGION = "us-east-1"


def endpoint() -> str:
    return f"http://127.0.0.1:{ports.S3}"


def node_endpoint() -> str:
    """The server as Pods on the node reach it."""
    return f"http://{ports.node_ip()}:{ports.S3}"


def data_dir() -> Path:
    return paths.RUN / NAME / "data"


def _ready() -> bool:
    import urllib.request

    with urllib.request.urlopen(f"{endpoint()}/minio/health/ready", timeout=2) as response:
        return bool(response.status == 200)


def _make_bucket() -> None:
    from pyarrow import fs

    s3 = fs.S3FileSystem(
        access_key=ACCESS_KEY,
        secret_key=SECRET_KEY,
        endpoint_override=f"127.0.0.1:{ports.S3}",
        scheme="http",
        region=REGION,
        allow_bucket_creation=True,
    )
    if s3.get_file_info(BUCKET).type == fs.FileType.NotFound:
        s3.create_dir(BUCKET)


def up(*, fresh: bool = False, timeout: float = 60) -> str:
    """Build MinIO once, start it unless it runs, make the bucket; returns the endpoint."""
    binary = gobuild.build_minio() / NAME
    if procs.running_pid(NAME) is None:
        if fresh:
            shutil.rmtree(data_dir(), ignore_errors=True)
        data_dir().mkdir(parents=True, exist_ok=True)
        procs.ensure_ports_free(NAME, [ports.S3, ports.S3_CONSOLE])
        procs.start(
            NAME,
            [
                str(binary),
                "server",
                str(data_dir()),
                "--address",
                f":{ports.S3}",
                "--console-address",
                f"127.0.0.1:{ports.S3_CONSOLE}",
                "--quiet",
            ],
            env={
                **_base_env(),
                "MINIO_ROOT_USER": ACCESS_KEY,
                "MINIO_ROOT_PASSWORD": SECRET_KEY,
                "MINIO_BROWSER": "off",
                "MINIO_UPDATE": "off",
                "MINIO_REGION": REGION,
            },
        )
    procs.wait_started(NAME, _ready, timeout)
    _make_bucket()
    return endpoint()


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("MINIO_", "AWS_"))}


def down() -> bool:
    return procs.stop(NAME)


def client_env() -> dict[str, str]:
    """What a worker or the compactor needs to reach the bucket (the AWS chain's variable names)."""
    return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION}
