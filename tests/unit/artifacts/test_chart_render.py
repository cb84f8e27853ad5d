"""charts/baton rendered by the real helm: lint, the objects it makes, and what they say.

`helm template` needs no cluster, so these are unit tests; the chart installed into the real
API server is tests/integration/test_chart_install.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from batondev.paths import REPO

from baton.operator.core import rbac
from tests.support.helm import CHART, Obj, find, helm, one, render, set_args

pytestmark = pytest.mark.unit


def canonical(rules: list[Obj]) -> list[tuple[tuple[str, ...], ...]]:
    """Rules as comparable, order-insensitive tuples."""
    return sorted(
        tuple(tuple(sorted(r.get(k) or [])) for k in ("apiGroups", "resources", "resourceNames", "verbs"))
        for r in rules
    )


def restricted_violations(pod_spec: Obj) -> list[str]:
    """What Pod Security "restricted" (v1.35) would refuse in a Pod spec: the static half of the check."""
    problems: list[str] = []
    psc = pod_spec.get("securityContext") or {}
    if (psc.get("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
        problems.append("pod seccompProfile must be RuntimeDefault")
    for c in pod_spec.get("containers", []) + pod_spec.get("initContainers", []):
        sc = c.get("securityContext") or {}
        name = c["name"]
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation must be false")
        if (sc.get("capabilities") or {}).get("drop") != ["ALL"]:
            problems.append(f"{name}: capabilities must drop ALL")
        if not (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")):
            problems.append(f"{name}: runAsNonRoot must be true")
        if sc.get("readOnlyRootFilesystem") is not True:  # not PSS, but Baton's own promise
            problems.append(f"{name}: readOnlyRootFilesystem must be true")
        if sc.get("privileged") or sc.get("runAsUser") == 0 or psc.get("runAsUser") == 0:
            problems.append(f"{name}: runs privileged or as root")
    for v in pod_spec.get("volumes", []):
        if "hostPath" in v:
            problems.append(f"volume {v['name']} is a hostPath")
    return problems


def test_lint_strict_with_defaults_and_with_everything_on() -> None:
    helm("lint", "--strict", str(CHART))
    everything = {
        "operator.watchNamespaces": '["apps","apps-2"]',
        "metrics.serviceMonitor.enabled": "true",
        "metrics.podMonitor.enabled": "true",
        "metrics.prometheusRule.enabled": "true",
        "metrics.dashboard.enabled": "true",
        "rbac.kafkaSecrets": '[{"namespace":"apps","names":["kafka-scram"]}]',
    }
    helm("lint", "--strict", str(CHART), *set_args(everything))


def test_the_charts_crd_is_the_repositorys_and_renders_without_warnings() -> None:
    """charts/baton/crds/ holds a copy of crds/ (docs/gen_reference.py writes it), byte for byte;
    a file, not a link, so helm renders without a warning and a packaged chart holds it."""
    files = {p.name: p for p in (CHART / "crds").iterdir()}
    assert set(files) == {"streamapps.baton.dev.yaml"}
    copy = files["streamapps.baton.dev.yaml"]
    assert not copy.is_symlink()
    assert copy.read_bytes() == (REPO / "crds" / "streamapps.baton.dev.yaml").read_bytes(), (
        "charts/baton/crds is stale: run `python docs/gen_reference.py`"
    )
    out = helm("template", "rel", str(CHART), "--include-crds")
    assert "symbolic link" not in out.stderr, out.stderr
    rendered = out.stdout
    shipped = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "CustomResourceDefinition"]
    root = [
        d
        for path in ("crds/streamapps.baton.dev.yaml",)
        for d in yaml.safe_load_all((REPO / path).read_text())
        if d
    ]
    key = lambda d: d["metadata"]["name"]  # noqa: E731
    assert sorted(shipped, key=key) == sorted(root, key=key)


def test_default_install_is_cluster_wide_with_two_restricted_replicas() -> None:
    objs = render()
    dep = one(objs, "Deployment", "rel-baton", "baton-system")
    spec = dep["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "ghcr.io/baton-dev/baton:0.1.0"
    args = container["args"]
    assert args[0] == "operator"
    assert "--lease=rel-baton" in args and "--standalone" not in args
    assert {"--lease-duration=15", "--renew-deadline=10", "--retry-period=2"} <= set(args)
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace", (
        "the Lease lives in the release namespace"
    )
    assert not any(a.startswith("--namespace") for a in args), "no namespace flag means all namespaces"
    assert "--liveness=http://0.0.0.0:8081/healthz" in args
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"]["port"] == "health"
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "192Mi"}
    assert {"name": "BATON_OPERATOR_METRICS_PORT", "value": "8080"} in container["env"]
    assert restricted_violations(pod) == []
    assert pod["serviceAccountName"] == "rel-baton"

    pdb = one(objs, "PodDisruptionBudget", "rel-baton")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]
    svc = one(objs, "Service", "rel-baton-metrics")
    assert svc["spec"]["selector"] == spec["selector"]["matchLabels"]
    assert svc["spec"]["ports"] == [
        {"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}
    ]

    role = one(objs, "ClusterRole", "rel-baton")
    assert canonical(role["rules"]) == canonical(rbac.operator_rules(clusterwide=True, name="rel-baton"))
    binding = one(objs, "ClusterRoleBinding", "rel-baton")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "rel-baton", "namespace": "baton-system"}
    ]
    election = one(objs, "Role", "rel-baton-leader-election", "baton-system")
    assert canonical(election["rules"]) == canonical(rbac.leader_election_rules())
    assert (
        one(objs, "RoleBinding", "rel-baton-leader-election", "baton-system")["subjects"]
        == binding["subjects"]
    )
    assert [r["metadata"]["name"] for r in find(objs, "Role")] == ["rel-baton-leader-election"]
    # zone-aware apps' workers are bound to the node reader, which the operator is told of
    reader = one(objs, "ClusterRole", "rel-baton-node-reader")
    assert canonical(reader["rules"]) == canonical(rbac.node_reader_rules())
    assert "--node-reader-role=rel-baton-node-reader" in args
    for optional in ("ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap"):
        assert not find(objs, optional), f"{optional} is off by default"


def test_namespaced_install_grants_only_discovery_and_node_zones_cluster_wide() -> None:
    objs = render({"operator.watchNamespaces": '["apps","apps-2"]'})
    # Same split as rbac.rbac_objects(namespaced): a Role per namespace, and cluster-wide only
    # kopf's reads and the zone-aware apps' ClusterRoleBindings.
    builder = {
        o["metadata"]["name"].removeprefix("rel-baton-"): o
        for o in rbac.rbac_objects("rel-baton", "baton-system", clusterwide=False, name="rel-baton")
        if o["kind"] == "ClusterRole"
    }
    roles = {  # the operator's own: not the StreamApp rights folded into the default user roles
        r["metadata"]["name"].removeprefix("rel-baton-"): r
        for r in find(objs, "ClusterRole")
        if not any(k.startswith("rbac.authorization.k8s.io/aggregate-to-") for k in r["metadata"]["labels"])
    }
    assert (
        set(roles)
        == set(builder)
        == {"baton-system-discovery", "baton-system-node-zones", "node-reader", "compactor"}
    )
    for name, role in roles.items():
        assert canonical(role["rules"]) == canonical(builder[name]["rules"]), name
    discovery = roles["baton-system-discovery"]["rules"]
    assert all(v in ("list", "watch") for r in discovery if "resourceNames" not in r for v in r["verbs"])
    # crds.manage: get and patch of the StreamApp CRD alone, no create
    assert [(r["resourceNames"], r["verbs"]) for r in discovery if "resourceNames" in r] == [
        (["streamapps.baton.dev"], ["get", "patch"])
    ]
    assert canonical(roles["baton-system-node-zones"]["rules"]) == canonical(
        rbac.node_zone_rules("rel-baton")
    )
    bound = {b["roleRef"]["name"] for b in find(objs, "ClusterRoleBinding")}
    assert bound == {"rel-baton-baton-system-discovery", "rel-baton-baton-system-node-zones"}
    assert one(objs, "Role", "rel-baton-leader-election", "baton-system")
    for ns in ("apps", "apps-2"):
        role = one(objs, "Role", "rel-baton", ns)
        assert canonical(role["rules"]) == canonical(rbac.namespaced_rules("rel-baton"))
        binding = one(objs, "RoleBinding", "rel-baton", ns)
        assert binding["subjects"][0]["namespace"] == "baton-system"
    args = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [a for a in args if a.startswith("--namespace=")] == ["--namespace=apps", "--namespace=apps-2"]


def test_no_secret_access_except_the_named_kafka_secrets() -> None:
    for objs in (render(), render({"operator.watchNamespaces": '["apps"]'})):
        for role in find(objs, "ClusterRole") + find(objs, "Role"):
            assert all("secrets" not in r["resources"] for r in role["rules"]), role["metadata"]
    objs = render({"rbac.kafkaSecrets": '[{"namespace":"apps","names":["kafka-scram","kafka-tls"]}]'})
    role = one(objs, "Role", "rel-baton-kafka-secrets", "apps")
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["kafka-scram", "kafka-tls"],
            "verbs": ["get"],
        }
    ]
    binding = one(objs, "RoleBinding", "rel-baton-kafka-secrets", "apps")
    assert binding["roleRef"]["name"] == "rel-baton-kafka-secrets"


def test_values_schema_refuses_typos_and_bad_values() -> None:
    for bad in (
        {"operator.replica": "3"},
        {"operator.watchNamespaces": '["Not_A_Namespace"]'},
        {"image.pullPolicy": "Sometimes"},
        {"metrics.prometheusRule.thresholds.restoreStuckFor": "soon"},
    ):
        out = helm("template", "rel", str(CHART), *set_args(bad), check=False)
        assert out.returncode != 0, f"{bad} was accepted"
        assert "values don't meet the specifications of the schema" in out.stderr, out.stderr


def test_values_file_matches_its_schema() -> None:
    import json

    import jsonschema  # type: ignore[import-untyped]

    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(yaml.safe_load((CHART / "values.yaml").read_text()), schema)


def test_overrides_reach_the_deployment() -> None:
    objs = render(
        {
            "image.tag": "9.9.9",
            "operator.replicas": "3",
            "operator.kafka": "false",
            "operator.leaderElection.leaseName": "custom-lease",
            "operator.leaderElection.leaseDurationSeconds": "30",
            "operator.metricsPort": "9100",
            "podDisruptionBudget.enabled": "false",
            "serviceAccount.name": "baton-op",
        }
    )
    dep = one(objs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] == 3
    assert pod["containers"][0]["image"].endswith(":9.9.9")
    assert "--no-kafka" in pod["containers"][0]["args"]
    assert {"--lease=custom-lease", "--lease-duration=30"} <= set(pod["containers"][0]["args"])
    assert pod["serviceAccountName"] == "baton-op"
    assert one(objs, "ServiceAccount", "baton-op")
    assert one(objs, "Service")["spec"]["ports"][0]["port"] == 9100
    assert not find(objs, "PodDisruptionBudget")


def test_the_compactor_image_reaches_the_operator_and_defaults_to_the_chart_version() -> None:
    """The chart's compactor image is the operator's, and the operator's default matches the
    chart's appVersion, so a StreamApp with no spec.compaction.image runs a Java image."""
    from baton.operator.core.compaction.cronjob import DEFAULT_IMAGE

    def env_of(objs: list[dict[str, Any]]) -> dict[str, str]:
        container = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
        return {e["name"]: e.get("value", "") for e in container["env"]}

    assert env_of(render({}))["BATON_COMPACTOR_IMAGE"] == DEFAULT_IMAGE
    custom = render({"compactorImage.repository": "registry.local/compactor", "compactorImage.tag": "v7"})
    assert env_of(custom)["BATON_COMPACTOR_IMAGE"] == "registry.local/compactor:v7"


