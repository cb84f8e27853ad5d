"""The stack's real node (``dev/stack up node``): Pods under a kubelet and containerd, with Pod IPs,
Services, cluster DNS, probes, restarts and claims that behave as Kubernetes says.

Every Pod here runs the runtime image built from the Dockerfile and tolerates the node's
taint; nothing stands in for the kubelet."""

from __future__ import annotations

import collections
import ipaddress
import json
import os
import signal
from collections.abc import Callable
from typing import Any

import pytest
from batondev import e2e
from batondev import node as node_mod

from baton.testing import produce, read_all, wait_for
from tests.conftest import Node
from tests.support.kube_api import KubectlFn

pytestmark = pytest.mark.e2e

SERVER = (
    "import http.server, sys\n"
    "print('serving', flush=True)\n"
    "http.server.HTTPServer(('', 8080), http.server.SimpleHTTPRequestHandler).serve_forever()\n"
)
# appends one line per start to the claim, then serves: the file counts the starts the volume saw
JOURNAL = (
    "import os, time, http.server\n"
    "with open('/data/starts', 'a') as f: f.write(f'{time.time()}\\n')\n"
    "os.chdir('/data')\n"
    "http.server.HTTPServer(('', 8080), http.server.SimpleHTTPRequestHandler).serve_forever()\n"
)


def _container(image: str, code: str) -> dict[str, Any]:
    return {
        "name": "main",
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["python", "-c", code],
        "ports": [{"containerPort": 8080, "name": "http"}],
        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
        "livenessProbe": {"exec": {"command": ["python", "-c", "pass"]}, "periodSeconds": 5},
    }


def _pod_spec(node: Node, image: str, code: str) -> dict[str, Any]:
    return {
        "tolerations": [node.toleration],
        "terminationGracePeriodSeconds": 2,
        "containers": [_container(image, code)],
    }


def _get(kubectl: KubectlFn, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(kubectl("get", *args, "-o", "json").stdout)
    return out


def _exec(kubectl: KubectlFn, namespace: str, pod: str, code: str) -> str:
    return kubectl("exec", "-n", namespace, pod, "--", "python", "-c", code).stdout.strip()


def test_a_pod_runs_under_the_kubelet_with_probes_logs_exec_dns_and_kafka(
    node: Node, node_runtime_image: str, kubectl: KubectlFn, namespace: str
) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": _pod_spec(node, node_runtime_image, SERVER),
    }
    kubectl("apply", "-f", "-", input=json.dumps(body))
    kubectl("wait", "--for=condition=Ready", "pod/web", "-n", namespace, "--timeout=120s")
    pod = _get(kubectl, "pod", "web", "-n", namespace)
    status = pod["status"]["containerStatuses"][0]
    assert status["containerID"].startswith("containerd://"), status
    assert pod["spec"]["nodeName"] == node.name
    assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(node_mod.POD_CIDR)

    assert "serving" in kubectl("logs", "-n", namespace, "web").stdout
    assert _exec(kubectl, namespace, "web", "print(6 * 7)") == "42"
    # cluster DNS answers for Services, and the API server and Kafka are reachable from a Pod
    api = _exec(
        kubectl,
        namespace,
        "web",
        "import socket; print(socket.gethostbyname('kubernetes.default.svc.cluster.local'))",
    )
    assert api == "10.0.0.1"
    host, port = node.kafka_bootstrap.split(":")
    reached = _exec(
        kubectl,
        namespace,
        "web",
        f"import socket; socket.create_connection(('{host}', {port}), 5); print('ok')",
    )
    assert reached == "ok"


def test_a_statefulset_keeps_its_claim_through_a_container_kill_and_a_pod_delete(
    node: Node, node_runtime_image: str, kubectl: KubectlFn, namespace: str
) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "journal", "namespace": namespace},
        "spec": {"clusterIP": "None", "selector": {"app": "journal"}, "ports": [{"port": 8080}]},
    }
    spec = _pod_spec(node, node_runtime_image, JOURNAL)
    spec["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "journal", "namespace": namespace},
        "spec": {
            "serviceName": "journal",
            "replicas": 1,
            "selector": {"matchLabels": {"app": "journal"}},
            "template": {"metadata": {"labels": {"app": "journal"}}, "spec": spec},
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "64Mi"}},
                    },
                }
            ],
        },
    }
    kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [service, sts]})
    )
    wait_for(
        "journal-0 to exist",
        lambda: kubectl("get", "pod", "journal-0", "-n", namespace, check=False).returncode == 0,
        60,
    )
    kubectl("wait", "--for=condition=Ready", "pod/journal-0", "-n", namespace, "--timeout=120s")
    claim = _get(kubectl, "pvc", "data-journal-0", "-n", namespace)
    assert claim["status"]["phase"] == "Bound"
    assert claim["spec"]["storageClassName"] == node_mod.STORAGE_CLASS

    def starts() -> int:
        return len(_exec(kubectl, namespace, "journal-0", "print(open('/data/starts').read())").splitlines())

    assert starts() == 1
    pod = _get(kubectl, "pod", "journal-0", "-n", namespace)
    ip = pod["status"]["podIP"]
    # the Pod's own DNS name through the headless Service
    name = f"journal-0.journal.{namespace}.svc.cluster.local"
    assert (
        _exec(kubectl, namespace, "journal-0", f"import socket; print(socket.gethostbyname('{name}'))") == ip
    )

    # a container kill, as a node sees one: SIGKILL to the container's process from the host
    cid = pod["status"]["containerStatuses"][0]["containerID"]
    os.kill(node_mod.container_pid(cid), signal.SIGKILL)

    def restarted() -> bool:
        status = _get(kubectl, "pod", "journal-0", "-n", namespace)["status"]
        container = status["containerStatuses"][0]
        return bool(container["restartCount"] == 1 and container.get("ready"))

    wait_for("the killed container to restart and be ready", restarted, 120)
    assert starts() == 2  # same volume, same data

    # a Pod deleted and placed again keeps its claim and its data
    kubectl("delete", "pod", "journal-0", "-n", namespace, "--wait=true", "--timeout=60s")
    wait_for(
        "journal-0 again",
        lambda: kubectl("get", "pod", "journal-0", "-n", namespace, check=False).returncode == 0,
        60,
    )
    kubectl("wait", "--for=condition=Ready", "pod/journal-0", "-n", namespace, "--timeout=120s")
    again = _get(kubectl, "pvc", "data-journal-0", "-n", namespace)
    assert again["metadata"]["uid"] == claim["metadata"]["uid"]
    assert starts() == 3


