"""Spark for the compactor: the spark-sql-kafka connector jars, and a standalone cluster.

Spark resolves ``--packages`` through Ivy at run time, which a test should not depend on;
instead Maven copies the connector and its runtime dependencies once per pyspark version
into ``~/.cache/baton/spark-kafka-<version>/jars``, and the compactor passes them as
``spark.jars``.

The cluster is Spark's own standalone mode started from pyspark's ``spark-class``: a master
and two workers of one core and 1 GiB each, on 127.0.0.1, so jobs run the way they do on a
real cluster (executors in their own JVMs, a shuffle over the network, jars shipped by the
driver) rather than only in ``local[N]``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import maven, paths, ports, procs

MASTER = "spark-master"
WORKERS = ("spark-worker-1", "spark-worker-2")

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.baton</groupId>
  <artifactId>spark-kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId>
      <artifactId>spark-sql-kafka-0-10_{scala}</artifactId>
      <version>{spark}</version>
    </dependency>
  </dependencies>
</project>
"""


def pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def jars_dir() -> Path:
    return paths.tool_dir("spark-kafka", pyspark_version()) / "jars"


def install() -> Path:
    """Copy the connector jars once per pyspark version; returns their folder."""
    dest = jars_dir()
    if (dest.parent / ".complete").exists():
        return dest
    version = pyspark_version()
    scala = "2.13" if int(version.split(".")[0]) >= 4 else "2.12"
    maven.copy_dependencies(
        POM.format(scala=scala, spark=version), dest, f"spark-kafka-{version}.install.log"
    )
    (dest.parent / ".complete").touch()
    return dest


def jars() -> list[str]:
    return sorted(str(p) for p in install().glob("*.jar"))


S3A_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.baton</groupId>
  <artifactId>spark-s3a-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.hadoop</groupId>
      <artifactId>hadoop-aws</artifactId>
      <version>{hadoop}</version>
    </dependency>
  </dependencies>
</project>
"""


def hadoop_version() -> str:
    """The Hadoop client pyspark ships (hadoop-aws must match it exactly)."""
    import pyspark

    found = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    if not found:
        raise RuntimeError("pyspark ships no hadoop-client-api jar: cannot choose hadoop-aws")
    return found[0].name.removeprefix("hadoop-client-api-").removesuffix(".jar")


def s3a_install() -> Path:
    """hadoop-aws and the AWS SDK bundle (about 560 MB) once per Hadoop version; returns their folder."""
    version = hadoop_version()
    dest = paths.tool_dir("spark-s3a", version) / "jars"
    if (dest.parent / ".complete").exists():
        return dest
    maven.copy_dependencies(S3A_POM.format(hadoop=version), dest, f"spark-s3a-{version}.install.log")
    (dest.parent / ".complete").touch()
    return dest


def s3a_classpath() -> str:
    """The S3A jars as a class path (the compactor's BATON_SPARK_CLASSPATH)."""
    return os.pathsep.join(sorted(str(p) for p in s3a_install().glob("*.jar")))


def master_url() -> str:
    return f"spark://127.0.0.1:{ports.SPARK_MASTER}"


def _spark_class(*args: str) -> list[str]:
    import pyspark

    return [str(Path(pyspark.__file__).parent / "bin" / "spark-class"), *args]


def _env() -> dict[str, str]:
    import pyspark

    # Not the PYTHONPATH of whoever started the stack: the workers outlive that clone's test run,
    # and their executors then imported its code, not the running job's (a clone made before
    # baton/worker/runtime/record.py existed failed every later run's recomputation audit).
    # The venv's editable install follows the clone last bootstrapped, the one testing now.
    inherited = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {
        **inherited,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(paths.RUN / MASTER),
        # executors run Python (the recomputation audit) with the interpreter that has baton
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
    }


def _workers_registered() -> bool:
    """The master's JSON status lists both workers ALIVE."""
    import json
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{ports.SPARK_MASTER_UI}/json/", timeout=2) as response:
        state = json.load(response)
    alive = sum(w.get("state") == "ALIVE" for w in state.get("workers", []))
    return bool(alive >= len(WORKERS))


def cluster_up(timeout: float = 90) -> str:
    """Start the master and the workers unless they run; returns the master URL."""
    if procs.running_pid(MASTER) is None:
        procs.ensure_ports_free(MASTER, [ports.SPARK_MASTER, ports.SPARK_MASTER_UI])
        procs.start(
            MASTER,
            _spark_class(
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(ports.SPARK_MASTER),
                "--webui-port",
                str(ports.SPARK_MASTER_UI),
            ),
            env=_env(),
        )
    procs.wait_started(MASTER, lambda: procs.port_open(ports.SPARK_MASTER_UI), timeout)
    for index, name in enumerate(WORKERS):
        if procs.running_pid(name) is not None:
            continue
        ui = ports.SPARK_WORKER_UI + index
        procs.ensure_ports_free(name, [ui])
        work = paths.RUN / name / "work"
        work.mkdir(parents=True, exist_ok=True)
        procs.start(
            name,
            _spark_class(
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--webui-port",
                str(ui),
                "--cores",
                "1",
                "--memory",
                "1g",
                "--work-dir",
                str(work),
                master_url(),
            ),
            env=_env(),
        )
    procs.wait_started(MASTER, _workers_registered, timeout)
    return master_url()


def cluster_down() -> list[str]:
    return [name for name in (*WORKERS, MASTER) if procs.stop(name)]
