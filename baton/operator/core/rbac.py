"""The operator's RBAC: the least privilege it needs, as data the Helm chart can reuse.

``baton render --rbac`` prints these objects; the chart (charts/baton) renders the same
rules, and a test there can compare its output with :func:`operator_rules`. Rules are split
into what the operator needs in every namespace it watches (namespaced) and what only a
cluster-wide operator needs (cluster).

Deliberately absent: Secrets (workers read Kafka credentials through secretKeyRef and a
secret volume, resolved by the kubelet, never by the operator), creating Pods, and Pods/exec,
Roles and ClusterRoles (the operator writes no rules), and ``escalate``. The identities it
gives (the compactor Job's: its app's status; zone-aware workers': a Node's labels) are two
ClusterRoles made with the operator's (the chart makes them): the operator may ``bind`` those
two by name and no other, so a RoleBinding it writes to ``admin`` or ``cluster-admin`` is
refused by the API server. (Any role whose every permission the operator holds itself it
could bind too, as any principal that may write bindings can: that is Kubernetes' escalation
check, and why the operator's own rules stay narrow.)
"""

from __future__ import annotations

from typing import Any

from baton.operator.core.constants import GROUP, PLURAL

CRD_NAME = f"{PLURAL}.{GROUP}"

# The ClusterRoles the operator binds, by the operator's name (``rbac_objects``; the chart
# uses its fullname): --compactor-role and --node-reader-role default to these.
DEFAULT_OPERATOR_NAME = "baton-operator"


def compactor_role_name(name: str = DEFAULT_OPERATOR_NAME) -> str:
    return f"{name}-compactor"


def node_reader_role_name(name: str = DEFAULT_OPERATOR_NAME) -> str:
    return f"{name}-node-reader"


_READ = ["get", "list", "watch"]
_OWN = [*_READ, "create", "patch", "update", "delete"]


def namespaced_rules(name: str = DEFAULT_OPERATOR_NAME) -> list[dict[str, Any]]:
    """What the operator needs in each namespace it watches (``name``: its roles' prefix)."""
    return [
        # kopf patches its annotations and finalizer on the object; the status is ours.
        {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": [*_READ, "patch", "update"]},
        {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["get", "patch", "update"]},
        # Owner references with blockOwnerDeletion need update on the owner's finalizers.
        {"apiGroups": [GROUP], "resources": [f"{PLURAL}/finalizers"], "verbs": ["update"]},
        {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": _OWN},
        {"apiGroups": [""], "resources": ["services", "serviceaccounts"], "verbs": _OWN},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": _OWN},
        # Compaction: one CronJob per app (spec.compaction), suspended during flips.
        {"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": _OWN},
        # ... and its Jobs, read to report a failed run (BatonCompactionFailed); or, under
        # runner SparkOperator, a ScheduledSparkApplication instead of the CronJob.
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": _READ},
        {"apiGroups": ["sparkoperator.k8s.io"], "resources": ["scheduledsparkapplications"], "verbs": _OWN},
        # ... whose next run is computed again when the schedule changes (Kube.reschedule)
        {
            "apiGroups": ["sparkoperator.k8s.io"],
            "resources": ["scheduledsparkapplications/status"],
            "verbs": ["patch"],
        },
        # ... and the Job's identity: a RoleBinding of its ServiceAccount to the compactor
        # ClusterRole, which the operator may bind (and no other role: no Roles written at all)
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"], "verbs": _OWN},
        {
            "apiGroups": ["rbac.authorization.k8s.io"],
            "resources": ["clusterroles"],
            "resourceNames": [compactor_role_name(name)],
            "verbs": ["bind"],
        },
        # spec.state.size grown: each worker's claim expanded (never created or deleted: the
        # StatefulSets make them, and they outlive the app unless deletionPolicy says otherwise)
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "list", "patch"]},
        # Rolling upgrades (OnDelete): read worker Pods' readiness, delete one outdated Pod at a time.
        {"apiGroups": [""], "resources": ["pods"], "verbs": [*_READ, "delete"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]


def cluster_rules() -> list[dict[str, Any]]:
    """Extra rules of a cluster-wide operator (kopf watches namespaces and CRDs to follow them)."""
    return [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "verbs": ["list", "watch"],
        },
        # --manage-crd: the StreamApp CRD brought to the operator's version (operator/crd.py);
        # that one CRD only, and no create (the chart installs it)
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "resourceNames": [CRD_NAME],
            "verbs": ["get", "patch"],
        },
    ]


