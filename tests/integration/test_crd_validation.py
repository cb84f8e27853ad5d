"""The real kube-apiserver refuses bad StreamApps with messages that name the field and the rule."""

from __future__ import annotations

import fcntl
import json
import re
from typing import Any

import pytest

from tests.conftest import Kube
from tests.support.kube_api import KubectlFn, crd_flock, kubectl_runner
from tests.support.operator import example_manifest, install_crds

pytestmark = pytest.mark.integration


def _spec(**changes: Any) -> dict[str, Any]:
    return changes


def _kafka(**fields: Any) -> dict[str, Any]:
    return {"bootstrapServers": "kafka-0.kafka:9093", **fields}


INVALID: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "standby-not-below-replicas",
        _spec(replicas=2, standbyReplicas=2),
        ["spec.standbyReplicas", "must be less than spec.replicas"],
    ),
    ("topology-format", _spec(topology="clicks"), ["spec.topology", "must be module:attribute"]),
    (
        "guarantee-enum",
        _spec(processingGuarantee="exactly_once"),
        [
            "spec.processingGuarantee",
            'Unsupported value: "exactly_once"',
            '"exactly_once_v2"',
            '"at_least_once"',
        ],
    ),
    (
        "application-id-chars",
        _spec(applicationId="click counter!"),
        ["spec.applicationId", "must be a valid Kafka topic prefix"],
    ),
    (
        "bootstrap-without-port",
        _spec(kafka={"bootstrapServers": "kafka-0.kafka"}),
        ["spec.kafka.bootstrapServers", "must be a comma-separated list of host:port"],
    ),
    (
        "config-owned-by-baton",
        _spec(config={"group.id": "mine"}),
        ["spec.config", "must not set bootstrap.servers, group.id"],
    ),
    (
        "config-key-format",
        _spec(config={"FetchMinBytes": "1"}),
        ["spec.config", "keys must be librdkafka setting names"],
    ),
    (
        "reserved-env",
        _spec(podTemplate={"env": [{"name": "BATON_APPLICATION_ID", "value": "x"}]}),
        ["spec.podTemplate.env", "must not set BATON_* variables"],
    ),
    (
        "reserved-label",
        _spec(podTemplate={"labels": {"baton.dev/color": "red"}}),
        ["spec.podTemplate.labels", "reserved prefixes"],
    ),
    (
        "sasl-without-secret",
        _spec(kafka={"bootstrapServers": "k:9093", "securityProtocol": "SASL_SSL"}),
        ["spec.kafka.secretRef", "is required when spec.kafka.securityProtocol is SSL or SASL_*"],
    ),
    (
        "mtls-without-tls",
        _spec(kafka=_kafka(authentication={"type": "tls", "certificateAndKey": {"secretName": "u"}})),
        ["spec.kafka.tls", "of type tls (client certificates) needs spec.kafka.tls"],
    ),
    (
        "tls-auth-without-certificate",
        _spec(kafka=_kafka(tls={}, authentication={"type": "tls"})),
        ["spec.kafka.authentication.certificateAndKey", "needs certificateAndKey"],
    ),
    (
        "scram-without-password",
        _spec(kafka=_kafka(tls={}, authentication={"type": "scram-sha-512", "username": "app"})),
        ["spec.kafka.authentication", "needs username and passwordSecret"],
    ),
    (
        "oauth-without-client-secret",
        _spec(
            kafka=_kafka(
                tls={},
                authentication={"type": "oauth", "tokenEndpointUri": "https://idp/token", "clientId": "app"},
            )
        ),
        ["spec.kafka.authentication", "of type oauth needs tokenEndpointUri, clientId and clientSecret"],
    ),
    (
        "oauth-token-endpoint-url",
        _spec(
            kafka=_kafka(
                authentication={
                    "type": "oauth",
                    "tokenEndpointUri": "idp/token",
                    "clientId": "app",
                    "clientSecret": {"secretName": "s", "key": "k"},
                }
            )
        ),
        ["spec.kafka.authentication.tokenEndpointUri", "must be an http(s):// URL"],
    ),
    (
        "password-for-tls-auth",
        _spec(
            kafka=_kafka(
                tls={},
                authentication={
                    "type": "tls",
                    "certificateAndKey": {"secretName": "u"},
                    "passwordSecret": {"secretName": "p"},
                },
            )
        ),
        ["spec.kafka.authentication", "are for types scram-sha-256, scram-sha-512 and plain only"],
    ),
    (
        "both-shapes",
        _spec(kafka=_kafka(securityProtocol="SSL", secretRef={"name": "s"}, tls={})),
        ["spec.kafka", "replace securityProtocol and secretRef: use one way or the other"],
    ),
    (
        "two-trusted-certificates",
        _spec(kafka=_kafka(tls={"trustedCertificates": [{"secretName": "a"}, {"secretName": "b"}]})),
        ["spec.kafka.tls.trustedCertificates", "must have at most 1 item"],
    ),
    (
        "unknown-authentication-type",
        _spec(kafka=_kafka(tls={}, authentication={"type": "kerberos"})),
        ["spec.kafka.authentication.type", 'Unsupported value: "kerberos"'],
    ),
    (
        "rebuild-needs-blue-green",
        _spec(upgrade={"strategy": "Rolling", "stateMigration": "Rebuild"}),
        ["spec.upgrade.stateMigration", "needs spec.upgrade.strategy BlueGreen"],
    ),
    (
        "promotion-window",
        _spec(upgrade={"promotionStableSeconds": 120, "promotionTimeoutSeconds": 60}),
        ["spec.upgrade.promotionStableSeconds", "must be less than spec.upgrade.promotionTimeoutSeconds"],
    ),
    ("negative-replicas", _spec(replicas=-1), ["spec.replicas", "should be greater than or equal to 0"]),
    (
        "negative-acceptable-recovery-lag",
        _spec(acceptableRecoveryLag=-1),
        ["spec.acceptableRecoveryLag", "should be greater than or equal to 0"],
    ),
    (
        "zero-max-warmup-replicas",
        _spec(maxWarmupReplicas=0),
        ["spec.maxWarmupReplicas", "should be greater than or equal to 1"],
    ),
    (
        "probing-interval-below-1s",
        _spec(probingRebalanceIntervalMs=999),
        ["spec.probingRebalanceIntervalMs", "should be greater than or equal to 1000"],
    ),
    (
        "state-size-quantity",
        _spec(state={"size": "lots"}),
        ["spec.state.size", "must be a quantity like 10Gi"],
    ),
    (
        "cron-schedule",
        _spec(compaction={"schedule": "daily"}),
        ["spec.compaction.schedule", "must be a 5-field cron expression"],
    ),
    (
        "spark-master-url",
        _spec(compaction={"sparkMaster": "spark-master:7077"}),
        ["spec.compaction.sparkMaster", "must be local, local[N], local[*], spark://HOST:PORT"],
    ),
    (
        "spark-memory-format",
        _spec(compaction={"spark": {"driverMemory": "4 GB"}}),
        ["spec.compaction.spark.driverMemory", "must look like 512m or 4g"],
    ),
    (
        "spark-conf-owned-by-baton",
        _spec(compaction={"spark": {"conf": {"spark.master": "local[1]"}}}),
        ["spec.compaction.spark.conf", "other than spark.master, spark.jars"],
    ),
    (
        "object-store-without-an-s3a-store",
        _spec(compaction={"snapshotVolumeClaim": "snaps", "objectStore": {"endpoint": "http://minio:9000"}}),
        ["spec.compaction.objectStore", "describes an s3a:// snapshotStore"],
    ),
    (
        "object-store-endpoint-url",
        _spec(compaction={"snapshotStore": "s3a://b/p", "objectStore": {"endpoint": "minio:9000"}}),
        ["spec.compaction.objectStore.endpoint", "must be an http:// or https:// URL"],
    ),
    (
        "object-store-secret-name",
        _spec(compaction={"snapshotStore": "s3a://b/p", "objectStore": {"credentialsSecret": {}}}),
        ["spec.compaction.objectStore.credentialsSecret.name", "Required value"],
    ),
    (
        "replication-factor-zero",
        _spec(kafka={"bootstrapServers": "k:9092", "replicationFactor": 0}),
        ["spec.kafka.replicationFactor", "must be -1 (the broker's default) or at least 1"],
    ),
    (
        "no-processes",
        _spec(processesPerPod=0),
        ["spec.processesPerPod", "should be greater than or equal to 1"],
    ),
    (
        "too-many-processes",
        _spec(processesPerPod=65),
        ["spec.processesPerPod", "should be less than or equal to 64"],
    ),
    (
        "resource-quantity",
        _spec(resources={"requests": {"cpu": "lots"}}),
        ["spec.resources.requests", "must be quantities like 250m or 1Gi"],
    ),
    (
        "deletion-policy-enum",
        _spec(deletionPolicy="Delete"),
        ["spec.deletionPolicy", 'Unsupported value: "Delete"'],
    ),
    (
        "anti-affinity-enum",
        _spec(placement={"antiAffinity": "required"}),
        [
            "spec.placement.antiAffinity",
            'Unsupported value: "required"',
            '"Preferred"',
            '"Required"',
            '"None"',
        ],
    ),
    (
        "placement-topology-key",
        _spec(placement={"antiAffinity": "Required", "topologyKey": "zone please"}),
        ["spec.placement.topologyKey", "must be a Node label key like kubernetes.io/hostname"],
    ),
    (
        "rack-topology-key",
        _spec(rack={"topologyKey": "topology.kubernetes.io/"}),
        ["spec.rack.topologyKey", "must be a Node label key like topology.kubernetes.io/zone"],
    ),
    (
        "mount-of-no-volume",
        _spec(podTemplate={"volumeMounts": [{"name": "certs", "mountPath": "/certs"}]}),
        ["spec.podTemplate.volumeMounts entries must each name a volume of spec.podTemplate.volumes"],
    ),
    (
        "volume-named-like-the-operators",
        _spec(podTemplate={"volumes": [{"name": "state", "emptyDir": {}}]}),
        ["spec.podTemplate.volumes must not use the names state, tmp"],
    ),
    (
        "volume-names-twice",
        _spec(podTemplate={"volumes": [{"name": "a", "emptyDir": {}}, {"name": "a", "emptyDir": {}}]}),
        ["spec.podTemplate.volumes must have distinct names"],
    ),
    (
        "mount-over-the-state",
        _spec(
            podTemplate={
                "volumes": [{"name": "x", "emptyDir": {}}],
                "volumeMounts": [{"name": "x", "mountPath": "/var/lib/baton/rocks"}],
            }
        ),
        ["must not mount over /tmp or /var/lib/baton"],
    ),
    (
        "sidecar-named-worker",
        _spec(podTemplate={"sidecars": [{"name": "worker", "image": "busybox"}]}),
        ["spec.podTemplate.sidecars and initContainers must not be named worker"],
    ),
    (
        "sidecar-and-init-share-a-name",
        _spec(
            podTemplate={
                "sidecars": [{"name": "proxy", "image": "p"}],
                "initContainers": [{"name": "proxy", "image": "p"}],
            }
        ),
        ["spec.podTemplate.sidecars and initContainers must all have distinct names"],
    ),
    (
        "sidecar-without-image",
        _spec(podTemplate={"sidecars": [{"name": "proxy"}]}),
        ["spec.podTemplate.sidecars[0].image: Required value"],
    ),
    (
        "envfrom-both-refs",
        _spec(podTemplate={"envFrom": [{"configMapRef": {"name": "a"}, "secretRef": {"name": "b"}}]}),
        ["spec.podTemplate.envFrom entries must each name exactly one of configMapRef and secretRef"],
    ),
    (
        "named-account-with-annotations",
        _spec(podTemplate={"serviceAccount": {"name": "mine", "annotations": {"a": "b"}}}),
        ["spec.podTemplate.serviceAccount takes either name"],
    ),
    (
        "spread-without-key",
        _spec(
            podTemplate={"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]}
        ),
        ["topologyKey: Required value"],
    ),
    (
        "pod-runs-as-root",
        _spec(podTemplate={"securityContext": {"runAsUser": 0, "fsGroup": 1000}}),
        ["spec.podTemplate.securityContext must not set runAsUser to 0"],
    ),
    (
        "container-not-non-root",
        _spec(podTemplate={"containerSecurityContext": {"runAsNonRoot": False}}),
        ["spec.podTemplate.containerSecurityContext must not set runAsNonRoot to false"],
    ),
    (
        "container-privileged",
        _spec(podTemplate={"containerSecurityContext": {"privileged": True}}),
        ["must not make the worker privileged or allow privilege escalation"],
    ),
    (
        "liveness-success-threshold",
        _spec(podTemplate={"probes": {"liveness": {"successThreshold": 2}}}),
        ["spec.podTemplate.probes.liveness.successThreshold must be 1"],
    ),
    (
        "probe-timeout-over-period",
        _spec(podTemplate={"probes": {"readiness": {"periodSeconds": 5, "timeoutSeconds": 10}}}),
        ["spec.podTemplate.probes.readiness.timeoutSeconds must not exceed its periodSeconds"],
    ),
    (
        "statefulset-reserved-label",
        _spec(podTemplate={"statefulSet": {"labels": {"baton.dev/color": "blue"}}}),
        ["spec.podTemplate.statefulSet.labels must not use the reserved prefixes"],
    ),
    (
        "claim-reserved-label",
        _spec(podTemplate={"persistentVolumeClaim": {"labels": {"app.kubernetes.io/name": "x"}}}),
        ["spec.podTemplate.persistentVolumeClaim.labels must not use the reserved prefixes"],
    ),
    (
        "unknown-log-level",
        _spec(worker={"logLevel": "verbose"}),
        ["spec.worker.logLevel", "supported values"],
    ),
    (
        "placement-and-pod-affinity",
        _spec(placement={"antiAffinity": "Required"}, podTemplate={"affinity": {"nodeAffinity": {}}}),
        ["spec.placement", "must keep its defaults when spec.podTemplate.affinity is set"],
    ),
    (
        "autoscaling-max-below-min",
        _spec(autoscaling={"minReplicas": 4, "maxReplicas": 2}),
        ["spec.autoscaling.maxReplicas must be at least spec.autoscaling.minReplicas"],
    ),
    (
        "autoscaling-max-not-above-standbys",
        _spec(standbyReplicas=1, autoscaling={"maxReplicas": 1}),
        ["spec.autoscaling.maxReplicas must be more than spec.standbyReplicas"],
    ),
    (
        "autoscaling-without-max",
        _spec(autoscaling={"minReplicas": 1}),
        ["spec.autoscaling.maxReplicas: Required value"],
    ),
    (
        "autoscaling-utilization-out-of-range",
        _spec(autoscaling={"maxReplicas": 3, "targetUtilization": 1.5}),
        ["spec.autoscaling.targetUtilization", "less than or equal to 1"],
    ),
    (
        "autoscaling-tolerance-out-of-range",
        _spec(autoscaling={"maxReplicas": 3, "tolerance": 0.95}),
        ["spec.autoscaling.tolerance", "less than or equal to 0.9"],
    ),
    (
        "autoscaling-step-timeout-too-short",
        _spec(autoscaling={"maxReplicas": 3, "stepTimeoutSeconds": 10}),
        ["spec.autoscaling.stepTimeoutSeconds", "greater than or equal to 60"],
    ),
    (
        "autoscaling-empty-policies",
        _spec(autoscaling={"maxReplicas": 3, "behavior": {"scaleDown": {"policies": []}}}),
        ["spec.autoscaling.behavior needs at least one policy per direction, or selectPolicy Disabled"],
    ),
    (
        "autoscaling-policy-type",
        _spec(
            autoscaling={
                "maxReplicas": 3,
                "behavior": {
                    "scaleUp": {"policies": [{"type": "Replicas", "value": 1, "periodSeconds": 60}]}
                },
            }
        ),
        ["spec.autoscaling.behavior.scaleUp.policies[0].type", 'Unsupported value: "Replicas"'],
    ),
    (
        "autoscaling-select-policy",
        _spec(autoscaling={"maxReplicas": 3, "behavior": {"scaleUp": {"selectPolicy": "Average"}}}),
        ["spec.autoscaling.behavior.scaleUp.selectPolicy", 'Unsupported value: "Average"'],
    ),
]