def test_a_digest_pins_both_images() -> None:
    digest = "sha256:" + "ab" * 32
    objs = render({"image.digest": digest, "compactorImage.digest": digest, "image.tag": "ignored"})
    container = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"ghcr.io/baton-dev/baton@{digest}"
    env = {e["name"]: e.get("value", "") for e in container["env"]}
    assert env["BATON_COMPACTOR_IMAGE"] == f"ghcr.io/baton-dev/baton-compactor@{digest}"
    out = helm("template", "rel", str(CHART), *set_args({"image.digest": "latest"}), check=False)
    assert out.returncode != 0 and "digest" in out.stderr, out.stderr


def test_streamapps_join_the_default_view_and_edit_roles() -> None:
    objs = render({})
    view = one(objs, "ClusterRole", "rel-baton-streamapps-view")
    edit = one(objs, "ClusterRole", "rel-baton-streamapps-edit")
    labels = "rbac.authorization.k8s.io/aggregate-to-"
    assert {f"{labels}view", f"{labels}edit", f"{labels}admin"} <= set(view["metadata"]["labels"])
    assert f"{labels}view" not in edit["metadata"]["labels"]  # viewers never write
    assert {v for r in view["rules"] for v in r["verbs"]} == {"get", "list", "watch"}
    assert "create" in {v for r in edit["rules"] for v in r["verbs"]}
    assert not find(
        render({"rbac.aggregateToDefaultRoles": "false"}), "ClusterRole", "rel-baton-streamapps-view"
    )


def test_the_service_monitor_keeps_the_apps_namespace_label() -> None:
    monitor = one(render({"metrics.serviceMonitor.enabled": "true"}), "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True
