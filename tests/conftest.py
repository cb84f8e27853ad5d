"""Session fixtures that bring up (or reuse) the real local stack and isolate each test.

Tests marked ``integration`` or ``e2e`` talk to a real Kafka broker and a real
kube-apiserver on 127.0.0.1, started by ``dev/stack`` (dev/batondev). Each test gets its
own topics and namespaces, named after the test, and they are deleted afterwards.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from batondev import gobuild, kafka, ports, stack
from batondev import kube as kube_mod
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # type: ignore[attr-defined]

from tests.support.event_time import expiring, retention_ms
from tests.support.kube_api import KubectlFn, crd_flock, kubectl_runner

# `dev/test` runs three pytest-xdist workers with `--dist loadgroup`. Tests of the stack's node or
# the images all go to one of them, one after the other (group "cluster"): the node runs every
# namespace's Pods, and an image build would only slow the other workers. Tests of the Kubernetes
# API alone (their Pods never run: the node's taint keeps them off it, and the test plays the
# kubelet; each operator watches its test's namespace) go to another (group "kube"); until they
# had a group of their own, the cluster group was the run's longest (~1,750 s of a 1,770 s
# loaded run). Tests of the standalone Spark cluster go to a third, one after the other (its two
# one-core workers serve one application at a time). Kafka-only tests spread over all workers:
# each has its own topics and groups, and most of their time is waiting on the broker.
# CRDs are cluster-wide: the tests that change one (the StreamApp CRD's two, and the one that
# deletes the Spark Operator's ScheduledSparkApplication CRD, whose deletion stops every
# operator watching that kind) take `crd_lock` (exclusive, across the workers), and every other
# test of the Kubernetes API holds it shared (`_crd_shared`), so none runs against a CRD
# another test is changing. Those that change one run in the cluster group, one after the other
# with its tests, each of which holds the lock for minutes: in the kube group they waited for
# them, that worker idle (~270 s of a 1,820 s run, 2026-11-30).
# The roots only: `kube`, `kubectl`, `namespace` and `operator` all depend on `kube_stack`, and
# an item's fixturenames hold the whole closure.
CLUSTER_FIXTURES = frozenset({"node", "runtime_image", "compactor_image"})
KUBE_FIXTURES = frozenset({"kube_stack"})
# A test of the Spark cluster that also writes StreamApps (the audit's status) is in the Spark
# group, not the cluster's: two groups' tests would otherwise run two applications on the Spark
# cluster at once. It holds the lock shared, as every test of the Kubernetes API does.
SPARK_CLUSTER_FIXTURES = frozenset({"spark"})


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the group into the node id
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if SPARK_CLUSTER_FIXTURES & fixtures:
            item.add_marker(pytest.mark.xdist_group("spark-cluster"))
        elif CLUSTER_FIXTURES & fixtures or "crd_lock" in fixtures:
            item.add_marker(pytest.mark.xdist_group("cluster"))
        elif KUBE_FIXTURES & fixtures:
            item.add_marker(pytest.mark.xdist_group("kube"))


@pytest.fixture
def crd_lock() -> Iterator[None]:
    """Held by a test that changes a cluster-wide CRD (the StreamApp one, or deletes the Spark
    Operator's ScheduledSparkApplication one), or checks cluster-wide state
    other releases would change (the aggregated view and edit roles), alone: across
    pytest-xdist's worker processes, no other test of the Kubernetes API runs meanwhile
    (``_crd_shared``)."""
    with crd_flock(fcntl.LOCK_EX):
        yield


@pytest.fixture(autouse=True)
def _crd_shared(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every other test of the Kubernetes API holds the CRD lock shared: tests of the "kube" and
    "cluster" groups run side by side, never beside one that changes the CRD."""
    names = set(request.fixturenames)
    if "crd_lock" in names or not names & {"kube_stack", *CLUSTER_FIXTURES}:
        yield
        return
    with crd_flock(fcntl.LOCK_SH):
        yield


def _up(*components: str) -> None:
    try:
        stack.up_components(list(components))
    except Exception as exc:  # the message names the missing tool or busy port
        pytest.fail(f"the local stack could not start {components}: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """Bootstrap servers of the real broker (started by dev/stack if it is not running)."""
    _up("kafka")
    os.environ["BATON_KAFKA_BOOTSTRAP"] = kafka.bootstrap()
    return kafka.bootstrap()


@pytest.fixture(scope="session")
def kafka_admin(kafka_bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A short name unique to this test run: test name + random suffix, valid for Kafka and k8s."""
    base = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:30].strip("-")
    return f"{base}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def new_topic(kafka_admin: AdminClient, unique_name: str) -> Iterator[Callable[..., str]]:
    """Factory: ``new_topic(partitions=8, config=None, name=None)`` creates a topic, deleted after the test.

    Afterwards it fails the test if a topic that ages out holds records older than the
    broker's retention (see ``tests/support/event_time.py``): such data disappears only
    when the broker's retention check happens to run during the test."""
    created: dict[str, tuple[int, dict[str, str]]] = {}  # topic -> (partitions, config), in creation order

    def make(partitions: int = 8, config: dict[str, str] | None = None, name: str | None = None) -> str:
        topic = name or f"{unique_name}-t{len(created)}"
        futures = kafka_admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})]
        )
        futures[topic].result(30)
        created[topic] = partitions, dict(config or {})
        return topic

    yield make
    now = int(time.time() * 1000)
    old = [
        where
        for topic, (partitions, config) in created.items()
        if (retention := retention_ms(config)) is not None
        for where in expiring(_newest(kafka_admin, topic, partitions), now, retention)
    ]
    if created:
        for fut in kafka_admin.delete_topics(list(created)).values():
            with contextlib.suppress(KafkaException):  # already deleted by the test itself
                fut.result(30)
    if old:
        pytest.fail(
            f"test data older than its topic's retention in {', '.join(old[:4])}: the broker "
            "deletes it at its next retention check, so a test passes or fails on when that check runs. "
            "Date event times from tests.support.event_time.event_time_origin(), not from 1970.",
            pytrace=False,
        )


