"""The Kubeflow Spark Operator on the stack's node, for ``spec.compaction.runner: SparkOperator``.

Why this shape: the operator is installed the way its users install it, ``helm install`` of
the chart its own module carries, into the namespace of the apps it serves
(``spark.jobNamespaces``), which also makes the driver's ServiceAccount
(``spark-operator-spark``) and its Role there. Its controller runs ``spark-submit`` in its
own Pod, so its image needs a JRE and a Spark: it is the compactor image plus the
operator's binary (``SPARK_HOME`` is the image's pyspark), the way the project's own
Dockerfile puts the binary on top of a Spark image. No registry is reachable here, so the
image is built with buildah and imported into the node.

The webhook is off: the SparkApplications Baton writes carry driver and executor pod
templates, which Spark applies itself (the webhook is only needed for fields without one).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from . import buildah, gobuild, kube, versions

IMAGE = "localhost/baton-spark-operator"
SPARK_HOME = "/opt/baton/lib/python3.11/site-packages/pyspark"  # the compactor image's pyspark


def image(compactor_image: str) -> str:
    """The controller's image, built once per compactor image and operator version."""
    built = gobuild.build_spark_operator()
    tag = f"{compactor_image.rpartition(':')[2]}-{versions.SPARK_OPERATOR}"
    name = f"{IMAGE}:{tag}"
    if buildah.exists(name):
        return name
    container = buildah.run("from", "--pull-never", compactor_image)
    try:
        buildah.run(
            "copy",
            "--chmod",
            "0755",
            container,
            str(built / "bin" / "spark-operator"),
            "/usr/bin/spark-operator",
        )
        buildah.run(
            "config",
            "--entrypoint",
            json.dumps(["/usr/bin/spark-operator"]),
            "--cmd",
            "",
            "--env",
            f"SPARK_HOME={SPARK_HOME}",
            container,
        )
        buildah.run("commit", "--quiet", container, name)
    finally:
        buildah.run("rm", container)
    return name


def chart() -> Path:
    return gobuild.build_spark_operator() / "chart"


def crd_file(plural: str) -> Path:
    """One of the operator's CRDs as its chart installs it (``scheduledsparkapplications``, ...)."""
    return chart() / "crds" / f"sparkoperator.k8s.io_{plural}.yaml"


def helm(*args: str, timeout: float = 300) -> None:
    out = subprocess.run(
        [str(gobuild.helm_dir() / "bin" / "helm"), f"--kubeconfig={kube.kubeconfig()}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if out.returncode != 0:
        raise RuntimeError(f"helm {' '.join(args[:2])} failed: {out.stderr.strip()}")


def install(
    release: str,
    namespace: str,
    operator_image: str,
    tolerations: list[dict[str, str]],
    *,
    driver_account: str = "spark-operator-spark",
) -> None:
    """``helm install`` of the operator's own chart, serving ``namespace`` only; waits for its Pod.

    ``driver_account`` is the Spark ServiceAccount the chart makes there (its default name when
    the release is called ``spark-operator``); the release name carries a suffix here, since
    its ClusterRole is named after it and two tests' releases must not collide."""
    repository, _, tag = operator_image.rpartition(":")
    registry, _, repository = repository.partition("/")
    helm(
        *("upgrade", "--install", release, str(chart()), "-n", namespace, "--wait", "--timeout", "240s"),
        *("--set", f"image.registry={registry}", "--set", f"image.repository={repository}"),
        *("--set", f"image.tag={tag}", "--set", "image.pullPolicy=Never"),
        *("--set", "webhook.enable=false", "--set", "controller.leaderElection.enable=false"),
        *("--set", "controller.uiService.enable=false"),
        *("--set-json", f"spark.jobNamespaces={json.dumps([namespace])}"),
        *("--set", f"spark.serviceAccount.name={driver_account}"),
        *("--set-json", f"controller.tolerations={json.dumps(tolerations)}"),
    )


def uninstall(release: str, namespace: str) -> None:
    """Remove the release (its ClusterRole and binding are cluster-wide, so they must go)."""
    helm("uninstall", release, "-n", namespace, "--wait", "--timeout", "120s")
