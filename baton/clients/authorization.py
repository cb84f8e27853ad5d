"""A broker's authorization refusal, said as the permission that is missing (pure).

Under ACLs with deny by default, a principal missing one grant sees one of four error codes,
deep inside a client call (``init_transactions``, a commit, a fetch, a topic creation).
Kafka Streams surfaces them as a ``StreamsException`` wrapping the client's; a person then
reads the broker's log to learn what to grant. Baton names the resource and the operation that
docs/security.md says the app's principal needs, so the fix is one ``kafka-acls`` line.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

AUTHORIZATION_CODES = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "group",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "transactional id",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "cluster",
}


def authorization_error(exc: BaseException) -> KafkaError | None:
    """The authorization error inside ``exc`` (a KafkaException, or one it was raised from)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KafkaException) and seen.args and isinstance(seen.args[0], KafkaError):
            err: KafkaError = seen.args[0]
            if err.code() in AUTHORIZATION_CODES:
                return err
        seen = seen.__cause__ or seen.__context__
    return None


def missing_permission(err: KafkaError, application_id: str) -> str:
    """One line: which grant is missing, in docs/security.md's terms."""
    what = AUTHORIZATION_CODES[err.code()]
    if what == "transactional id":
        need = f"Write and Describe on TransactionalId prefix '{application_id}-' (exactly-once producers)"
    elif what == "group":
        need = f"Read and Describe on Group prefix '{application_id}'"
    elif what == "topic":
        need = (
            "Read/Describe on the input topics, Write/Describe/DescribeConfigs on the output topics, and "
            f"Create/Describe/DescribeConfigs/Read/Write/Delete on Topic prefix '{application_id}-'"
        )
    else:
        need = "no cluster-level permission under docs/security.md's grants; a setting asks for one"
    return f"the broker refused this principal ({err.str()}): grant it {need}; see docs/security.md"
