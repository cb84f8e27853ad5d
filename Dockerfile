# syntax=docker/dockerfile:1.7
#
# Baton images. One image runs both the worker (`baton run`) and the operator
# (`baton operator`); users build their app FROM it and add their topology:
#
#   FROM ghcr.io/baton-dev/baton:0.1.0
#   COPY myapp/ /app/myapp/
#   # StreamApp spec.topology: myapp.topology:topology
#
# Targets:
#   docker build -t baton .                          # `runtime` (the default, last-but-one stage)
#   docker build --target compactor -t baton-compactor .   # + a JRE, pyspark and the Kafka connector
#
# Pinned and reproducible: the base images by digest (the tag in the comment above each);
# the Python dependencies from hashed lockfiles (requirements/*.lock, `dev/image lock`),
# then the project itself with --no-deps; the JRE at an exact Debian version (JRE_VERSION).
# `dev/image build` builds both targets here with buildah from local stand-ins of the two
# bases (--build-arg PYTHON_IMAGE=..., MAVEN_IMAGE=...). Everything runs as UID 10001,
# the UID the operator's Pods declare (baton/images.py RUN_AS_USER), with a
# read-only root filesystem: nothing below writes outside /tmp and /var/lib/baton.

# The digests are the ones public projects pin for these tags (the tags are re-pushed: check
# with `docker buildx imagetools inspect <tag>` when bumping, and pin the index digest).
# python:3.11.13-slim-bookworm
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm@sha256:86adf8dbadc3d6e82ee5dd2c74bec2e1c2467cdad47886280501df722372d2e1
# maven:3.9.11-eclipse-temurin-17
ARG MAVEN_IMAGE=maven:3.9.11-eclipse-temurin-17@sha256:e4a7ace3dc0d645ed97f8d9ad0b0d3f0b14fa8d150138f27f116d7105a639b82

# ---------------------------------------------------------------- deps: the locked dependencies into a venv
# A layer of its own that changes only with the lockfile, so editing baton/ rebuilds none of it.
FROM ${PYTHON_IMAGE} AS deps
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
# rocksdict and confluent-kafka ship manylinux wheels: no compiler is needed. The lockfile
# also pins the build backend (setuptools, wheel), so nothing below resolves anything.
RUN python -m venv /opt/baton
COPY requirements/image.lock /tmp/image.lock
RUN /opt/baton/bin/pip install --require-hashes --no-deps -r /tmp/image.lock

# ---------------------------------------------------------------- compactor-deps: + the [compactor] extra (pyspark)
FROM deps AS compactor-deps
COPY requirements/compactor.lock /tmp/compactor.lock
RUN /opt/baton/bin/pip install --require-hashes --no-deps --no-build-isolation -r /tmp/compactor.lock

# ---------------------------------------------------------------- build: the project alone, no dependency resolution
# Installed under /staging (pip --root), so the targets copy the locked venv (a layer that
# changes with the lockfile only) and then this small tree: a source edit rebuilds megabytes.
FROM deps AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY baton/ baton/
# /opt/baton/compact.py: the job as a spark-submit script (runner SparkOperator's mainApplicationFile).
# A file of its own, not a link to baton/compactor/cli.py: Python puts a script's real folder first
# on sys.path, where baton/compactor/kafka.py would stand in for the kafka-python client.
RUN /opt/baton/bin/pip install --no-deps --no-build-isolation --root /staging . \
 && site="$(/opt/baton/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
 && test -f "/staging$site/baton/compactor/cli.py" \
 && printf 'from baton.compactor.cli import compact\n\ncompact()\n' > /staging/opt/baton/compact.py

# ---------------------------------------------------------------- image-base: what both targets share
FROM ${PYTHON_IMAGE} AS image-base
LABEL org.opencontainers.image.title="baton" \
      org.opencontainers.image.description="Stateful stream applications on Kafka in Python: worker and operator" \
      org.opencontainers.image.source="https://github.com/baton-dev/baton" \
      org.opencontainers.image.licenses="Apache-2.0"
# No .pyc writes (the root filesystem is read-only), unbuffered logs, the venv first on PATH,
# and /app (the user's topology modules, and the bundled examples) importable.
ENV PATH=/opt/baton/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/app \
    BATON_STATE_DIR=/var/lib/baton \
    HOME=/tmp
RUN groupadd --system --gid 10001 baton \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin baton \
 && mkdir -p /var/lib/baton /app \
 && chown 10001:10001 /var/lib/baton

