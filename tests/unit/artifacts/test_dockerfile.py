"""The Dockerfile: hadolint-clean, pinned, non-root, and the two targets the docs promise.

The image is built and run by the e2e tests (dev/image, on the stack's node); these
are the fast checks of what a build would only show indirectly: the linter, the pins (digests,
lockfiles with hashes, the JRE's exact version) and the structure of the stages.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from batondev.paths import REPO

from baton.images import RUN_AS_USER

DOCKERFILE = REPO / "Dockerfile"
HADOLINT = Path(sys.executable).parent / "hadolint"

pytestmark = pytest.mark.unit


def _stages() -> dict[str, list[str]]:
    """Instructions per stage name (the unnamed last stage is ``default``)."""
    stages: dict[str, list[str]] = {}
    current: list[str] | None = None
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"FROM\s+\S+(?:\s+AS\s+(\S+))?", line, re.IGNORECASE)
        if m:
            current = stages.setdefault(m.group(1) or "default", [])
        if current is not None:
            current.append(line)
    return stages


def test_hadolint_passes_with_no_findings() -> None:
    out = subprocess.run([str(HADOLINT), "--no-color", str(DOCKERFILE)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_base_images_are_pinned_by_digest_with_the_tag_in_a_comment() -> None:
    text = DOCKERFILE.read_text()
    args = dict(re.findall(r"^ARG (\w+_IMAGE)=(\S+)$", text, re.MULTILINE))
    assert set(args) == {"PYTHON_IMAGE", "MAVEN_IMAGE"}
    for image in args.values():
        reference, _, digest = image.partition("@")
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), f"{image} must pin a digest"
        _, _, tag = reference.partition(":")
        assert re.match(r"^\d+\.\d+\.\d+", tag), f"{image} must name a full version"
        assert re.search(
            rf"^# {re.escape(reference)}\b.*\nARG \w+_IMAGE={re.escape(image)}$", text, re.MULTILINE
        )
    assert "slim" in args["PYTHON_IMAGE"]


def test_python_dependencies_come_from_the_hashed_lockfiles() -> None:
    from batondev import imagelock

    for lock in (imagelock.IMAGE_LOCK, imagelock.COMPACTOR_LOCK):
        assert imagelock.in_sync(lock) == [], "run dev/image lock"
    installs = [i for s in _stages().values() for i in s if "pip install" in i]
    assert installs, "the Dockerfile installs nothing?"
    for install in installs:
        assert "--no-deps" in install, install  # nothing is resolved at build time
        assert ("--require-hashes" in install) == (".lock" in install), install
    assert "/tmp/image.lock" in " ".join(_stages()["deps"])
    assert "/tmp/compactor.lock" in " ".join(_stages()["compactor-deps"])


def test_the_jre_is_pinned_to_an_exact_debian_version() -> None:
    compactor = " ".join(_stages()["compactor"])
    version = re.search(r"ARG JRE_VERSION=(\S+)", compactor)
    assert version and re.fullmatch(r"17\.[\d.]+\+\d+-\d+~deb12u\d+", version.group(1)), compactor
    assert '"openjdk-17-jre-headless=${JRE_VERSION}"' in compactor


def test_targets_run_baton_as_the_pods_uid() -> None:
    stages = _stages()
    assert {"build", "runtime", "compactor", "default"} <= set(stages)
    for target in ("runtime", "compactor"):
        users = [i.split()[1] for i in stages[target] if i.startswith("USER ")]
        assert users[-1] == f"{RUN_AS_USER}:{RUN_AS_USER}", f"{target} must end as the non-root user"
    runtime = " ".join(stages["runtime"])
    assert f"--uid {RUN_AS_USER}" in " ".join(stages["image-base"])
    assert stages["runtime"][0].startswith("FROM image-base") and stages["compactor"][0].startswith(
        "FROM image-base"
    )
    assert 'ENTRYPOINT ["baton"]' in runtime
    # `baton compact`, or the Pods Spark's Kubernetes scheduler starts from the image
    assert 'ENTRYPOINT ["python", "-m", "baton.compactor.entrypoint"]' in " ".join(stages["compactor"])
    assert stages["default"] == ["FROM runtime"], "a plain `docker build` gives the worker/operator image"


def test_compactor_has_java_pyspark_and_the_kafka_connector() -> None:
    from batondev import imagelock

    compactor = " ".join(_stages()["compactor"])
    assert "openjdk-17-jre-headless" in compactor
    assert "COPY --from=compactor-deps /opt/baton /opt/baton" in compactor
    assert "COPY --from=build /staging/opt/baton /opt/baton" in compactor
    assert "BATON_SPARK_JARS" not in compactor, "jars go on the class path by the image, not spark.jars"
    pinned = re.search(r'"pyspark==([\d.]+)"', (REPO / "pyproject.toml").read_text())
    locked = imagelock.pins(imagelock.COMPACTOR_LOCK.read_text())
    assert pinned and locked["pyspark"] == pinned.group(1), "same pyspark as the [compactor] extra"
    assert "pyspark" not in imagelock.pins(imagelock.IMAGE_LOCK.read_text()), "the runtime image stays small"


def test_compactor_carries_s3a_for_the_hadoop_of_its_pyspark() -> None:
    """hadoop-aws must match pyspark's own Hadoop client exactly (dev/batondev/spark.py reads it
    from pyspark's jars; the image pins it), and it goes on the class path the job reads."""
    from batondev.spark import hadoop_version

    from baton.compactor.s3a import CLASSPATH_ENV
    from baton.operator.core.compaction.sparkapp import MAIN_FILE

    stages = _stages()
    assert f"<artifactId>hadoop-aws</artifactId><version>{hadoop_version()}</version>" in " ".join(
        stages["s3a-jars"]
    )
    compactor = " ".join(stages["compactor"])
    assert "COPY --from=s3a-jars /jars/out/ /opt/baton/s3a-jars/" in compactor
    # both jar folders on every class path Spark builds from the image's SPARK_CONF_DIR
    # the connector's, then Spark's own, then S3A's (whose AWS bundle carries an older netty)
    assert 'classpath="/opt/baton/spark-jars/*:${spark_home}/jars/*:/opt/baton/s3a-jars/*"' in compactor
    assert "spark.driver.extraClassPath %s" in compactor and "spark.executor.extraClassPath %s" in compactor
    assert "> /opt/baton/spark-conf/spark-defaults.conf" in compactor
    assert "SPARK_CONF_DIR=/opt/baton/spark-conf" in compactor
    assert CLASSPATH_ENV not in compactor, "spark-defaults.conf, not a variable that --conf could replace"
    entry = MAIN_FILE.removeprefix("local://")
    assert entry in " ".join(stages["build"]), "the SparkApplication's entry point"


def test_dockerignore_lets_in_exactly_what_is_copied() -> None:
    allowed = {
        line[1:].rstrip("/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    copied = set()
    for m in re.finditer(r"^COPY (?!--from)(?:--\S+ )*(.+) \S+$", DOCKERFILE.read_text(), re.MULTILINE):
        copied |= {p.rstrip("/").split("/")[0] for p in m.group(1).split()}
    assert copied == allowed
