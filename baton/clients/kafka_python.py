"""kafka-python's keyword arguments from the one set of settings: TLS context and OAuth tokens.

kafka-python takes TLS as file paths or an ``ssl.SSLContext`` and OAUTHBEARER as a token
provider object; librdkafka takes file paths, inline PEM and an OIDC token endpoint. Building
the context and the provider here (from :class:`~baton.clients.settings.KafkaSettings`) gives
the group member exactly what librdkafka's clients get: the same CA (file or inline PEM), the
same client certificate, hostname verification on unless turned off, and a token from the same
OIDC client credentials.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

from kafka import KafkaAdminClient

from baton.clients.oauth import ClientCredentialsTokenProvider
from baton.clients.settings import KafkaSettings, OAuthClientCredentials, TlsFiles


def ssl_context(tls: TlsFiles) -> ssl.SSLContext:
    """A client TLS context; raises OSError/ssl.SSLError naming nothing, so callers add the key."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=tls.ca_location, cadata=tls.ca_pem)
    ctx.check_hostname = tls.check_hostname and tls.verify
    if not tls.verify:
        ctx.verify_mode = ssl.CERT_NONE
    if tls.certificate_location and tls.key_location:
        ctx.load_cert_chain(tls.certificate_location, tls.key_location, password=tls.key_password)
    return ctx


def kafka_python_config(settings: KafkaSettings) -> dict[str, Any]:
    """Keyword arguments for a kafka-python client (consumer or admin) with ``settings``."""
    out = settings.kafka_python()
    tls = out.pop("ssl_context", None)
    if isinstance(tls, TlsFiles):
        out["ssl_context"] = ssl_context(tls)
    oauth = out.get("sasl_oauth_token_provider")
    if isinstance(oauth, OAuthClientCredentials):
        out["sasl_oauth_token_provider"] = ClientCredentialsTokenProvider(oauth, verify=_verify(settings))
    return out


def admin_config(config: Mapping[str, Any], request_timeout_ms: int) -> dict[str, Any]:
    """A member's kafka-python keyword arguments trimmed to what ``KafkaAdminClient`` takes,
    which refuses the others (the group timings are a member's, not an admin's), with the
    admin's own request timeout."""
    out = {k: v for k, v in config.items() if k in KafkaAdminClient.DEFAULT_CONFIG}
    out["request_timeout_ms"] = request_timeout_ms
    return out


def _verify(settings: KafkaSettings) -> bool | str:
    """What requests verifies the token endpoint with: the Kafka CA file if one is set (an
    in-cluster OIDC server is usually signed by the same CA), else the system's roots."""
    tls = settings.tls()
    return tls.ca_location if tls is not None and tls.ca_location else True