@pytest.fixture
def crds(kubectl: KubectlFn) -> None:
    install_crds(kubectl)


@pytest.fixture(scope="module")
def refusals(kube: Kube) -> dict[str, str]:
    """Each INVALID case's error as kubectl prints it ('' when it was accepted), from one server
    dry run of them all as a List: kubectl creates each item on its own and prints each refusal as an
    error that names the object. One call, not one (plus a namespace's create and delete) per
    case: ~2.6 s a case on a loaded 2-core machine. The CRD lock is held shared (``_crd_shared``
    holds it per test, after this module fixture has run)."""
    kubectl = kubectl_runner(kube.kubectl, kube.kubeconfig)
    names = {f"case-{i}": case for i, (case, _, _) in enumerate(INVALID)}
    items = []
    for name, (_, spec, _) in zip(names, INVALID, strict=True):
        body = example_manifest("default", **spec)  # a dry run needs an existing namespace only
        body["metadata"]["name"] = name
        items.append(body)
    with crd_flock(fcntl.LOCK_SH):
        install_crds(kubectl)
        out = kubectl(
            "create",
            "--dry-run=server",
            # kubectl validates a List on the client, all or nothing, with its own words; a single
            # object's refusals are the server's, which this keeps (no case has an unknown field)
            "--validate=false",
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
            check=False,
        )
    refused = {case: "" for case in names.values()}
    for error in re.split(r"(?m)^(?=Error from server)", out.stderr):  # a message may span lines
        named = re.search(r'StreamApp\.baton\.dev "(case-\d+)" is invalid', error)
        if named:
            refused[names[named[1]]] += error
    return refused


