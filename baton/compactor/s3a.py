"""Spark settings that let the job write an object-store snapshot store through Hadoop's S3A.

The workers read the same store with pyarrow (``baton/worker/state/snapshot_fs.py``) from the same
three inputs, so both sides agree on where the objects are: the store URI, the endpoint of
an S3-compatible server (path-style addressing, as MinIO, Ceph and SeaweedFS expect), and
the region. Credentials are never settings here: S3A's default chain reads the
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` variables (or the Pod's web identity), as
pyarrow does. Executors write the Parquet parts, and on a cluster they run in JVMs of
their own, so variables the driver has are passed to them as ``spark.executorEnv.*``
(Spark redacts the secret ones in its UI and logs).

S3A is not in Spark's distribution: its jars (``hadoop-aws`` of Spark's Hadoop version and
the AWS SDK bundle, about 560 MB) go on the driver's and executors' class path rather than
being shipped with ``spark.jars``: a cluster's nodes run the same image, and half a
gigabyte is not copied into every executor's work directory on every run. The compactor
image does that in its ``spark-defaults.conf`` (``SPARK_CONF_DIR``); elsewhere
``BATON_SPARK_CLASSPATH`` names them.
"""

from __future__ import annotations

import logging
import os
from urllib.parse import urlparse

from baton.worker.state.snapshot_uri import S3Settings, is_object_store

log = logging.getLogger(__name__)

CLASSPATH_ENV = "BATON_SPARK_CLASSPATH"
CREDENTIAL_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION")
S3A = "org.apache.hadoop.fs.s3a.S3AFileSystem"
# S3A needs a region to sign requests; S3-compatible servers accept any, and this is AWS's default
DEFAULT_REGION = "us-east-1"


def hadoop_settings(store: str, s3: S3Settings) -> dict[str, str]:
    """Spark settings for an ``s3a://``/``s3://`` store; none for other stores."""
    if not is_object_store(store):
        return {}
    out = {"spark.hadoop.fs.s3.impl": S3A}  # s3:// names the same store as s3a:// (as on EMR)
    if s3.endpoint:
        endpoint = urlparse(s3.endpoint)
        out |= {
            "spark.hadoop.fs.s3a.endpoint": s3.endpoint,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": str(endpoint.scheme == "https").lower(),
            "spark.hadoop.fs.s3a.endpoint.region": s3.region or DEFAULT_REGION,
        }
    elif s3.region:
        out["spark.hadoop.fs.s3a.endpoint.region"] = s3.region
    for var in CREDENTIAL_VARS:
        if os.environ.get(var):
            out[f"spark.executorEnv.{var}"] = os.environ[var]
    classpath = os.environ.get(CLASSPATH_ENV)
    if classpath:
        out |= {"spark.driver.extraClassPath": classpath, "spark.executor.extraClassPath": classpath}
    elif not os.environ.get("SPARK_CONF_DIR"):  # the image's spark-defaults.conf has them
        log.warning(
            f"{store} is an object store but {CLASSPATH_ENV} is unset: unless spark-submit adds them "
            "(--packages org.apache.hadoop:hadoop-aws:<Spark's Hadoop version>) or spark-defaults.conf "
            "does, Spark will not find S3AFileSystem; the compactor image has them on its class path"
        )
    return out