def _newest(admin: AdminClient, topic: str, partitions: int) -> list[tuple[str, int, int]]:
    """(topic, partition, newest record timestamp) for every partition of ``topic``."""
    specs = {TopicPartition(topic, p): OffsetSpec.max_timestamp() for p in range(partitions)}  # type: ignore[no-untyped-call]
    out = []
    for tp, fut in admin.list_offsets(specs, request_timeout=30).items():
        with contextlib.suppress(KafkaException):  # deleted by the test itself
            out.append((tp.topic, tp.partition, fut.result(30).timestamp))
    return out


@dataclass(frozen=True)
class Kube:
    kubeconfig: Path
    kubectl: Path
    helm: Path
    server: str


@pytest.fixture(scope="session")
def kube_stack() -> Kube:
    """The real kube-apiserver (+ controller-manager, scheduler) and its admin kubeconfig."""
    _up("kube", "helm")
    os.environ["KUBECONFIG"] = str(kube_mod.kubeconfig())
    bins = os.pathsep.join(str(p) for p in kube_mod.bin_dirs())
    if bins not in os.environ.get("PATH", ""):
        os.environ["PATH"] = bins + os.pathsep + os.environ.get("PATH", "")
    return Kube(
        kubeconfig=kube_mod.kubeconfig(),
        kubectl=gobuild.kube_dir() / "bin" / "kubectl",
        helm=gobuild.helm_dir() / "bin" / "helm",
        server=kube_mod.server_url(),
    )


# `kube` is the short name other tests use
@pytest.fixture(scope="session")
def kube(kube_stack: Kube) -> Kube:
    return kube_stack


@pytest.fixture
def kubectl(kube: Kube) -> KubectlFn:
    """Run the real kubectl: ``kubectl("get", "pods", "-n", ns, check=True, input=None)``."""
    return kubectl_runner(kube.kubectl, kube.kubeconfig)