@pytest.mark.parametrize(("case", "spec", "expected"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_spec_is_refused(
    refusals: dict[str, str], case: str, spec: dict[str, Any], expected: list[str]
) -> None:
    message = refusals[case]
    assert message, f"{case} was accepted: {spec}"
    for text in expected:
        assert text in message, f"{case}: {text!r} not in {message}"


def test_long_name_is_refused(crds: None, kubectl: KubectlFn, namespace: str) -> None:
    body = example_manifest(namespace)
    body["metadata"]["name"] = "a" * 47
    out = kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(body), check=False)
    assert out.returncode != 0
    assert "metadata.name must be at most 46 characters" in out.stderr


def test_missing_required_fields(crds: None, kubectl: KubectlFn, namespace: str) -> None:
    body = example_manifest(namespace)
    del body["spec"]["image"], body["spec"]["kafka"]
    out = kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(body), check=False)
    assert out.returncode != 0
    assert "spec.image: Required value" in out.stderr and "spec.kafka: Required value" in out.stderr


@pytest.mark.parametrize(
    ("field", "change", "message"),
    [
        ("applicationId", {"applicationId": "other-id"}, "spec.applicationId is immutable"),
        ("state-store", {"state": {"store": "memory"}}, "spec.state.store is immutable"),
        ("state-shrinks", {"state": {"store": "rocksdb", "size": "512Mi"}}, "spec.state.size may only grow"),
        (
            "state-class",
            {"state": {"store": "rocksdb", "size": "2Gi", "storageClassName": "fast"}},
            "spec.state.storageClassName is immutable",
        ),
    ],
)
def test_immutable_fields(  # noqa: PLR0917 (fixtures and parameters)
    crds: None, kubectl: KubectlFn, namespace: str, field: str, change: dict[str, Any], message: str
) -> None:
    kubectl("apply", "-f", "-", input=json.dumps(example_manifest(namespace)))
    out = kubectl("apply", "-f", "-", input=json.dumps(example_manifest(namespace, **change)), check=False)
    assert out.returncode != 0, f"changing {field} was accepted"
    assert message in out.stderr


