"""Resolve jars with Maven from Maven Central only.

Some poms (Spark's parent) declare extra repositories. Where those are unreachable, Maven
fails on them instead of falling back to Central, so a settings file mirrors every
repository except Central to an empty local folder: lookups there simply find nothing and
Maven moves on to Central.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from . import paths
from .requirements import need, run

SETTINGS = """<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">
  <localRepository>{local}</localRepository>
  <mirrors>
    <mirror>
      <id>central-only</id>
      <mirrorOf>*,!central</mirrorOf>
      <url>{empty}</url>
    </mirror>
  </mirrors>
</settings>
"""


def _mvn(work: Path, goal: list[str], log_name: str) -> None:
    """Run Maven in ``work`` with the Central-only settings and the cache's local repository."""
    (work / "empty").mkdir(exist_ok=True)
    (work / "settings.xml").write_text(
        SETTINGS.format(local=paths.CACHE / "m2", empty=(work / "empty").as_uri())
    )
    run(
        ["mvn", "-B", "-q", "-s", str(work / "settings.xml"), *goal],
        log=str(paths.CACHE / log_name),
        cwd=str(work),
    )


def copy_dependencies(pom: str, dest: Path, log_name: str) -> None:
    """Resolve ``pom``'s runtime dependencies and copy the jars into ``dest`` (replaced whole)."""
    need("java")
    need("mvn")
    with tempfile.TemporaryDirectory(prefix="baton-mvn-") as tmpd:
        work = Path(tmpd)
        (work / "pom.xml").write_text(pom)
        out = work / "jars"
        goal = ["-f", str(work / "pom.xml"), "dependency:copy-dependencies", f"-DoutputDirectory={out}"]
        _mvn(work, [*goal, "-DincludeScope=runtime"], log_name)
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(out, dest)


def copy_artifact(coordinates: str, dest: Path, log_name: str) -> Path:
    """Resolve one artifact (``group:artifact:version[:packaging]``) and copy it into ``dest``."""
    need("java")
    need("mvn")
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="baton-mvn-") as tmpd:
        _mvn(
            Path(tmpd),
            ["dependency:copy", f"-Dartifact={coordinates}", f"-DoutputDirectory={dest}"],
            log_name,
        )
    return dest
