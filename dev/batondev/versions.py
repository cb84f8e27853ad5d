"""Pinned versions of everything the local stack installs (one place to bump)."""

KUBERNETES = "v1.35.4"
ETCD = "v3.6.16"
HELM = "v3.21.4"
# Lints .github/workflows (tests/dev/test_workflows.py); built from the Go module proxy.
ACTIONLINT = "v1.7.12"
KAFKA = "4.3.1"
SCALA = "2.13"
# MinIO publishes no semver tags, so the module proxy serves commits as pseudo-versions;
# this is the newest commit of its main branch when Baton pinned it.
MINIO = "v0.0.0-20260212201848-7aac2a2c5b7c"
# The OIDC server behind the broker's OAUTHBEARER listener: Keycloak's distribution zip,
# from Maven Central (the identity provider Strimzi documents for Kafka's OAuth).
KEYCLOAK = "26.4.7"
# The local node (dev/stack up node): containerd from the Go module proxy (its runc shim and
# `ctr` too), CoreDNS as the cluster DNS; kubelet and kube-proxy come from KUBERNETES.
CONTAINERD = "v2.2.9"
COREDNS = "v1.15.0"
# The node's volume provisioner (volumeClaimTemplates), as k3s and kind use it.
LOCAL_PATH_PROVISIONER = "v0.0.30"
# crictl, the CRI client `dev/stack down` stops and removes the node's Pods with (network included).
CRI_TOOLS = "v1.34.0"
# The Kubeflow Spark Operator (compaction runner SparkOperator): its controller built from the Go
# module proxy, installed in the stack's cluster from the chart the module carries.
SPARK_OPERATOR = "v2.3.0"
# promtool (checks and unit-tests the chart's alert rules with Prometheus' own engine); Prometheus
# 3's module version (v0.3xx.y is Prometheus 3.xx.y).
PROMETHEUS = "v0.316.0"
