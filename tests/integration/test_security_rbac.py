"""The operator's RBAC as the real API server's authorizer sees it, through impersonation.

`kubectl auth can-i --as=system:serviceaccount:<ns>:<sa>` asks the API server's RBAC
authorizer (SubjectAccessReview); the admin kubeconfig may impersonate. Checked: what the
operator needs is allowed, and Secrets are readable only by name where the chart was told.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support import helm as chart
from tests.support.helm import Helm
from tests.support.operator import KubectlFn

pytestmark = pytest.mark.integration

# The chart tests' fixtures, shared.
helm = chart.stack_helm
release = chart.release

# (verb, resource) the operator needs in each namespace it watches.
NEEDED = [
    ("watch", "streamapps.baton.dev"),
    ("patch", "streamapps.baton.dev"),
    ("patch", "streamapps.baton.dev/status"),
    ("update", "streamapps.baton.dev/finalizers"),
    ("create", "statefulsets.apps"),
    ("patch", "statefulsets.apps"),
    ("delete", "statefulsets.apps"),
    ("create", "services"),
    ("create", "serviceaccounts"),
    ("create", "poddisruptionbudgets.policy"),
    ("create", "events"),
    ("create", "events.events.k8s.io"),
    # the compactor Job's identity: a RoleBinding to the compactor ClusterRole
    ("create", "rolebindings.rbac.authorization.k8s.io"),
]
# Never: the operator builds Pods through StatefulSets and never reads or execs into them.
NEVER = [
    ("list", "secrets"),
    ("watch", "secrets"),
    ("create", "secrets"),
    ("create", "pods"),
    ("create", "pods/exec"),
    ("delete", "persistentvolumeclaims"),
    # It writes no rules and binds no role but two by name (below): no Roles, no escalate, no
    # bind of any other role, so the API server refuses a binding to admin or cluster-admin.
    ("create", "roles.rbac.authorization.k8s.io"),
    ("patch", "roles.rbac.authorization.k8s.io"),
    ("escalate", "roles.rbac.authorization.k8s.io"),
    ("bind", "roles.rbac.authorization.k8s.io"),
    ("bind", "clusterroles.rbac.authorization.k8s.io"),
    ("bind", "clusterroles.rbac.authorization.k8s.io#admin"),
    ("bind", "clusterroles.rbac.authorization.k8s.io#cluster-admin"),
    ("create", "deployments.apps"),
]


def can_i(
    kubectl: KubectlFn, sa: str, verb: str, resource: str, namespace: str | None, *, name: str = ""
) -> bool:
    target = f"{resource}/{name}" if name else resource
    ns = ["-n", namespace] if namespace else []
    out = kubectl("auth", "can-i", verb, target, *ns, f"--as={sa}", check=False)
    answer = out.stdout.strip()
    assert answer in ("yes", "no"), f"can-i {verb} {target}: {out.stdout} {out.stderr}"
    return answer == "yes"


def _json_stream(text: str) -> list[dict[str, Any]]:
    """kubectl prints one JSON document per created object, back to back."""
    decoder, docs, pos = json.JSONDecoder(), [], 0
    while pos < len(text.rstrip()):
        doc, end = decoder.raw_decode(text, pos)
        docs.append(doc)
        pos = end + (len(text[end:]) - len(text[end:].lstrip()))
    return docs


def check(
    kubectl: KubectlFn, sa: str, namespace: str | None, rules: list[tuple[str, str]], want: bool
) -> list[str]:
    """The rules whose answer is not ``want``: one SubjectAccessReview each, in one request.

    The same authorizer question as `kubectl auth can-i --as` (which the Secret checks use),
    batched so that dozens of checks cost one kubectl call; the groups are those the API
    server gives a ServiceAccount.
    """
    sa_namespace = sa.split(":")[2]
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{sa_namespace}", "system:authenticated"]
    reviews = []
    for verb, rule in rules:
        resource, _, obj = rule.partition("#")  # "#name": that object only
        res, _, sub = resource.partition("/")
        name, _, group = res.partition(".")
        attrs = {"verb": verb, "resource": name, "group": group, "subresource": sub}
        if obj:
            attrs["name"] = obj
        if namespace:
            attrs["namespace"] = namespace
        reviews.append(
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {"user": sa, "groups": groups, "resourceAttributes": attrs},
            }
        )
    out = kubectl(
        "create",
        "-o",
        "json",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": reviews}),
    )
    answers = [bool(r["status"].get("allowed")) for r in _json_stream(out.stdout)]
    return [f"{v} {r} in {namespace}" for (v, r), ok in zip(rules, answers, strict=True) if ok != want]


def test_namespaced_operator_can_do_its_job_and_no_more(
    helm: Helm, release: str, kubectl: KubectlFn, namespace: str
) -> None:
    apps = f"{namespace[:40]}-apps"
    kubectl("create", "namespace", apps)
    try:
        for ns, name in ((apps, "kafka-scram"), (apps, "other-secret"), (namespace, "kafka-scram")):
            kubectl("create", "secret", "generic", name, "-n", ns, "--from-literal=password=x")
        helm.install(
            release,
            namespace,
            f"operator.watchNamespaces={{{apps}}}",
            f'--set-json=rbac.kafkaSecrets=[{{"namespace":"{apps}","names":["kafka-scram"]}}]',
        )
        sa = f"system:serviceaccount:{namespace}:{release}-baton"

        assert check(kubectl, sa, apps, NEEDED, want=True) == []
        assert check(kubectl, sa, apps, NEVER, want=False) == []
        # Cluster-scoped reads that kopf makes even in namespaced mode, and nothing else there.
        assert (
            check(
                kubectl,
                sa,
                None,
                [("list", "namespaces"), ("watch", "customresourcedefinitions.apiextensions.k8s.io")],
                True,
            )
            == []
        )
        assert (
            check(
                kubectl,
                sa,
                None,
                [("delete", "namespaces"), ("create", "clusterroles.rbac.authorization.k8s.io")],
                False,
            )
            == []
        )
        # Zone awareness (spec.rack): a ClusterRoleBinding per app to the node reader, which it
        # may bind by name; it reads no Node itself. Compaction: the compactor role, by name.
        full = f"{release}-baton"
        zones = [
            ("create", "clusterrolebindings.rbac.authorization.k8s.io"),
            ("bind", f"clusterroles.rbac.authorization.k8s.io#{full}-node-reader"),
        ]
        assert check(kubectl, sa, None, zones, True) == []
        assert (
            check(
                kubectl,
                sa,
                apps,
                [("bind", f"clusterroles.rbac.authorization.k8s.io#{full}-compactor")],
                True,
            )
            == []
        )
        never = [("get", "nodes"), ("list", "nodes"), ("bind", "clusterroles.rbac.authorization.k8s.io")]
        assert check(kubectl, sa, None, never, False) == []
        # The leader-election Lease: in its own namespace only.
        lease = [("get", "leases.coordination.k8s.io"), ("update", "leases.coordination.k8s.io")]
        assert check(kubectl, sa, namespace, lease, want=True) == []
        assert check(kubectl, sa, apps, lease, want=False) == []
        # A namespace it does not watch: nothing (its own release namespace included).
        unwatched = [("create", "statefulsets.apps"), ("patch", "streamapps.baton.dev/status")]
        assert check(kubectl, sa, namespace, unwatched, want=False) == []
        assert check(kubectl, sa, "default", unwatched, want=False) == []

        # Secrets: only the one it was given, by name, and only get.
        assert can_i(kubectl, sa, "get", "secrets", apps, name="kafka-scram")
        assert not can_i(kubectl, sa, "get", "secrets", apps, name="other-secret")
        assert not can_i(kubectl, sa, "get", "secrets", namespace, name="kafka-scram")
        assert not can_i(kubectl, sa, "update", "secrets", apps, name="kafka-scram")
        # The authorizer's answer is what a real request gets.
        denied = kubectl("get", "secret", "other-secret", "-n", apps, f"--as={sa}", check=False)
        assert denied.returncode != 0 and "Forbidden" in denied.stderr, denied.stderr
        allowed = kubectl("get", "secret", "kafka-scram", "-n", apps, f"--as={sa}", "-o", "name")
        assert allowed.stdout.strip() == "secret/kafka-scram"
    finally:
        kubectl("delete", "namespace", apps, "--wait=false", check=False)


def test_cluster_wide_operator_reads_no_secrets_anywhere(
    helm: Helm, release: str, kubectl: KubectlFn, namespace: str
) -> None:
    helm.install(release, namespace)
    sa = f"system:serviceaccount:{namespace}:{release}-baton"
    for ns in (namespace, "default", "kube-system"):
        assert check(kubectl, sa, ns, NEEDED, want=True) == []
        assert check(kubectl, sa, ns, [*NEVER, ("get", "secrets")], want=False) == []
    assert check(kubectl, sa, None, [("list", "namespaces")], True) == []
    lease = [("create", "leases.coordination.k8s.io"), ("update", "leases.coordination.k8s.io")]
    assert check(kubectl, sa, namespace, lease, want=True) == []
    assert check(kubectl, sa, "default", lease, want=False) == [], "Leases only in its own namespace"