def test_state_size_may_grow(crds: None, kubectl: KubectlFn, namespace: str) -> None:
    kubectl("apply", "-f", "-", input=json.dumps(example_manifest(namespace)))
    grown = example_manifest(namespace, state={"store": "rocksdb", "size": "4Gi"})
    kubectl("apply", "-f", "-", input=json.dumps(grown))
    live = json.loads(kubectl("get", "sapp", grown["metadata"]["name"], "-n", namespace, "-o", "json").stdout)
    assert live["spec"]["state"]["size"] == "4Gi"


def test_application_id_cannot_be_added_later(crds: None, kubectl: KubectlFn, namespace: str) -> None:
    body = example_manifest(namespace)
    del body["spec"]["applicationId"]
    kubectl("create", "-f", "-", input=json.dumps(body))
    out = kubectl(
        "patch",
        "sapp",
        "click-counter",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"applicationId": "renamed"}}',
        check=False,
    )
    assert out.returncode != 0
    assert "spec.applicationId is immutable" in out.stderr


def test_defaults_are_applied_and_explained(crds: None, kubectl: KubectlFn, namespace: str) -> None:
    body = example_manifest(namespace)
    for key in ("standbyReplicas", "processingGuarantee", "upgrade", "state"):
        del body["spec"][key]
    kubectl("create", "-f", "-", input=json.dumps(body))
    spec = json.loads(kubectl("get", "sapp", "click-counter", "-n", namespace, "-o", "json").stdout)["spec"]
    assert spec["standbyReplicas"] == 0
    assert spec["acceptableRecoveryLag"] == 10000
    assert spec["maxWarmupReplicas"] == 2
    assert spec["probingRebalanceIntervalMs"] == 600000
    assert spec["processingGuarantee"] == "exactly_once_v2"
    assert spec["upgrade"]["strategy"] == "BlueGreen" and spec["upgrade"]["promotionTimeoutSeconds"] == 1800
    assert spec["state"] == {"store": "rocksdb", "size": "1Gi"}
    assert spec["worker"]["metricsPort"] == 8080
    explained = kubectl("explain", "sapp.spec.standbyReplicas").stdout
    assert "num.standby.replicas" in explained
    assert "max.warmup.replicas" in kubectl("explain", "sapp.spec.maxWarmupReplicas").stdout
    assert "sapp" in kubectl("api-resources", "--api-group=baton.dev").stdout
    assert "streamapps" in kubectl("api-resources", "--categories=baton", "-o", "name").stdout


