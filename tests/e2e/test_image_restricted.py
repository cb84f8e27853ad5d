"""The runtime image on the stack's node, in a namespace that enforces Pod Security
"restricted": the worker Pods the operator makes are admitted, start from the image built
from the Dockerfile (dev/image) under containerd and runc as UID 10001 with a read-only root filesystem,
no capabilities and no new privileges, write their state only to their volume, and become
Ready and count. A missing file in the image, a wrong entrypoint, or a write outside /tmp
and /var/lib/baton fails here rather than on a user's cluster.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from baton.testing import produce, wait_for
from tests.conftest import Node
from tests.support.deploy import USERS, counts
from tests.support.operator import KubectlFn, apply, example_manifest, get_json, install_crds, start_operator

pytestmark = pytest.mark.e2e

PSA = "pod-security.kubernetes.io"


def inside(kubectl: KubectlFn, namespace: str, pod: str, *command: str) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in a running container (``kubectl exec``), as its own user."""
    return kubectl("exec", "-n", namespace, pod, "--", *command, check=False)


def test_runtime_image_runs_restricted_read_only_and_non_root(  # noqa: PLR0917 (fixtures)
    node: Node,
    node_runtime_image: str,
    kube: Any,
    kubectl: KubectlFn,
    namespace: str,
    kafka_bootstrap: str,
    new_topic: Any,
    unique_name: str,
    tmp_path: Path,
) -> None:
    install_crds(kubectl)
    kubectl("label", "namespace", namespace, f"{PSA}/enforce=restricted", f"{PSA}/enforce-version=latest")
    clicks_topic, counts_topic = new_topic(partitions=2), new_topic(partitions=2)
    manifest = example_manifest(
        namespace,
        image=node_runtime_image,
        kafka={"bootstrapServers": node.kafka_bootstrap},
        applicationId=unique_name,
        replicas=1,
        standbyReplicas=0,
        resources={},
        state={"store": "rocksdb", "size": "256Mi"},
        upgrade={"strategy": "Rolling"},
        podTemplate={
            "env": [
                {"name": "CLICKS_TOPIC", "value": clicks_topic},
                {"name": "COUNTS_TOPIC", "value": counts_topic},
            ],
            "tolerations": [node.toleration],
        },
    )
    operator = start_operator(tmp_path, namespace, kube.kubeconfig, "operator")
    try:
        apply(kubectl, manifest)
        kubectl("wait", "--for=condition=Ready", "sapp/click-counter", "-n", namespace, "--timeout=180s")
        pod = get_json(kubectl, "pod", "click-counter-blue-0", "-n", namespace)
        (container,) = pod["spec"]["containers"]
        assert container["image"] == node_runtime_image
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] is True and status["restartCount"] == 0, status

        assert status["containerID"].startswith("containerd://"), status
        pod_name = "click-counter-blue-0"
        ident = inside(kubectl, namespace, pod_name, "id", "-u")
        assert ident.stdout.strip() == "10001", ident
        written = inside(kubectl, namespace, pod_name, "touch", "/opt/baton/x")
        assert written.returncode != 0 and "Read-only file system" in written.stderr, written
        state = inside(
            kubectl, namespace, pod_name, "sh", "-c", "touch /var/lib/baton/probe && ls /var/lib/baton"
        )
        assert state.returncode == 0, state
        caps = inside(kubectl, namespace, pod_name, "grep", "-E", "^(CapEff|NoNewPrivs)", "/proc/1/status")
        assert "CapEff:\t0000000000000000" in caps.stdout and "NoNewPrivs:\t1" in caps.stdout, caps
        # the worker is the image's `baton` (its venv), not the host's
        cmdline = inside(kubectl, namespace, pod_name, "cat", "/proc/1/cmdline").stdout.split("\0")
        assert cmdline[0].startswith("/opt/baton/bin/python"), cmdline

        sent = [USERS[i % len(USERS)] for i in range(300)]
        produce(
            kafka_bootstrap,
            clicks_topic,
            [
                (u.encode(), orjson.dumps({"user_id": u, "timestamp": 1_700_000_000 + i}))
                for i, u in enumerate(sent)
            ],
        )
        expected = {u: sent.count(u) for u in set(sent)}
        wait_for(
            "counts from the image's worker",
            lambda: counts(kafka_bootstrap, counts_topic) == expected,
            90,
        )
    except BaseException:
        print(operator.text()[-6000:])
        print(kubectl("describe", "pod", "click-counter-blue-0", "-n", namespace, check=False).stdout[-3000:])
        raise
    finally:
        kubectl("delete", "sapp", "click-counter", "-n", namespace, "--timeout=60s", check=False)
        operator.kill()


def test_a_writable_root_is_the_containers_own_and_the_image_user_applies(
    node: Node, node_runtime_image: str, kubectl: KubectlFn, namespace: str
) -> None:
    """Without readOnlyRootFilesystem a container writes into a layer of its own (the image
    shared by every container stays as built), and without runAsUser it runs as the image's USER."""

    def pod(name: str, script: str, security: dict[str, Any]) -> str:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 2,
                "tolerations": [node.toleration],
                "containers": [
                    {
                        "name": "main",
                        "image": node_runtime_image,
                        "imagePullPolicy": "Never",
                        "command": ["sh", "-c", script],
                        "securityContext": security,
                    }
                ],
            },
        }
        return orjson.dumps(body).decode()

    kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=pod("writer", "echo hi > /opt/written && cat /opt/written", {"runAsUser": 0}),
    )
    kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=pod("who", "id -u; id -G; pwd; test -e /opt/written && echo written || echo clean", {}),
    )

    def phases() -> dict[str, str] | None:
        got = {
            n: get_json(kubectl, "pod", n, "-n", namespace).get("status", {}).get("phase", "")
            for n in ("writer", "who")
        }
        return got if all(p in ("Succeeded", "Failed") for p in got.values()) else None

    done = wait_for("both Pods finished", phases, 60)
    logs = {n: kubectl("logs", n, "-n", namespace).stdout for n in done}
    assert done == {"writer": "Succeeded", "who": "Succeeded"}, (done, logs)
    assert "hi" in logs["writer"]
    # the image's USER and WORKDIR, and the writer's file is not in the image
    assert logs["who"].splitlines()[-4:] == ["10001", "10001", "/app", "clean"], logs["who"]
