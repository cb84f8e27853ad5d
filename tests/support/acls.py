"""Principals of the stack's broker with exactly the ACLs docs/security.md lists, made per test.

The stack's broker denies by default (``allow.everyone.if.no.acl.found=false``); its PLAINTEXT
listener is a super user, through which a test makes a SCRAM user and grants it what an app's
principal needs, per docs/security.md, nothing more.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from batondev import kafka as stack_kafka
from batondev import tls
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

Op = AclOperation


@dataclass(frozen=True)
class Grant:
    """One ACL: ``operations`` on a resource (literal name, or every name with ``prefix``)."""

    kind: ResourceType
    name: str
    operations: tuple[AclOperation, ...]
    prefixed: bool = False

    def bindings(self, principal: str) -> list[AclBinding]:
        pattern = ResourcePatternType.PREFIXED if self.prefixed else ResourcePatternType.LITERAL
        return [
            AclBinding(self.kind, self.name, pattern, principal, "*", op, AclPermissionType.ALLOW)
            for op in self.operations
        ]


def app_grants(application_id: str, inputs: Iterable[str], outputs: Iterable[str]) -> list[Grant]:
    """What docs/security.md says an app's principal needs ("The worker's ACLs")."""
    return [
        *(Grant(ResourceType.TOPIC, t, (Op.READ, Op.DESCRIBE)) for t in inputs),
        *(Grant(ResourceType.TOPIC, t, (Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS)) for t in outputs),
        Grant(
            ResourceType.TOPIC,
            f"{application_id}-",
            (Op.CREATE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.READ, Op.WRITE, Op.DELETE),
            prefixed=True,
        ),
        Grant(ResourceType.GROUP, application_id, (Op.READ, Op.DESCRIBE), prefixed=True),
        Grant(ResourceType.TRANSACTIONAL_ID, f"{application_id}-", (Op.WRITE, Op.DESCRIBE), prefixed=True),
    ]


def compactor_grants(application_id: str, inputs: Iterable[str] = ()) -> list[Grant]:
    """What docs/security.md says the compactor's principal needs ("The compactor's ACLs")."""
    return [
        Grant(
            ResourceType.TOPIC,
            f"{application_id}-",
            (Op.READ, Op.DESCRIBE, Op.DESCRIBE_CONFIGS),
            prefixed=True,
        ),
        *(Grant(ResourceType.TOPIC, t, (Op.READ, Op.DESCRIBE)) for t in inputs),
        Grant(ResourceType.GROUP, application_id, (Op.READ, Op.DESCRIBE), prefixed=True),
    ]


def transactional_write(application_id: str) -> Grant:
    """Write on the app's transactional ids: the grant an exactly-once producer cannot do without."""
    return Grant(ResourceType.TRANSACTIONAL_ID, f"{application_id}-", (Op.WRITE,), prefixed=True)


@functools.cache
def admin() -> AdminClient:
    """One client for the process: a client collected before its futures resolve fails them."""
    return AdminClient({"bootstrap.servers": stack_kafka.bootstrap(), "log_level": 0})


def grant(principal: str, grants: Iterable[Grant]) -> None:
    bindings = [b for g in grants for b in g.bindings(principal)]
    for fut in admin().create_acls(bindings).values():
        fut.result(30)


def revoke(principal: str, grants: Iterable[Grant]) -> None:
    filters = [
        AclBindingFilter(
            b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type
        )
        for g in grants
        for b in g.bindings(principal)
    ]
    for fut in admin().delete_acls(filters).values():
        fut.result(30)


def scram_user(name: str, password: str) -> dict[str, str]:
    """Make (or reset) a SCRAM-SHA-512 user; returns its SASL_SSL settings (librdkafka names)."""
    upsert = UserScramCredentialUpsertion(
        name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
    )
    for fut in admin().alter_user_scram_credentials([upsert]).values():
        fut.result(30)
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": name,
        "sasl.password": password,
        "ssl.ca.location": str(tls.ca_file()),
    }
