"""The SparkSession: the Kafka connector's jars, and settings that suit a batch job.

Under ``spark-submit`` the session already exists (jars from ``--jars``/``--packages``)
and ``getOrCreate`` returns it; run as ``baton compact`` the jars come from ``--jars`` or
``BATON_SPARK_JARS`` (comma-separated paths or URLs).
"""

from __future__ import annotations

import os
import sys
from typing import Any


def jars_from_env() -> list[str]:
    return [j for j in os.environ.get("BATON_SPARK_JARS", "").split(",") if j]


def session(master: str | None = None, jars: list[str] | None = None, app_name: str = "baton-compact") -> Any:
    from pyspark.sql import SparkSession

    # Python workers (the recomputation) must run this interpreter, which has baton and the app
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    jars = jars if jars is not None else jars_from_env()
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    return (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", os.environ.get("BATON_SPARK_SHUFFLE_PARTITIONS", "8"))
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