def node_zone_rules(name: str = DEFAULT_OPERATOR_NAME) -> list[dict[str, Any]]:
    """Cluster-scoped, whether the operator watches all namespaces or some: a ClusterRoleBinding
    per zone-aware app (spec.rack; watched by label, deleted with the app) to the node-reader
    ClusterRole, the one cluster role the operator may bind."""
    return [
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterrolebindings"], "verbs": _OWN},
        {
            "apiGroups": ["rbac.authorization.k8s.io"],
            "resources": ["clusterroles"],
            "resourceNames": [node_reader_role_name(name)],
            "verbs": ["bind"],
        },
    ]


def node_reader_rules() -> list[dict[str, Any]]:
    """The node-reader ClusterRole that zone-aware apps' workers are bound to: read a Node's
    labels (its zone), nothing else."""
    return [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]


def compactor_rules() -> list[dict[str, Any]]:
    """The compactor ClusterRole its Jobs (and Spark drivers) are bound to in their namespace:
    write the audit's summary into a StreamApp's status."""
    return [{"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["get", "patch"]}]


def leader_election_rules() -> list[dict[str, Any]]:
    """The Lease the replicas elect their leader through, in the operator's own namespace only
    (see baton.operator.leader); ``create`` cannot be limited to a name, so no resourceNames."""
    return [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}
    ]


def operator_rules(clusterwide: bool = True, name: str = DEFAULT_OPERATOR_NAME) -> list[dict[str, Any]]:
    """Every rule of a cluster-wide operator (one ClusterRole); namespaced, those of the Roles."""
    return namespaced_rules(name) + (cluster_rules() + node_zone_rules(name) if clusterwide else [])


def rbac_objects(
    service_account: str, namespace: str, clusterwide: bool = True, name: str = DEFAULT_OPERATOR_NAME
) -> list[dict[str, Any]]:
    """ServiceAccount, roles and bindings for an operator running as ``service_account``.

    Cluster-wide: one ClusterRole with every rule. Namespaced (watching ``namespace``): a Role
    with the namespaced rules, plus a ClusterRole with only kopf's cluster-scoped reads
    (namespaces and CRDs, which kopf watches even in namespaced mode) and one with the node
    zone rules. Either way a Role for the leader-election Lease in ``namespace``, and the two
    ClusterRoles the operator binds: ``<name>-node-reader`` (``--node-reader-role``), for
    zone-aware apps' workers, and ``<name>-compactor`` (``--compactor-role``), for compaction Jobs.
    """
    labels = {"app.kubernetes.io/name": "baton", "app.kubernetes.io/component": "operator"}
    subject = [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}]
    rbac = "rbac.authorization.k8s.io"

    def role(kind: str, role_name: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        meta: dict[str, Any] = {"name": role_name, "labels": labels}
        if kind == "Role":
            meta["namespace"] = namespace
        return [
            {"apiVersion": f"{rbac}/v1", "kind": kind, "metadata": meta, "rules": rules},
            {
                "apiVersion": f"{rbac}/v1",
                "kind": f"{kind}Binding",
                "metadata": dict(meta),
                "roleRef": {"apiGroup": rbac, "kind": kind, "name": role_name},
                "subjects": subject,
            },
        ]

    sa = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": service_account, "namespace": namespace, "labels": labels},
    }
    election = role("Role", f"{name}-leader-election", leader_election_rules())
    bound = [
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role_name, "labels": labels},
            "rules": rules,
        }
        for role_name, rules in (
            (node_reader_role_name(name), node_reader_rules()),
            (compactor_role_name(name), compactor_rules()),
        )
    ]
    if clusterwide:
        return [sa, *role("ClusterRole", name, operator_rules(True, name)), *election, *bound]
    return [
        sa,
        *role("Role", name, namespaced_rules(name)),
        *role("ClusterRole", f"{name}-{namespace}-discovery", cluster_rules()),
        *role("ClusterRole", f"{name}-{namespace}-node-zones", node_zone_rules(name)),
        *election,
        *bound,
    ]
