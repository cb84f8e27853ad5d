"""``dev/stack``: install and run Baton's local stack (Kafka, Kubernetes control plane, helm, Spark, MinIO),
and install actionlint, the workflow linter, and Prometheus with promtool, the alert rules' checker, that the
tests run.

Every subcommand is idempotent: ``up`` twice is harmless, ``down`` leaves the caches.
"""

from __future__ import annotations

import os
import shlex
import sys
import time

import click

from . import gobuild, kafka, kube, node, objectstore, oidc, paths, ports, procs, spark, tls
from .requirements import MissingTool

COMPONENTS = ("kafka", "kube", "node", "helm", "spark", "s3", "actionlint", "prometheus")


def up_components(components: tuple[str, ...] | list[str], *, fresh: bool = False) -> dict[str, float]:
    """Bring the named components up; returns seconds spent per component.

    ``fresh``: a broker or etcd that is not running starts with empty data (running ones are
    reused as they are)."""
    spent: dict[str, float] = {}
    for comp in COMPONENTS:
        if comp not in components:
            continue
        started = time.monotonic()
        if comp == "kafka":
            kafka.up(fresh=fresh)
        elif comp == "kube":
            kube.up(fresh=fresh)
        elif comp == "node":
            node.up(fresh=fresh)
        elif comp == "helm":
            gobuild.build_helm()
        elif comp == "spark":
            spark.install()
            spark.cluster_up()
        elif comp == "s3":
            objectstore.up(fresh=fresh)
            spark.s3a_install()
        elif comp == "actionlint":
            gobuild.build_actionlint()
        elif comp == "prometheus":
            gobuild.build_promtool()
            gobuild.build_prometheus()  # after promtool: Go's build cache holds most of its packages
        spent[comp] = time.monotonic() - started
    return spent


def env_lines() -> list[str]:
    path = os.pathsep.join([*(str(p) for p in kube.bin_dirs()), "$PATH"])
    return [
        f"export BATON_KAFKA_BOOTSTRAP={kafka.bootstrap()}",
        # what `baton run`, `baton flip` and `baton compact` read when --bootstrap-servers is not given
        f"export BATON_BOOTSTRAP_SERVERS={kafka.bootstrap()}",
        f"export BATON_KAFKA_SCRAM_BOOTSTRAP={kafka.scram_bootstrap()}",
        f"export BATON_KAFKA_MTLS_BOOTSTRAP={kafka.mtls_bootstrap()}",
        f"export BATON_KAFKA_SASL_SSL_BOOTSTRAP={kafka.sasl_ssl_bootstrap()}",
        f"export BATON_KAFKA_OAUTH_BOOTSTRAP={kafka.oauth_bootstrap()}",
        f"export BATON_KAFKA_NODE_BOOTSTRAP={kafka.node_bootstrap()}",
        f"export BATON_KAFKA_NODE_MTLS_BOOTSTRAP={kafka.node_mtls_bootstrap()}",
        f"export BATON_STACK_S3_NODE_ENDPOINT={objectstore.node_endpoint()}",
        f"export BATON_STACK_CA={shlex.quote(str(tls.ca_file()))}",
        f"export BATON_STACK_CLIENT_CERT={shlex.quote(str(tls.stack_client().certificate))}",
        f"export BATON_STACK_CLIENT_KEY={shlex.quote(str(tls.stack_client().key))}",
        f"export BATON_STACK_OIDC_TOKEN_ENDPOINT={oidc.token_endpoint()}",
        f"export KUBECONFIG={shlex.quote(str(kube.kubeconfig()))}",
        f"export BATON_SPARK_CLUSTER={spark.master_url()}",
        f"export BATON_STACK_S3_ENDPOINT={objectstore.endpoint()}",
        f'export PATH="{path}"',
    ]


