"""The compactor image's entry point: ``baton compact``, or one of the Pods Spark starts from the image.

Spark's Kubernetes scheduler starts executor Pods (and, in cluster mode, the driver Pod)
from ``spark.kubernetes.container.image`` with the image's entry point and a first
argument of ``executor`` or ``driver``; everything else (driver URL, executor id, cores,
memory, Java options, class path) comes in environment variables Spark sets on the Pod.
Spark's own images answer that with a shell script; this image has no Spark distribution
but pyspark's (``SPARK_HOME`` is the pyspark package), so this module does the same:

* ``executor``: the JVM of Spark's Kubernetes executor backend, with Spark's class path
  (the image's ``SPARK_CONF_DIR``, the ``spark.executor.extraClassPath`` Spark passes as
  ``SPARK_CLASSPATH``, which is where the image puts the Kafka connector and S3A jars,
  then pyspark's jars) and the Java options Spark passes as ``SPARK_JAVA_OPT_<n>``;
* ``driver``: ``spark-submit`` in client mode inside the driver Pod (the Spark Operator's
  cluster mode). Spark points ``SPARK_CONF_DIR`` of that Pod at the properties the submitter
  sent, so the image's own ``spark-defaults.conf`` (``BATON_SPARK_CONF_DIR``) is not read
  there: its class paths are passed on when the submitted properties have none (a Spark
  Operator whose image is not this one submits without them);
* anything else: ``baton compact`` with those arguments (``--help`` by default).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

BACKEND = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
IMAGE_CONF_VAR = "BATON_SPARK_CONF_DIR"
CLASS_PATHS = ("spark.driver.extraClassPath", "spark.executor.extraClassPath")
_JAVA_OPT = re.compile(r"^SPARK_JAVA_OPT_(\d+)$")


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def executor_command(env: Mapping[str, str], home: Path, java: str) -> list[str]:
    """The executor JVM's command line from the variables Spark sets on an executor Pod (pure)."""
    missing = [
        name
        for name in ("SPARK_DRIVER_URL", "SPARK_EXECUTOR_ID", "SPARK_EXECUTOR_CORES", "SPARK_APPLICATION_ID")
        if not env.get(name)
    ]
    if missing:
        raise SystemExit(f"not an executor Pod of Spark's Kubernetes scheduler: {', '.join(missing)} unset")
    options = [
        env[name]
        for name in sorted((n for n in env if _JAVA_OPT.match(n)), key=lambda n: int(n.rsplit("_", 1)[1]))
    ]
    memory = env.get("SPARK_EXECUTOR_MEMORY")
    heap = [f"-Xms{memory}", f"-Xmx{memory}"] if memory else []
    classpath = [
        env.get("SPARK_CONF_DIR", str(home / "conf")),
        *(p for p in env.get("SPARK_CLASSPATH", "").split(":") if p),
        str(home / "jars" / "*"),
        *(p for p in env.get("SPARK_EXTRA_CLASSPATH", "").split(":") if p),
    ]
    command = [java, *options, *heap, "-cp", ":".join(classpath), BACKEND]
    command += ["--driver-url", env["SPARK_DRIVER_URL"], "--executor-id", env["SPARK_EXECUTOR_ID"]]
    command += ["--cores", env["SPARK_EXECUTOR_CORES"], "--app-id", env["SPARK_APPLICATION_ID"]]
    command += ["--hostname", env.get("SPARK_EXECUTOR_POD_IP", "0.0.0.0")]
    command += ["--resourceProfileId", env.get("SPARK_RESOURCE_PROFILE_ID", "0")]
    if env.get("SPARK_EXECUTOR_POD_NAME"):
        command += ["--podName", env["SPARK_EXECUTOR_POD_NAME"]]
    return command


def driver_command(
    args: list[str],
    env: Mapping[str, str],
    home: Path,
    image_defaults: Mapping[str, str] | None = None,
    submitted: Mapping[str, str] | None = None,
) -> list[str]:
    """``spark-submit`` in client mode inside a cluster-mode driver Pod (pure).

    ``image_defaults``: the image's spark-defaults.conf; ``submitted``: the properties file
    the submitter sent. The image's class paths go on unless the submitted ones say otherwise."""
    bind = env.get("SPARK_DRIVER_BIND_ADDRESS", "0.0.0.0")
    class_paths = [
        option
        for key in CLASS_PATHS
        if key in (image_defaults or {}) and key not in (submitted or {})
        for option in ("--conf", f"{key}={(image_defaults or {})[key]}")
    ]
    return [
        str(home / "bin" / "spark-submit"),
        "--conf",
        f"spark.driver.bindAddress={bind}",
        "--conf",
        f"spark.executorEnv.SPARK_DRIVER_POD_IP={bind}",
        *class_paths,
        "--deploy-mode",
        "client",
        *args,
    ]


def _properties(path: Path | None) -> dict[str, str]:
    """A Java properties file (spark-defaults.conf's format too); empty if it is not there."""
    import javaproperties

    if path is None or not path.is_file():
        return {}
    with path.open(encoding="utf-8") as f:
        return dict(javaproperties.load(f))


def _properties_file(args: list[str]) -> Path | None:
    if "--properties-file" in args[:-1]:
        return Path(args[args.index("--properties-file") + 1])
    return None


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    role = args[0] if args else None
    if role == "executor":
        java = str(Path(os.environ["JAVA_HOME"]) / "bin" / "java") if os.environ.get("JAVA_HOME") else "java"
        command = executor_command(os.environ, spark_home(), java)
    elif role == "driver":
        conf_dir = os.environ.get(IMAGE_CONF_VAR)
        defaults = _properties(Path(conf_dir) / "spark-defaults.conf" if conf_dir else None)
        submitted = _properties(_properties_file(args[1:]))
        command = driver_command(args[1:], os.environ, spark_home(), defaults, submitted)
    else:
        command = [str(Path(sys.executable).with_name("baton")), "compact", *(args or ["--help"])]
    sys.stdout.flush()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
