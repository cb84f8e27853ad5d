"""One set of Kafka client settings for every client Baton opens (pure).

Users write librdkafka's property names (``-X key=value``, ``--kafka-config-file``,
``BATON_KAFKA_CONFIG``): that is what the worker's data path (confluent-kafka) speaks and
what most Kafka users already keep in a ``client.properties``. Three client libraries
must carry them:

* ``librdkafka``: the data consumer and producer, admin, restore and standby consumers,
  control-topic clients, the operator's admin, ``baton flip`` and the compactor's own reads;
* ``kafka-python``: the group member that runs Baton's assignor, and the operator's group
  reads (its names differ: ``ssl_cafile``, ``sasl_plain_username``, a token provider);
* ``java``: Spark's Kafka source (JAAS lines, PEM truststores and keystores).

A connection setting (``security.protocol``, ``sasl.*``, ``ssl.*``) decides whether a
client can talk to the broker at all, so it must reach *every* client a process opens: one
that a client library cannot carry is refused at start-up, naming the setting and the
client, instead of being dropped (a dropped CA or password is a client that cannot
connect, found an hour later). Tuning settings (``linger.ms``, ``fetch.max.bytes``) go to
librdkafka only, and ``consumer.``/``producer.`` prefixes route them to one role.

Why a table and not a pass-through: each library spells the same thing differently, and
Java's client ignores unknown names with a warning. This module is the one place that
knows the three spellings; the worker, the operator, the CLIs and the compactor call it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Client = Literal["librdkafka", "kafka-python", "java"]
Role = Literal["consumer", "producer", "admin"]

# The clients each Baton process opens; a connection setting must reach all of them.
WORKER_CLIENTS: tuple[Client, ...] = ("librdkafka", "kafka-python")
OPERATOR_CLIENTS: tuple[Client, ...] = ("librdkafka", "kafka-python")
COMPACTOR_CLIENTS: tuple[Client, ...] = ("librdkafka", "java")
CLI_CLIENTS: tuple[Client, ...] = ("librdkafka",)

_CLIENT_NAMES: dict[Client, str] = {
    "librdkafka": "the librdkafka clients (confluent-kafka)",
    "kafka-python": "the group membership client (kafka-python)",
    "java": "Spark's Kafka source (the Java client)",
}

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

# Settings librdkafka accepts only on a consumer: never handed to a producer or an admin
# (librdkafka warns about each one it ignores).
CONSUMER_ONLY = frozenset(
    {
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "fetch.min.bytes",
        "fetch.wait.max.ms",
        "fetch.max.bytes",
        "fetch.queue.backoff.ms",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "auto.offset.reset",
        "group.protocol",
        "isolation.level",
        "enable.partition.eof",
    }
)

# Connection settings Baton knows how to carry (librdkafka names). Everything else under
# these prefixes is refused, because at least one client library cannot carry it.
_CONNECTION_PREFIXES = ("security.", "sasl.", "ssl.", "enable.ssl.")
_SUPPORTED = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "sasl.oauthbearer.method",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.scope",
        "ssl.ca.location",
        "ssl.ca.pem",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "enable.ssl.certificate.verification",
    }
)
# Connection settings each library cannot carry, with the reason and what to use instead.
_CANNOT: dict[str, dict[Client, str]] = {
    "enable.ssl.certificate.verification": {
        "java": "Java's Kafka client always verifies the broker's certificate chain; give the CA "
        "with ssl.ca.location instead",
    },
}
_HINTS = {
    "ssl.keystore.location": "give the client certificate and key as PEM files: ssl.certificate.location "
    "and ssl.key.location (a Strimzi KafkaUser Secret's user.crt and user.key)",
    "ssl.keystore.password": "give the client certificate and key as PEM files: ssl.certificate.location "
    "and ssl.key.location",
    "ssl.certificate.pem": "write the certificate to a file and give ssl.certificate.location",
    "ssl.key.pem": "write the key to a file and give ssl.key.location",
    "sasl.oauthbearer.config": "unsecured JWTs are for tests of librdkafka only; use "
    "sasl.oauthbearer.method=oidc with a token endpoint",
}

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
JAVA_OAUTH_CALLBACK = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


class SettingRefused(ValueError):
    """A Kafka setting that cannot be used: names the setting, the client and what to do."""

    def __init__(self, key: str, why: str, client: Client | None = None) -> None:
        self.key = key
        self.client = client
        where = f" for {_CLIENT_NAMES[client]}" if client else ""
        super().__init__(f"Kafka setting {key!r} is refused{where}: {why}")


@dataclass(frozen=True)
class OAuthClientCredentials:
    """OIDC client-credentials grant: what every client needs to fetch its own token."""

    token_endpoint: str
    client_id: str
    client_secret: str
    scope: str | None = None


@dataclass(frozen=True)
class TlsFiles:
    """TLS material as files (mounted Secrets), the one form all three libraries read."""

    ca_location: str | None = None
    ca_pem: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = None
    check_hostname: bool = True
    verify: bool = True


def _is_connection(key: str) -> bool:
    return key.startswith(_CONNECTION_PREFIXES)


@dataclass(frozen=True)
class KafkaSettings:
    """The bootstrap servers plus librdkafka-named settings, checked once, projected per client."""

    bootstrap_servers: str
    properties: Mapping[str, str] = field(default_factory=dict)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def of(
        cls, bootstrap_servers: str, *layers: Mapping[str, Any], clients: Iterable[Client] = ()
    ) -> KafkaSettings:
        """Merge ``layers`` (later wins; e.g. a properties file, then ``-X``) and check them
        for ``clients``; ``bootstrap.servers`` in a layer is ignored in favour of the argument."""
        merged: dict[str, str] = {}
        for layer in layers:
            merged.update({str(k).strip(): str(v).strip() for k, v in layer.items()})
        merged.pop("bootstrap.servers", None)
        settings = cls(bootstrap_servers, merged)
        settings.check(clients)
        return settings

    # -- what is set ------------------------------------------------------------------------
    @property
    def protocol(self) -> str:
        return self.properties.get("security.protocol", "PLAINTEXT").upper()

    @property
    def mechanism(self) -> str | None:
        if not self.protocol.startswith("SASL_"):
            return None
        value = self.properties.get("sasl.mechanism") or self.properties.get("sasl.mechanisms") or "GSSAPI"
        return value.upper()

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def connection(self) -> dict[str, str]:
        """The connection settings alone (unprefixed): what every client must carry."""
        return {k: v for k, v in self.properties.items() if _is_connection(k)}

    def oauth(self) -> OAuthClientCredentials | None:
        if self.mechanism != "OAUTHBEARER":
            return None
        p = self.properties
        return OAuthClientCredentials(
            token_endpoint=p["sasl.oauthbearer.token.endpoint.url"],
            client_id=p["sasl.oauthbearer.client.id"],
            client_secret=p.get("sasl.oauthbearer.client.secret", ""),
            scope=p.get("sasl.oauthbearer.scope") or None,
        )

    def tls(self) -> TlsFiles | None:
        if not self.uses_tls:
            return None
        p = self.properties
        return TlsFiles(
            ca_location=p.get("ssl.ca.location"),
            ca_pem=p.get("ssl.ca.pem"),
            certificate_location=p.get("ssl.certificate.location"),
            key_location=p.get("ssl.key.location"),
            key_password=p.get("ssl.key.password"),
            check_hostname=p.get("ssl.endpoint.identification.algorithm", "https").lower() == "https",
            verify=p.get("enable.ssl.certificate.verification", "true").lower() != "false",
        )

    # -- checks -------------------------------------------------------------------------------
    def check(self, clients: Iterable[Client]) -> None:
        """Refuse what is inconsistent or what one of ``clients`` cannot carry (first problem)."""
        clients = tuple(clients)
        for key in sorted(self.properties):
            self._check_key(key, clients)
        if self.protocol not in PROTOCOLS:
            raise SettingRefused("security.protocol", f"expected one of {', '.join(PROTOCOLS)}")
        self._check_sasl()
        self._check_tls()

    @staticmethod
    def _check_key(key: str, clients: tuple[Client, ...]) -> None:
        """One setting: a connection setting must be unprefixed, known, and carried by every client."""
        bare = key.removeprefix("consumer.").removeprefix("producer.")
        if _is_connection(bare) and bare != key:
            raise SettingRefused(key, "connection settings apply to every client; drop the prefix")
        if not _is_connection(key):
            return
        if key not in _SUPPORTED:
            close = difflib.get_close_matches(key, sorted(_SUPPORTED), n=1)
            hint = _HINTS.get(
                key,
                f"did you mean {close[0]!r}?"
                if close
                else "Baton carries these security settings: " + ", ".join(sorted(_SUPPORTED)),
            )
            client = next((c for c in clients if c != "librdkafka"), None)
            raise SettingRefused(key, hint, client)
        for each in clients:
            why = _CANNOT.get(key, {}).get(each)
            if why is not None:
                raise SettingRefused(key, why, each)

    def _check_sasl(self) -> None:
        """The mechanism is one Baton supports, with the settings it needs."""
        mechanism = self.mechanism
        if mechanism is not None and mechanism not in MECHANISMS:
            raise SettingRefused(
                "sasl.mechanism",
                f"{mechanism} is not supported; Baton supports {', '.join(MECHANISMS)}"
                + (" (Kerberos is not)" if mechanism == "GSSAPI" else ""),
            )
        if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            for key in ("sasl.username", "sasl.password"):
                if key not in self.properties:
                    raise SettingRefused(
                        key, f"sasl.mechanism {mechanism} needs sasl.username and sasl.password"
                    )
        if mechanism == "OAUTHBEARER":
            if self.properties.get("sasl.oauthbearer.method", "").lower() != "oidc":
                raise SettingRefused(
                    "sasl.oauthbearer.method",
                    "OAUTHBEARER needs sasl.oauthbearer.method=oidc with a token endpoint, client id and "
                    "secret (OIDC client credentials)",
                )
            for key in ("sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.client.id"):
                if key not in self.properties:
                    raise SettingRefused(key, "OAUTHBEARER (oidc) needs a token endpoint and a client id")

    def _check_tls(self) -> None:
        """A certificate comes with its key, and TLS settings only with a protocol that uses TLS."""
        has_cert = "ssl.certificate.location" in self.properties
        has_key = "ssl.key.location" in self.properties
        if has_cert != has_key:
            raise SettingRefused(
                "ssl.key.location" if has_cert else "ssl.certificate.location",
                "a client certificate needs its key and the key its certificate",
            )
        if not self.uses_tls:
            tls_keys = sorted(k for k in self.properties if k.startswith(("ssl.", "enable.ssl.")))
            if tls_keys:
                raise SettingRefused(
                    tls_keys[0], f"security.protocol {self.protocol} does not use TLS; use SSL or SASL_SSL"
                )

    # -- librdkafka -------------------------------------------------------------------------
    def common(self) -> dict[str, Any]:
        """Settings any librdkafka client takes, consumer or producer (no bootstrap): the
        connection's and unprefixed tuning that is neither consumer- nor producer-only."""
        out = self.librdkafka("admin")
        del out["bootstrap.servers"]
        return out

    def librdkafka(self, role: Role) -> dict[str, Any]:
        """Settings for a confluent-kafka client of ``role`` (bootstrap included)."""
        out: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        for key, value in self.properties.items():
            if key.startswith("consumer."):
                if role == "consumer":
                    out[key.removeprefix("consumer.")] = value
            elif key.startswith("producer."):
                if role == "producer":
                    out[key.removeprefix("producer.")] = value
            elif key in CONSUMER_ONLY:
                if role == "consumer":
                    out[key] = value
            elif key.startswith(PRODUCER_ONLY_PREFIXES):
                if role == "producer":
                    out[key] = value
            else:
                out[key] = value
        return out

    # -- kafka-python ----------------------------------------------------------------------
    def kafka_python(self) -> dict[str, Any]:
        """kafka-python's names for the connection settings and the group timings it runs.

        TLS becomes an ``ssl.SSLContext`` and OAUTHBEARER a token provider: both are built
        by ``baton.clients.kafka_python`` (they read files and the network); here they are
        the ``TlsFiles`` and ``OAuthClientCredentials`` to build them from.
        """
        out: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "security_protocol": self.protocol,
        }
        for key, name in _KAFKA_PYTHON_TIMINGS.items():
            for spelled in (key, f"consumer.{key}"):
                if spelled in self.properties:
                    out[name] = int(self.properties[spelled])
        if "client.id" in self.properties:
            out["client_id"] = self.properties["client.id"]
        mechanism = self.mechanism
        if mechanism is not None:
            out["sasl_mechanism"] = mechanism
            if mechanism == "OAUTHBEARER":
                out["sasl_oauth_token_provider"] = self.oauth()
            else:
                out["sasl_plain_username"] = self.properties["sasl.username"]
                out["sasl_plain_password"] = self.properties["sasl.password"]
        tls = self.tls()
        if tls is not None:
            out["ssl_context"] = tls
        return out

    # -- Java (Spark's Kafka source) -------------------------------------------------------
    def java(self, read: Callable[[str], str] | None = None) -> dict[str, str]:
        """The Java client's settings (no ``kafka.`` prefix): connection settings translated,
        ``client.id`` kept, librdkafka tuning left out (the Java client has names of its own).

        A client certificate and key in two PEM files go inline (``ssl.keystore.key``,
        ``ssl.keystore.certificate.chain``): Java's PEM keystore file wants both in one file.
        ``read`` reads those files (the driver reads them; executors get the text).
        """
        self.check(("java",))
        p = self.properties
        out: dict[str, str] = {"security.protocol": self.protocol}
        if "client.id" in p:
            out["client.id"] = p["client.id"]
        mechanism = self.mechanism
        if mechanism is not None:
            out["sasl.mechanism"] = mechanism
            if mechanism == "OAUTHBEARER":
                oauth = self.oauth()
                assert oauth is not None
                out["sasl.login.callback.handler.class"] = JAVA_OAUTH_CALLBACK
                out["sasl.oauthbearer.token.endpoint.url"] = oauth.token_endpoint
                options = (
                    f"clientId={_jaas_quote(oauth.client_id)} clientSecret={_jaas_quote(oauth.client_secret)}"
                )
                if oauth.scope:
                    options += f" scope={_jaas_quote(oauth.scope)}"
                out["sasl.jaas.config"] = f"{_LOGIN_MODULES[mechanism]} required {options};"
            else:
                out["sasl.jaas.config"] = (
                    f"{_LOGIN_MODULES[mechanism]} required username={_jaas_quote(p['sasl.username'])} "
                    f"password={_jaas_quote(p['sasl.password'])};"
                )
        tls = self.tls()
        if tls is not None:
            if tls.ca_location:
                out["ssl.truststore.type"] = "PEM"
                out["ssl.truststore.location"] = tls.ca_location
            elif tls.ca_pem:
                out["ssl.truststore.type"] = "PEM"
                out["ssl.truststore.certificates"] = tls.ca_pem
            if tls.certificate_location and tls.key_location:
                reader = read or _read_text
                out["ssl.keystore.type"] = "PEM"
                out["ssl.keystore.certificate.chain"] = reader(tls.certificate_location)
                out["ssl.keystore.key"] = reader(tls.key_location)
                if tls.key_password:
                    out["ssl.key.password"] = tls.key_password
            if not tls.check_hostname:
                out["ssl.endpoint.identification.algorithm"] = ""
        return out


# Producer tuning an admin client has no use for (librdkafka would warn about each one).
PRODUCER_ONLY_PREFIXES = (
    "linger.ms",
    "batch.",
    "acks",
    "enable.idempotence",
    "transaction",
    "compression.",
    "queue.buffering.",
    "message.timeout.ms",
    "partitioner",
    "delivery.",
)
_KAFKA_PYTHON_TIMINGS = {
    "session.timeout.ms": "session_timeout_ms",
    "heartbeat.interval.ms": "heartbeat_interval_ms",
    "max.poll.interval.ms": "max_poll_interval_ms",
}


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()
