"""The stack's ports on 127.0.0.1, all derived from one base so a second stack can move aside."""

from __future__ import annotations

import os

BASE = int(os.environ.get("BATON_PORT_BASE", "29090"))

KAFKA = BASE + 2  # PLAINTEXT listener
KAFKA_CONTROLLER = BASE + 3
KAFKA_SCRAM = BASE + 4  # SASL_PLAINTEXT with SCRAM-SHA-512
KAFKA_MTLS = BASE + 5  # SSL, client certificates required (mutual TLS)
KAFKA_SASL_SSL = BASE + 6  # SASL_SSL with SCRAM-SHA-512
KAFKA_OAUTH = BASE + 7  # SASL_SSL with OAUTHBEARER, JWTs from the OIDC server
OIDC = BASE + 8  # Keycloak (HTTP): the OIDC server behind KAFKA_OAUTH
OIDC_MANAGEMENT = BASE + 9  # Keycloak's management interface (health)
ETCD_CLIENT = BASE + 10
ETCD_PEER = BASE + 11
APISERVER = BASE + 20
CONTROLLER_MANAGER = BASE + 21
SCHEDULER = BASE + 22
SPARK_MASTER = BASE + 30  # a standalone Spark cluster: master RPC
SPARK_MASTER_UI = BASE + 31
SPARK_WORKER_UI = BASE + 32  # and BASE + 33: one per worker
S3 = BASE + 40  # MinIO's S3 API
S3_CONSOLE = BASE + 41  # MinIO's console port (its web UI is off); MinIO insists on binding one