# ---------------------------------------------------------------- runtime: worker + operator
FROM image-base AS runtime
COPY --from=deps /opt/baton /opt/baton
COPY --from=build /staging/opt/baton /opt/baton
COPY --chown=root:root examples/ /app/examples/
WORKDIR /app
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["baton"]
CMD ["--help"]

# ---------------------------------------------------------------- the Spark Kafka connector jars
FROM ${MAVEN_IMAGE} AS spark-jars
WORKDIR /jars
# Same resolution as dev/batondev/spark.py: the connector for the pinned pyspark (4.0.0, Scala 2.13),
# keeping only what pyspark does not ship: these jars go first on the class path, where an older
# scala-library, slf4j-api 1.x (Spark's logging silenced) or snappy-java of the connector's
# dependencies would shadow Spark's own (tests/integration/test_compactor_job.py checks the list).
RUN printf '%s\n' \
  '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>' \
  '<groupId>dev.baton</groupId><artifactId>spark-kafka-runtime</artifactId><version>1</version><packaging>pom</packaging>' \
  '<dependencies><dependency><groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_2.13</artifactId><version>4.0.0</version></dependency></dependencies>' \
  '</project>' > pom.xml \
 && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=/jars/out \
      -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2

# ---------------------------------------------------------------- Hadoop's S3A for s3a:// snapshot stores
FROM ${MAVEN_IMAGE} AS s3a-jars
WORKDIR /jars
# Same resolution as dev/batondev/spark.py: hadoop-aws of pyspark 4.0.0's Hadoop (3.4.1) and the AWS SDK bundle.
RUN printf '%s\n' \
  '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>' \
  '<groupId>dev.baton</groupId><artifactId>spark-s3a-runtime</artifactId><version>1</version><packaging>pom</packaging>' \
  '<dependencies><dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-aws</artifactId><version>3.4.1</version></dependency></dependencies>' \
  '</project>' > pom.xml \
 && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=/jars/out

# ---------------------------------------------------------------- compactor: runtime + JRE + pyspark
FROM image-base AS compactor
# The JRE at an exact Debian version (bookworm-security's current one when pinned). To bump:
# `dev/image jre-version` (apt-cache policy's Candidate in the base), set it here, rebuild;
# an old pin fails loudly once Debian's archive drops that version.
ARG JRE_VERSION=17.0.21.1+2-1~deb12u1
RUN apt-get update \
 && apt-get install -y --no-install-recommends "openjdk-17-jre-headless=${JRE_VERSION}" \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /opt/java
COPY --from=compactor-deps /opt/baton /opt/baton
COPY --from=spark-jars /jars/out/ /opt/baton/spark-jars/
COPY --from=s3a-jars /jars/out/ /opt/baton/s3a-jars/
# The connector and S3A jars on the class path of every JVM Spark starts from this image: the
# driver (spark-submit, or pyspark under `baton compact`, reads SPARK_CONF_DIR) and executors on
# Kubernetes (Spark passes spark.executor.extraClassPath to their Pods, and the entry point puts
# it first). extraClassPath is prepended, so Spark's own jars are named again before S3A's: the
# AWS SDK bundle carries an older netty, which ahead of Spark's broke its Kubernetes client.
RUN spark_home="$(/opt/baton/bin/python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" \
 && classpath="/opt/baton/spark-jars/*:${spark_home}/jars/*:/opt/baton/s3a-jars/*" \
 && mkdir -p /opt/baton/spark-conf \
 && printf 'spark.driver.extraClassPath %s\nspark.executor.extraClassPath %s\n' "$classpath" "$classpath" \
  > /opt/baton/spark-conf/spark-defaults.conf
# the project last: a source edit changes only this layer and the ones below
COPY --from=build /staging/opt/baton /opt/baton
COPY --chown=root:root examples/ /app/examples/
# Spark 4 creates its session's artifact directory relative to the working directory: with a
# read-only root that must be the writable /tmp (the Job's emptyDir), not /app.
WORKDIR /tmp
ENV JAVA_HOME=/opt/java \
    SPARK_CONF_DIR=/opt/baton/spark-conf \
    BATON_SPARK_CONF_DIR=/opt/baton/spark-conf \
    SPARK_LOCAL_DIRS=/tmp
USER 10001:10001
# `baton compact ARGS`, or the executor (and cluster-mode driver) Pods Spark's Kubernetes
# scheduler starts from this image with "executor"/"driver" (baton/compactor/entrypoint.py)
ENTRYPOINT ["python", "-m", "baton.compactor.entrypoint"]
CMD ["--help"]

# The default target is the worker/operator image.
FROM runtime
