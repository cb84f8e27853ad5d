"""The SparkSession: the Kafka connector's jars, and settings that suit a batch job.

Under ``spark-submit`` the session already exists (jars from ``--jars``/``--packages``)
and ``getOrCreate`` returns it; run as ``baton compact`` the jars come from ``--jars`` or
``BATON_SPARK_JARS`` (comma-separated paths or URLs).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from baton.operator.core.compaction.kubernetes import EXECUTOR_TEMPLATE_VAR, POD_NAME_VAR, POD_NAMESPACE_VAR


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


def driver_settings(master: str | None, env: Mapping[str, str], workdir: Path) -> dict[str, str]:
    """Spark settings a driver in a Pod learns only at start: its Pod, its namespace, the
    executors' template (written to ``workdir``). None unless the master is Kubernetes."""
    if not (master or "").startswith("k8s://"):
        return {}
    out: dict[str, str] = {}
    if env.get(POD_NAME_VAR):
        out["spark.kubernetes.driver.pod.name"] = env[POD_NAME_VAR]
    if env.get(POD_NAMESPACE_VAR):
        out["spark.kubernetes.namespace"] = env[POD_NAMESPACE_VAR]
    if env.get(EXECUTOR_TEMPLATE_VAR):
        path = workdir / "executor-pod-template.json"
        path.write_text(env[EXECUTOR_TEMPLATE_VAR])
        out["spark.kubernetes.executor.podTemplateFile"] = str(path)
    return out