@pytest.fixture
def namespace(kubectl: KubectlFn, unique_name: str) -> Iterator[str]:
    """A fresh namespace for this test, deleted afterwards (without waiting for finalizers)."""
    ns = unique_name[:50].strip("-")
    kubectl("create", "namespace", ns)
    yield ns
    kubectl("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture
def operator(kube: Kube, kubectl: KubectlFn, namespace: str, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``operator(*args)`` starts ``baton operator`` watching the test's namespace (CRDs installed);
    at the end the apps are deleted while one still runs, so no finalizer outlives the test."""
    from tests.support.operator import install_crds, operators

    install_crds(kubectl)
    yield from operators(
        tmp_path,
        namespace,
        kube.kubeconfig,
        lambda: kubectl("delete", "sapp", "--all", "-n", namespace, "--timeout=30s", check=False),
    )


def _image(target: str) -> str:
    """The Dockerfile's ``target`` built here (dev/image: cached by its inputs, so once per tree)."""
    from batondev import debtools, image
    from batondev.requirements import MissingTool

    try:
        debtools.ensure("runc")  # the tests that use the image run it under runc
        return image.build(target)
    except MissingTool as exc:  # names the tool and the install step
        pytest.fail(f"cannot build the {target} image: {exc}", pytrace=False)
    except RuntimeError as exc:
        pytest.fail(f"building the {target} image failed (log: {image.LOG}):\n{exc}", pytrace=False)


@pytest.fixture(scope="session")
def runtime_image() -> str:
    """The local name of the ``runtime`` image of this tree (``localhost/baton:<inputs hash>``)."""
    return _image("runtime")


@pytest.fixture(scope="session")
def compactor_image() -> str:
    """The local name of the ``compactor`` image of this tree."""
    return _image("compactor")


@dataclass(frozen=True)
class Node:
    """The stack's one real node (``dev/stack up node``): where Pods that tolerate its taint run."""

    name: str
    ip: str
    kafka_bootstrap: str  # the broker as Pods reach it
    toleration: dict[str, str]


@pytest.fixture(scope="session")
def node(kube_stack: Kube) -> Node:
    """containerd, kubelet, kube-proxy and CoreDNS, registered to the stack's API server."""
    from batondev import node as node_mod

    _up("kafka", "kube", "node")
    return Node(
        name=node_mod.NAME,
        ip=ports.node_ip(),
        kafka_bootstrap=kafka.node_bootstrap(),
        toleration=node_mod.TOLERATION,
    )


@pytest.fixture(scope="session")
def node_runtime_image(node: Node, runtime_image: str) -> str:
    """The runtime image, imported into the node's containerd (nothing here pulls from a registry)."""
    from batondev import node as node_mod

    node_mod.load_image(runtime_image)
    return runtime_image


@pytest.fixture(scope="session")
def node_spark_operator_image(node: Node, compactor_image: str) -> str:
    """The Spark Operator's controller image (the compactor image and its binary), on the node."""
    from batondev import node as node_mod
    from batondev import spark_operator

    image = spark_operator.image(compactor_image)
    node_mod.load_image(image)
    return image


@pytest.fixture(scope="session")
def node_compactor_image(node: Node, compactor_image: str) -> str:
    """The compactor image, imported into the node's containerd."""
    from batondev import node as node_mod

    node_mod.load_image(compactor_image)
    return compactor_image


# Where a run's time went, by xdist group ("free": Kafka-only tests spread over the workers):
# the sum of each phase's durations, printed at the end. CI keeps the log's tail only, and the
# warm run's 25-minute target is judged there (docs/benchmarks.md, "The image build and the
# test suite's own time"); a setup's time is mostly fixtures starting things or waiting for
# the CRD lock.
_PHASE_SECONDS: dict[tuple[str, str], float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    group = report.nodeid.rpartition("@")[2] if "@" in report.nodeid else "free"
    key = (group, report.when)
    _PHASE_SECONDS[key] = _PHASE_SECONDS.get(key, 0.0) + report.duration


@pytest.hookimpl(trylast=True)  # after the slowest durations: nearer the log's tail
def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _PHASE_SECONDS:
        return
    groups = sorted(
        {g for g, _ in _PHASE_SECONDS},
        key=lambda g: -sum(s for (h, _), s in _PHASE_SECONDS.items() if h == g),
    )
    terminalreporter.write_sep("=", "test time by group (s)")
    terminalreporter.write_line(f"{'group':<16}{'setup':>9}{'call':>9}{'teardown':>10}{'total':>9}")
    for g in groups:
        setup, call, teardown = (_PHASE_SECONDS.get((g, w), 0.0) for w in ("setup", "call", "teardown"))
        total = setup + call + teardown
        terminalreporter.write_line(f"{g:<16}{setup:>9.0f}{call:>9.0f}{teardown:>10.0f}{total:>9.0f}")
    whole = sum(_PHASE_SECONDS.values())
    terminalreporter.write_line(f"{'all':<16}{'':>9}{'':>9}{'':>10}{whole:>9.0f}")