def _metric(text: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (Prometheus text format)."""
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def test_a_worker_resumes_from_its_volume_after_a_container_kill(
    *,
    node: Node,
    node_runtime_image: str,
    kubectl: KubectlFn,
    namespace: str,
    operator: Callable[..., Any],
    new_topic: Callable[..., str],
) -> None:
    """SIGKILL of a worker's container: the kubelet restarts it on the same claim, and its tasks
    resume from the RocksDB folders and checkpoints there, replaying only the changelog's tail."""
    clicks, counts = new_topic(partitions=4), new_topic(partitions=4)
    body = e2e.click_counter_app(
        name="clicks",
        namespace=namespace,
        bootstrap=node.kafka_bootstrap,
        clicks_topic=clicks,
        counts_topic=counts,
        application_id=f"resume-{namespace[-6:]}",
        replicas=1,
        standby_replicas=0,
    )
    body["spec"]["image"] = node_runtime_image
    body["spec"]["podTemplate"]["tolerations"] = [node.toleration]
    operator()
    kubectl("apply", "-f", "-", input=json.dumps(body))
    e2e.wait_app_ready(e2e.Kubectl.local(), namespace, "clicks", 300)
    sent = collections.Counter[str]()
    users = [f"user-{i}" for i in range(40)]
    records = []
    for i in range(4000):
        user = users[i % len(users)]
        sent[user] += 1
        records.append((user.encode(), json.dumps({"user_id": user, "timestamp": i}).encode()))
    produce(node.kafka_bootstrap, clicks, records)

    def counted() -> bool:
        return e2e.latest_counts((r.key, r.value) for r in read_all(node.kafka_bootstrap, counts)) == dict(
            sent
        )

    wait_for("the counts", counted, 180, every=1)
    pod = "clicks-blue-0"
    before = _get(kubectl, "pod", pod, "-n", namespace)
    claim = _get(kubectl, "pvc", f"state-{pod}", "-n", namespace)["metadata"]["uid"]
    cid = before["status"]["containerStatuses"][0]["containerID"]
    os.kill(node_mod.container_pid(cid), signal.SIGKILL)

    def restarted_and_ready() -> bool:
        status = _get(kubectl, "pod", pod, "-n", namespace)["status"]["containerStatuses"][0]
        return bool(status["containerID"] != cid and status.get("ready"))

    wait_for("the killed worker to run again and be ready", restarted_and_ready, 180)
    assert _get(kubectl, "pvc", f"state-{pod}", "-n", namespace)["metadata"]["uid"] == claim
    metrics = _exec(
        kubectl,
        namespace,
        pod,
        "import urllib.request; print(urllib.request.urlopen('http://localhost:8080/metrics').read().decode())",
    )
    resumed = _metric(metrics, "baton_task_starts_total", kind="resumed")
    scratch = _metric(metrics, "baton_task_starts_total", kind="restored")
    replayed = _metric(metrics, "baton_restored_records_total")
    assert (resumed, scratch) == (4, 0), metrics
    # the changelog holds one record per count update (4,000): the tail is what came after the
    # last checkpoint, far less than the whole
    assert replayed < 1000, f"restored {replayed} changelog records after the kill"
    print(
        f"resumed {resumed:.0f} tasks, restored {scratch:.0f} from scratch, replayed {replayed:.0f} records"
    )

    # interactive queries by the Pod's DNS name under the color's headless Service
    # (BATON_APPLICATION_SERVER, as the operator sets it), resolved by the cluster DNS
    server = f"{pod}.clicks-blue.{namespace}.svc"
    answer = _exec(
        kubectl,
        namespace,
        pod,
        "import urllib.request; "
        f"print(urllib.request.urlopen('http://{server}:8080/stores/user-counts-store?key=user-7').read().decode())",
    )
    found = json.loads(answer)
    assert (found["key"], found["value"]) == ("user-7", sent["user-7"]), answer

    # and the counts go on from where they were, exactly
    more = [(u.encode(), json.dumps({"user_id": u, "timestamp": 5000}).encode()) for u in users]
    sent.update(users)
    produce(node.kafka_bootstrap, clicks, more)
    wait_for("the counts after the kill", counted, 180, every=1)
