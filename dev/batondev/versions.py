"""Pinned versions of everything the local stack installs (one place to bump)."""

KUBERNETES = "v1.35.4"
ETCD = "v3.6.16"
HELM = "v3.21.4"
KAFKA = "4.3.1"
SCALA = "2.13"
