"""The stack's real node (``dev/stack up node``): Pods under a kubelet and containerd, with Pod IPs,
Services, cluster DNS, probes, restarts and claims that behave as Kubernetes says.

Every Pod here runs the runtime image built from the Dockerfile and tolerates the node's
taint; nothing stands in for the kubelet."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
from typing import Any

import pytest
from batondev import node as node_mod

from baton.testing import wait_for
from tests.conftest import KubectlFn, Node

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