def test_bluegreen_to_rolling_only_while_blue_is_active(
    crds: None, kubectl: KubectlFn, namespace: str
) -> None:
    """Rolling keeps blue and deletes green: with green active that would stop the output; the
    API server refuses it then, and says why. With blue active (a deploy in flight or not) the
    switch is a rolling update of blue."""
    kubectl("apply", "-f", "-", input=json.dumps(example_manifest(namespace)))

    def status(color: str, phase: str) -> None:
        kubectl(
            "patch",
            "sapp",
            "click-counter",
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"activeColor": color, "phase": phase}}),
        )

    def to_rolling() -> Any:
        return kubectl(
            "patch",
            "sapp",
            "click-counter",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"spec": {"upgrade": {"strategy": "Rolling"}}}',
            check=False,
        )

    for phase in ("Stable", "Deploying"):
        status("green", phase)
        refused = to_rolling()
        assert refused.returncode != 0, phase
        assert "spec.upgrade.strategy can change from BlueGreen to Rolling only while blue is active" in (
            refused.stderr
        )
        assert "baton flip <name> --to blue --bootstrap-servers <kafka>" in refused.stderr
    status("blue", "Deploying")
    allowed = to_rolling()
    assert allowed.returncode == 0, allowed.stderr
    back = kubectl(  # Rolling to BlueGreen adds an idle green: always allowed
        "patch",
        "sapp",
        "click-counter",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"upgrade": {"strategy": "BlueGreen"}}}',
        check=False,
    )
    assert back.returncode == 0, back.stderr