@click.group()
def main() -> None:
    """Baton's local stack on 127.0.0.1: a Kafka broker (KRaft; plaintext, SCRAM, mutual-TLS,
    SASL_SSL and OAuth listeners, ACLs) with Keycloak as its OIDC server, etcd, kube-apiserver,
    kube-controller-manager, kube-scheduler, kubectl, one node (containerd, kubelet, kube-proxy,
    CoreDNS: `node`), helm, the Spark Kafka connector, a
    standalone Spark cluster (a master, two workers) and MinIO (S3) with Hadoop's S3A jars;
    `actionlint` and `prometheus` install the workflow linter, and Prometheus and promtool, which
    tests start and run with the chart's monitors and alerts."""


@main.command()
@click.argument("components", nargs=-1, type=click.Choice(COMPONENTS))
@click.option(
    "--fresh",
    is_flag=True,
    help="Start a stopped Kafka and etcd with empty data (make test and make demo do); "
    "without it their topics and objects survive down/up.",
)
def up(components: tuple[str, ...], fresh: bool) -> None:
    """Install what is missing and start COMPONENTS (default: all)."""
    started = time.monotonic()
    try:
        spent = up_components(components or COMPONENTS, fresh=fresh)
    except (MissingTool, procs.PortInUse, procs.NotReady, RuntimeError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    detail = ", ".join(f"{k} {v:.1f}s" for k, v in spent.items())
    click.echo(
        f'stack up in {time.monotonic() - started:.1f}s ({detail}); run: eval "$(dev/stack env)"', err=True
    )


@main.command()
def down() -> None:
    """Stop everything the stack started; installs and caches stay."""
    stopped = spark.cluster_down() + node.down() + kube.down()
    if objectstore.down():
        stopped.append("minio")
    if kafka.down():
        stopped.append("kafka")
    click.echo(f"stopped: {', '.join(stopped) or 'nothing was running'}", err=True)


@main.command()
def env() -> None:
    """Print shell lines that point clients at the running stack: eval "$(dev/stack env)"."""
    click.echo("\n".join(env_lines()))


@main.command()
def status() -> None:
    """Show which components run, their pids and where they listen; exit 1 if any is down."""
    rows = [
        (
            "kafka",
            kafka.NAME,
            f"{kafka.bootstrap()} (SCRAM {kafka.scram_bootstrap()}, mTLS {kafka.mtls_bootstrap()}, "
            f"SASL_SSL {kafka.sasl_ssl_bootstrap()}, OAuth {kafka.oauth_bootstrap()})",
        ),
        ("keycloak (OIDC)", oidc.NAME, oidc.issuer()),
        ("etcd", kube.ETCD, f"127.0.0.1:{ports.ETCD_CLIENT}"),
        ("kube-apiserver", kube.APISERVER, kube.server_url()),
        ("kube-controller-manager", kube.KCM, f"127.0.0.1:{ports.CONTROLLER_MANAGER}"),
        ("kube-scheduler", kube.SCHEDULER, f"127.0.0.1:{ports.SCHEDULER}"),
        ("containerd", node.CONTAINERD, str(node.socket())),
        ("coredns (cluster DNS)", node.COREDNS, f"{ports.node_ip()}:53"),
        ("kubelet", node.KUBELET, f"node {node.NAME} at {ports.node_ip()}:{ports.KUBELET}"),
        ("kube-proxy", node.KUBE_PROXY, "iptables mode"),
        ("local-path-provisioner", node.PROVISIONER, f"StorageClass {node.STORAGE_CLASS}"),
        ("spark-master", "spark-master", spark.master_url()),
        ("spark-worker-1", "spark-worker-1", "1 core, 1 GiB"),
        ("spark-worker-2", "spark-worker-2", "1 core, 1 GiB"),
        ("minio", objectstore.NAME, f"{objectstore.endpoint()} bucket {objectstore.BUCKET}"),
    ]
    down_count = 0
    for label, name, where in rows:
        pid = procs.running_pid(name)
        down_count += pid is None
        state = f"running (pid {pid})" if pid else "stopped"
        click.echo(f"{label:<25} {state:<20} {where}   log: {procs.log_file(name)}")
    click.echo(f"{'cache':<25} {paths.CACHE}")
    sys.exit(1 if down_count else 0)


if __name__ == "__main__":
    main()
