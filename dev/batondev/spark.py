"""The spark-sql-kafka connector jars that match the installed pyspark.

Spark resolves ``--packages`` through Ivy at run time, which a test should not depend on;
instead Maven copies the connector and its runtime dependencies once per pyspark version
into ``~/.cache/baton/spark-kafka-<version>/jars``, and the compactor passes them as
``spark.jars``.
"""

from __future__ import annotations

from pathlib import Path

from . import maven, paths

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
