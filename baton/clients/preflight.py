"""Before a command opens its clients: can it reach Kafka and is it let in? One line if not.

librdkafka retries a refused login or a failed TLS handshake for ever and prints a log line
for each attempt (~20 a second); an unreachable broker is a "transport failure" after the
metadata timeout. A person wants one line that says which and what to check. So each command
first asks for metadata with a small client whose log is silenced and whose errors are
collected, and stops at the first authentication or TLS error (or after ``timeout`` with no
broker), explaining it with the settings in force. OAuth tokens are fetched once here too, by
the group member's own token provider, so an unknown client is reported before any group work.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from baton.clients.settings import KafkaSettings

# a person waits for the verdict: under 10 s in all, with the interpreter's start; a broker that
# answers at all answers a metadata request in well under a second
TIMEOUT_S = 6.0
# an input topic created alongside the first start (a script, a Job) gets this long to appear
TOPIC_WAIT_S = 5.0
_FATAL = {KafkaError._AUTHENTICATION, KafkaError._SSL}


class KafkaUnreachable(RuntimeError):
    """Kafka cannot be reached or refused this client: the message is one line for a person."""


def check(settings: KafkaSettings, timeout: float = TIMEOUT_S) -> None:
    """Return once a metadata request succeeded; raise :class:`KafkaUnreachable` otherwise."""
    _librdkafka_accepts(settings)
    oauth = settings.oauth()
    if oauth is not None:
        from baton.clients.kafka_python import kafka_python_config
        from baton.clients.oauth import OAuthTokenError

        try:
            kafka_python_config(settings)["sasl_oauth_token_provider"].token()
        except OAuthTokenError as exc:
            raise KafkaUnreachable(f"{_where(settings)}: {exc}") from exc
    errors: list[KafkaError] = []
    admin = AdminClient({**settings.librdkafka("admin"), "error_cb": errors.append, "log_level": 0})  # type: ignore[dict-item]
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
            return
        except KafkaException as exc:
            last = exc
        admin.poll(0)  # serves error_cb: the errors of the attempts so far
        fatal = next((e for e in errors if _is_fatal(e)), None)
        if fatal is not None:
            raise KafkaUnreachable(explain(settings, fatal))
    telling = [e for e in errors if e.code() != KafkaError._ALL_BROKERS_DOWN]
    reason = (telling or errors)[-1].str() if errors else (last.args[0].str() if last else "no answer")
    raise KafkaUnreachable(
        f"{_where(settings)}: no broker answered within {timeout:.0f} s ({_short(reason)}); "
        "check --bootstrap-servers and that the listener's security.protocol matches"
    )


def missing_topics(settings: KafkaSettings, topics: list[str], wait: float = TOPIC_WAIT_S) -> list[str]:
    """The ``topics`` the broker does not have after ``wait`` seconds (its metadata is asked twice a
    second). Kafka Streams stops with ``MissingSourceTopicException`` rather than wait for an input
    topic: a worker started on a typo'd or uncreated topic says so here instead of waiting
    silently for the internal topics' 60 s."""
    admin = AdminClient({**settings.librdkafka("admin"), "log_level": 0})
    deadline = time.monotonic() + wait
    while True:
        known = admin.list_topics(timeout=TIMEOUT_S).topics
        missing = [t for t in topics if t not in known or known[t].error is not None]
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(0.5)


def _librdkafka_accepts(settings: KafkaSettings) -> None:
    """librdkafka refuses an unknown or malformed property only when a client is made: make
    a consumer and a producer with the settings (and close them) before anything else does."""
    for make, role in ((Consumer, "consumer"), (Producer, "producer")):
        conf = {**settings.librdkafka(role), "log_level": 0}  # type: ignore[arg-type]
        if make is Consumer:
            conf["group.id"] = "baton-preflight"  # never used: nothing is subscribed or committed
        try:
            client = make(conf)
        except KafkaException as exc:
            raise KafkaUnreachable(
                f"Kafka setting refused by librdkafka ({role}): {exc.args[0].str()}"
            ) from None
        if isinstance(client, Consumer):
            client.close()


def _is_fatal(err: KafkaError) -> bool:
    """A refusal that retrying will not change: a failed login or a TLS handshake the broker or
    we rejected (librdkafka reports the broker's TLS alert as a transport error)."""
    text = err.str().lower()
    return err.code() in _FATAL or "ssl alert" in text or "ssl handshake failed" in text


def _where(settings: KafkaSettings) -> str:
    how = settings.protocol + (f"/{settings.mechanism}" if settings.mechanism else "")
    return f"cannot connect to Kafka at {settings.bootstrap_servers} ({how})"


def _short(text: str) -> str:
    """librdkafka's reason without its broker prefix and retry suffix."""
    text = text.split(": ", 1)[1] if text.startswith(("ssl://", "sasl_ssl://", "sasl_plaintext://")) else text
    return text.split(" (after ")[0].strip()


def explain(settings: KafkaSettings, err: KafkaError) -> str:
    """One line: what failed, librdkafka's reason, and the setting to look at."""
    reason = _short(err.str())
    low = reason.lower()
    p = settings.properties
    if "certificate verify failed" in low or "unable to get local issuer" in low:
        hint = "the broker's certificate is not signed by the CA in ssl.ca.location / ssl.ca.pem"
    elif "certificate expired" in low or "certificate has expired" in low:
        hint = f"the client certificate {p.get('ssl.certificate.location', '')} has expired"
    elif any(
        alert in low
        for alert in ("unknown ca", "bad certificate", "certificate required", "certificate unknown")
    ):
        hint = (
            f"the broker does not accept the client certificate {p.get('ssl.certificate.location', '(none)')}: "
            "is it set (ssl.certificate.location, ssl.key.location), unexpired, and signed by a CA the broker trusts?"
        )
    elif "invalid credentials" in low or "authentication failed" in low:
        hint = f"check sasl.username ({p.get('sasl.username', '')!r}) and sasl.password"
    elif "oidc" in low or "token" in low:
        hint = "check sasl.oauthbearer.client.id, client.secret and token.endpoint.url"
    elif err.code() == KafkaError._SSL:
        hint = "check the ssl.* settings and that the listener speaks TLS"
    else:
        hint = "check security.protocol and the sasl.* settings"
    return f"{_where(settings)}: {reason}; {hint}"