@pytest.mark.parametrize(
    "kafka",
    [
        _kafka(
            tls={"trustedCertificates": [{"secretName": "c"}]},
            authentication={"type": "tls", "certificateAndKey": {"secretName": "u"}},
        ),
        _kafka(
            tls={},
            authentication={"type": "scram-sha-512", "username": "a", "passwordSecret": {"secretName": "p"}},
        ),
        _kafka(
            tls={"trustedCertificates": [{"secretName": "c"}]},
            authentication={
                "type": "oauth",
                "tokenEndpointUri": "https://idp.example/realms/r/protocol/openid-connect/token",
                "clientId": "app",
                "clientSecret": {"secretName": "s", "key": "secret"},
                "scope": "kafka",
            },
        ),
    ],
    ids=["mtls", "scram-over-tls", "oauth"],
)
def test_strimzi_shaped_kafka_access_is_accepted(
    crds: None, kubectl: KubectlFn, namespace: str, kafka: dict[str, Any]
) -> None:
    doc = example_manifest(namespace, kafka=kafka)
    out = kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(doc))
    applied = json.loads(out.stdout)["spec"]["kafka"]
    assert applied["authentication"]["type"] == kafka["authentication"]["type"]


def test_zones_and_placement_are_accepted_and_defaulted(
    crds: None, kubectl: KubectlFn, namespace: str
) -> None:
    """spec.rack: {} means the zone label; placement defaults to what Pods always had; a
    podTemplate.affinity with placement at its defaults is fine."""
    body = example_manifest(namespace, rack={}, podTemplate={"affinity": {"nodeAffinity": {}}})
    body["spec"].pop("placement", None)
    kubectl("create", "-f", "-", input=json.dumps(body))
    spec = json.loads(kubectl("get", "sapp", "click-counter", "-n", namespace, "-o", "json").stdout)["spec"]
    assert spec["rack"] == {"topologyKey": "topology.kubernetes.io/zone"}
    assert spec["placement"] == {"antiAffinity": "Preferred", "topologyKey": "kubernetes.io/hostname"}
    for placement in (
        {"antiAffinity": "Required", "topologyKey": "topology.kubernetes.io/zone"},
        {"antiAffinity": "None"},
    ):
        ok = example_manifest(namespace, placement=placement, rack={"topologyKey": "example.com/rack"})
        kubectl(
            "create",
            "--dry-run=server",
            "-f",
            "-",
            input=json.dumps(ok | {"metadata": {"name": "b", "namespace": namespace}}),
        )
    assert "Strimzi's rack" in kubectl("explain", "sapp.spec.rack").stdout


def test_autoscaling_is_accepted_and_defaulted(crds: None, kubectl: KubectlFn, namespace: str) -> None:
    """spec.autoscaling needs only maxReplicas; the rest takes the documented defaults; with
    standbys, maxReplicas standbyReplicas + 1 is enough; selectPolicy Disabled needs no policy."""
    body = example_manifest(
        namespace,
        standbyReplicas=1,
        autoscaling={
            "maxReplicas": 2,
            "behavior": {"scaleDown": {"selectPolicy": "Disabled", "policies": []}},
        },
    )
    kubectl("create", "-f", "-", input=json.dumps(body))
    spec = json.loads(kubectl("get", "sapp", "click-counter", "-n", namespace, "-o", "json").stdout)["spec"]
    assert spec["autoscaling"] == {
        "minReplicas": 1,
        "maxReplicas": 2,
        "targetUtilization": 0.7,
        "drainSeconds": 120,
        "tolerance": 0.2,
        "stepTimeoutSeconds": 900,
        "behavior": {"scaleDown": {"selectPolicy": "Disabled", "policies": []}},
    }
    assert "targetUtilization" in kubectl("explain", "sapp.spec.autoscaling").stdout
