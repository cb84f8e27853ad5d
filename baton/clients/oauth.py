"""OAUTHBEARER tokens for kafka-python from OIDC client credentials (requests-oauthlib).

librdkafka (``sasl.oauthbearer.method=oidc``) and Java's client
(``OAuthBearerLoginCallbackHandler``) fetch their tokens themselves; kafka-python wants an
object whose ``token()`` returns one. This is that object: one client-credentials grant
through requests-oauthlib, the token reused until shortly before it expires.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from kafka.net.sasl.oauth import AbstractTokenProvider
from oauthlib.oauth2 import BackendApplicationClient
from requests_oauthlib import OAuth2Session

from baton.clients.settings import OAuthClientCredentials

log = logging.getLogger("baton.clients.oauth")

REFRESH_MARGIN_S = 30.0  # fetch a new token this long before the old one expires
TIMEOUT_S = 10.0


class OAuthTokenError(RuntimeError):
    """The token endpoint refused the client or could not be reached."""


class ClientCredentialsTokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    def __init__(self, credentials: OAuthClientCredentials, verify: bool | str = True) -> None:
        super().__init__()
        if credentials.token_endpoint.startswith("http://"):
            # librdkafka and Java's client accept a plain-HTTP endpoint; oauthlib refuses one
            # unless told: the user chose it, so every client behaves alike (and it is logged).
            os.environ["OAUTHLIB_INSECURE_TRANSPORT"] = "1"
            log.warning(
                "OAuth token endpoint is plain HTTP: client secrets and tokens cross the network unencrypted",
                extra={"token_endpoint": credentials.token_endpoint},
            )
        self._credentials = credentials
        self._verify = verify
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires_at = 0.0

    def token(self) -> str:
        with self._lock:
            if self._token is None or time.monotonic() >= self._expires_at - REFRESH_MARGIN_S:
                self._token, lifetime = self._fetch()
                self._expires_at = time.monotonic() + lifetime
            return self._token

    def _fetch(self) -> tuple[str, float]:
        c = self._credentials
        session = OAuth2Session(client=BackendApplicationClient(client_id=c.client_id), scope=c.scope)
        try:
            got = session.fetch_token(
                token_url=c.token_endpoint,
                client_id=c.client_id,
                client_secret=c.client_secret,
                timeout=TIMEOUT_S,
                verify=self._verify,
            )
        except Exception as exc:  # oauthlib's and requests' errors alike: one message
            raise OAuthTokenError(
                f"OAuth token endpoint {c.token_endpoint} refused client {c.client_id!r}: {exc}"
            ) from exc
        return str(got["access_token"]), float(got.get("expires_in") or 300)
