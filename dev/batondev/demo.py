"""The demo behind ``make demo``: the whole product on the local stack, checked end to end.

Steps: the local stack with its node; the runtime image built from the Dockerfile and
imported into the node; the Baton chart installed with helm (its operator runs as a Pod on
the node); the click counter applied as a StreamApp (its workers Pods on the node, from the
image); clicks produced; counts printed; a new image tag deployed, which the operator rolls
out blue-green and flips; more clicks; the final counts checked against the input, user by
user. It exits 0 only if the counts in the ``read_committed`` output are exact.
"""

from __future__ import annotations

import collections
import contextlib
import json
import random
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import click
import orjson
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from baton.testing import latest_by_key, produce, read_all, wait_for
from batondev.paths import EXAMPLE, REPO

from . import buildah, gobuild, image, kafka, kube, node, stack

USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
APP_NS = "baton-demo"
OPERATOR_NS = "baton-system"


def say(step: str) -> None:
    click.secho(f"\n==> {step}", bold=True)


def kubectl(*args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [str(gobuild.kube_dir() / "bin" / "kubectl"), f"--kubeconfig={kube.kubeconfig()}", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check and out.returncode != 0:
        raise click.ClickException(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
    return out


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [str(gobuild.helm_dir() / "bin" / "helm"), f"--kubeconfig={kube.kubeconfig()}", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check and out.returncode != 0:
        raise click.ClickException(f"helm {' '.join(args)}: {out.stderr.strip()}")
    return out


def clicks(n: int, seed: int) -> list[tuple[bytes, bytes, int]]:
    """``n`` clicks a millisecond apart, the last one now.

    Dated now, not in 2023 as they were: a record older than the topic's retention (7 days)
    is deleted at the broker's next retention check (every 5 minutes), clicks and counts
    alike, and the demo's exact check then depended on when that check ran.
    """
    rng = random.Random(seed)
    base = int(time.time() * 1000) - n
    out = []
    for i in range(n):
        user = rng.choice(USERS)
        ms = base + i
        out.append((user.encode(), orjson.dumps({"user_id": user, "timestamp": ms // 1000}), ms))
    return out


def counts_table(counts: dict[str, int], expected: dict[str, int]) -> bool:
    click.echo(f"   {'user':<8} {'count':>7} {'expected':>9}")
    exact = True
    for user in sorted(expected):
        got = counts.get(user)
        ok = got == expected[user]
        exact &= ok
        click.echo(
            f"   {user:<8} {got if got is not None else '-':>7} {expected[user]:>9}  {'ok' if ok else 'WRONG'}"
        )
    if set(counts) - set(expected):
        click.echo(f"   unexpected users in the output: {sorted(set(counts) - set(expected))}")
        exact = False
    return exact


def streamapp(bootstrap: str, clicks_topic: str, counts_topic: str, app_id: str) -> dict[str, Any]:
    """examples/click-counter.yaml, pointed at the local broker and sized for a laptop."""
    import yaml

    manifest: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    spec = manifest["spec"]
    spec["kafka"]["bootstrapServers"] = bootstrap
    spec["applicationId"] = app_id
    spec["replicas"] = 2
    spec["standbyReplicas"] = 1
    spec["resources"] = {}
    spec["state"] = {"store": "rocksdb", "size": "256Mi"}
    spec["upgrade"] = {
        **spec.get("upgrade", {}),
        "promotionStableSeconds": 5,
        "standbyUpgradeDelaySeconds": 10,
    }
    spec["podTemplate"] = {
        **spec.get("podTemplate", {}),
        "env": [
            {"name": "CLICKS_TOPIC", "value": clicks_topic},
            {"name": "COUNTS_TOPIC", "value": counts_topic},
        ],
    }
    manifest["metadata"]["namespace"] = APP_NS
    return manifest


def status(name: str) -> dict[str, Any]:
    out = kubectl("get", "sapp", name, "-n", APP_NS, "-o", "json")
    result: dict[str, Any] = json.loads(out.stdout).get("status", {})
    return result


def show_worker(color: str) -> None:
    """``kubectl logs`` and ``kubectl exec`` on a worker Pod: the kubelet serves both."""
    pod = f"click-counter-{color}-0"
    say(f"kubectl logs and kubectl exec on {pod}")
    ids = kubectl(
        "get", "pod", pod, "-n", APP_NS, "-o", "jsonpath={.status.containerStatuses[*].containerID}"
    )
    click.echo(f"   container {ids.stdout.strip()}")
    for line in kubectl("logs", pod, "-n", APP_NS, "--tail=2").stdout.strip().splitlines():
        click.echo(f"   log: {line[:160]}")
    version = kubectl("exec", pod, "-n", APP_NS, "--", "baton", "--version").stdout.strip()
    click.echo(f"   exec: baton --version -> {version}")


def reset_namespaces() -> None:
    helm("uninstall", "baton", "-n", OPERATOR_NS, "--wait", "--timeout=60s", check=False)
    for ns in (APP_NS, OPERATOR_NS):
        if kubectl("get", "namespace", ns, check=False).returncode == 0:
            # an earlier demo's app carries the operator's finalizer: clear it so the namespace can go
            kubectl(
                "patch",
                "sapp",
                "click-counter",
                "-n",
                ns,
                "--type=merge",
                "-p",
                '{"metadata":{"finalizers":[]}}',
                check=False,
            )
            kubectl("delete", "namespace", ns, "--wait=true", "--timeout=120s", check=False)
        kubectl("create", "namespace", ns)


@click.command()
@click.option(
    "--events", default=20_000, show_default=True, help="Clicks to produce before and after the deploy"
)
@click.option(
    "--keep-stack", is_flag=True, help="Use the running stack as it is instead of starting it fresh"
)
def main(events: int, keep_stack: bool) -> None:
    """Run the click counter through the operator on the local stack, deploy it blue-green, check the counts."""
    # SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the app and the release are removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    say(
        "Local stack: Kafka (KRaft), etcd, kube-apiserver, controllers, a node (kubelet, containerd, "
        "kube-proxy, CoreDNS), helm (installed once into ~/.cache/baton)"
    )
    spent = stack.up_components(["kafka", "kube", "node", "helm"], fresh=not keep_stack)
    click.echo("   " + ", ".join(f"{k} ready in {v:.1f}s" for k, v in spent.items()))
    bootstrap = kafka.bootstrap()
    app_bootstrap = kafka.node_bootstrap()  # the address the app's Pods reach the broker at
    say("The runtime image, built from the Dockerfile with buildah and imported into the node's containerd")
    built = image.build("runtime")
    node.load_image(built)
    repository, _, tag = built.rpartition(":")
    click.echo(f"   {built}: the operator's and the workers' Pods run from it on node {node.NAME}")

    say(f"Namespaces {OPERATOR_NS} (operator) and {APP_NS} (app); helm install of charts/baton")
    reset_namespaces()
    helm(
        *("install", "baton", str(REPO / "charts" / "baton"), "-n", OPERATOR_NS),
        *("--set", "operator.replicas=1", "--set", f"operator.watchNamespaces={{{APP_NS}}}"),
        *("--set", f"image.repository={repository}", "--set", f"image.tag={tag}"),
        *("--set-json", f"operator.tolerations={json.dumps([node.TOLERATION])}"),
    )
    kubectl("rollout", "status", "deploy", "-n", OPERATOR_NS, "--timeout=300s")
    click.echo(kubectl("get", "pods", "-n", OPERATOR_NS, "-o", "wide").stdout.rstrip())
    ids = kubectl(
        "get", "pods", "-n", OPERATOR_NS, "-o", "jsonpath={.items[*].status.containerStatuses[*].containerID}"
    )
    click.echo(f"   operator container {ids.stdout.strip()}")

    run = uuid.uuid4().hex[:6]
    clicks_topic, counts_topic, app_id = f"clicks-{run}", f"user-counts-{run}", f"click-counter-{run}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(clicks_topic, 8, 1), NewTopic(counts_topic, 8, 1)]).values():
        fut.result(30)

    exact = False
    try:
        manifest = streamapp(app_bootstrap, clicks_topic, counts_topic, app_id)
        manifest["spec"]["image"] = built
        manifest["spec"]["podTemplate"]["tolerations"] = [node.TOLERATION]
        say(
            f"kubectl apply of the click counter (applicationId {app_id}, topics {clicks_topic} -> {counts_topic})"
        )
        kubectl("apply", "-f", "-", input=json.dumps(manifest))
        kubectl("wait", "--for=condition=Ready", "sapp/click-counter", "-n", APP_NS, "--timeout=300s")
        click.echo(kubectl("get", "sapp", "-n", APP_NS).stdout.rstrip())
        click.echo(kubectl("get", "pods", "-n", APP_NS, "-o", "wide").stdout.rstrip())
        show_worker(status("click-counter").get("activeColor", "blue"))

        first = clicks(events, seed=1)
        say(f"Producing {len(first):,} clicks for {len(USERS)} users")
        produce(bootstrap, clicks_topic, first)
        expected = collections.Counter(r[0].decode() for r in first)

        def counts() -> dict[str, int]:
            latest = latest_by_key(read_all(bootstrap, counts_topic))
            return {k.decode(): int(orjson.loads(v)) for k, v in latest.items() if k and v}

        with contextlib.suppress(TimeoutError):
            wait_for("counts", lambda: counts() == dict(expected), 180)
        say("Counts in the output topic (read_committed)")
        counts_table(counts(), dict(expected))

        before = status("click-counter").get("activeColor", "blue")
        v2 = f"{built}-v2"
        buildah.run("tag", built, v2)
        node.load_image(v2)
        say(f"Deploying a new version (image {v2}); active color now: {before}")
        manifest["spec"]["image"] = v2
        kubectl("apply", "-f", "-", input=json.dumps(manifest))
        phases: list[str] = []

        def flipped() -> bool:
            st = status("click-counter")
            phase = st.get("phase", "?")
            if not phases or phases[-1] != phase:
                phases.append(phase)
                click.echo(f"   phase {phase:<12} active {st.get('activeColor')}")
            return bool(st.get("activeColor") != before and phase == "Stable")

        wait_for("the blue-green deploy to finish", flipped, 600, every=0.5)
        st = status("click-counter")
        click.echo(
            f"   flipped {before} -> {st.get('activeColor')}; last flip: {json.dumps(st.get('lastFlip', {}))}"
        )
        click.echo(kubectl("get", "sapp", "-n", APP_NS).stdout.rstrip())

        second = clicks(events, seed=2)
        say(f"Producing {len(second):,} more clicks, now counted and emitted by {st.get('activeColor')}")
        produce(bootstrap, clicks_topic, second)
        expected.update(r[0].decode() for r in second)
        with contextlib.suppress(TimeoutError):
            wait_for("counts", lambda: counts() == dict(expected), 180)
        say("Final counts (read_committed), checked against the input")
        exact = counts_table(counts(), dict(expected))

    finally:
        kubectl("delete", "sapp", "click-counter", "-n", APP_NS, "--wait=true", "--timeout=120s", check=False)
    helm("uninstall", "baton", "-n", OPERATOR_NS, "--wait", "--timeout=60s", check=False)
    for fut in admin.delete_topics([clicks_topic, counts_topic]).values():
        with contextlib.suppress(Exception):
            fut.result(30)
    total = sum(expected.values())
    say(
        f"Summary: {total:,} clicks, {len(USERS)} users, deploy phases {' -> '.join(phases)}, "
        f"counts {'EXACT' if exact else 'WRONG'} ({time.monotonic() - started:.0f}s)"
    )
    sys.exit(0 if exact else 1)


if __name__ == "__main__":
    main()
