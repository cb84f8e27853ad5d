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


def settings(
    master: str | None, conf: dict[str, str] | None = None, pod_ip: str | None = None
) -> dict[str, str]:
    """The session's settings: Baton's defaults, then the user's ``conf``.

    Shuffle partitions are Spark's (adaptive execution coalesces them to the data), unless
    set. A driver in a Pod with a cluster master advertises the Pod's IP, where executors
    connect back to it.
    """
    out = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
    }
    if pod_ip and master and not master.startswith("local"):
        out |= {"spark.driver.host": pod_ip, "spark.driver.bindAddress": "0.0.0.0"}
    return out | (conf or {})


def session(
    master: str | None = None,
    jars: list[str] | None = None,
    app_name: str = "baton-compact",
    conf: dict[str, str] | None = None,
) -> Any:
    from pyspark.sql import SparkSession

    # Python workers (the recomputation) must run this interpreter, which has baton and the app
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    jars = jars if jars is not None else jars_from_env()
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in settings(master, conf, os.environ.get("BATON_POD_IP")).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
