"""A real OIDC server for the broker's OAUTHBEARER listener: Keycloak, from Maven Central.

Keycloak's distribution zip is resolved by Maven and unpacked once into
``~/.cache/baton/keycloak-<version>/`` and built there for an in-memory database
(``kc.sh build``, Quarkus' augmentation: ~25 s once), so each start is ``start --optimized``.
It serves one realm, ``baton``, imported at start, whose confidential clients use the
client-credentials grant, as services do against a company's identity provider:

* ``clicks-oauth`` (secret ``clicks-oauth-secret``): the principal the stack grants
  everything, like the SCRAM user ``baton``;
* ``acl-oauth`` (secret ``acl-oauth-secret``): a principal with no grants, for ACL tests.

Tokens are RS256 JWTs; the broker validates them against the realm's JWKS and maps a token to
the principal named by its ``azp`` claim (the client id); its ``aud`` must hold ``kafka``. HTTP on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
import zipfile
from pathlib import Path

from . import maven, paths, ports, procs, versions
from .requirements import need, run

NAME = "keycloak"
REALM = "baton"
CLIENTS = {"clicks-oauth": "clicks-oauth-secret", "acl-oauth": "acl-oauth-secret"}
STACK_CLIENT = "clicks-oauth"
AUDIENCE = "kafka"


def home() -> Path:
    return paths.tool_dir("keycloak", versions.KEYCLOAK) / f"keycloak-{versions.KEYCLOAK}"


def issuer() -> str:
    return f"http://127.0.0.1:{ports.OIDC}/realms/{REALM}"


def token_endpoint() -> str:
    return f"{issuer()}/protocol/openid-connect/token"


def jwks_endpoint() -> str:
    return f"{issuer()}/protocol/openid-connect/certs"


def install() -> Path:
    """Unpack and build Keycloak once per version."""
    root = home().parent
    if (root / ".complete").exists():
        return home()
    shutil.rmtree(root, ignore_errors=True)
    folder = maven.copy_artifact(
        f"org.keycloak:keycloak-quarkus-dist:{versions.KEYCLOAK}:zip",
        root / "dist",
        f"keycloak-{versions.KEYCLOAK}.install.log",
    )
    with zipfile.ZipFile(next(folder.glob("*.zip"))) as zf:
        zf.extractall(root)
    shutil.rmtree(folder)
    kc = home() / "bin" / "kc.sh"
    for script in (home() / "bin").glob("*.sh"):
        script.chmod(0o755)
    run([str(kc), "build", "--db=dev-mem", "--health-enabled=true"], env=_env(), what="kc.sh build")
    (root / ".complete").touch()
    return home()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["JAVA_OPTS_KC_HEAP"] = "-Xms64m -Xmx512m"
    need("java")
    return env


def _realm() -> dict[str, object]:
    return {
        "realm": REALM,
        "enabled": True,
        "accessTokenLifespan": 600,
        "clients": [
            {
                "clientId": client,
                "enabled": True,
                "publicClient": False,
                "secret": secret,
                "serviceAccountsEnabled": True,
                "standardFlowEnabled": False,
                "directAccessGrantsEnabled": False,
                "protocol": "openid-connect",
                # tokens name the broker as their audience, which the broker requires
                "protocolMappers": [
                    {
                        "name": "kafka-audience",
                        "protocol": "openid-connect",
                        "protocolMapper": "oidc-audience-mapper",
                        "config": {"included.custom.audience": AUDIENCE, "access.token.claim": "true"},
                    }
                ],
            }
            for client, secret in CLIENTS.items()
        ],
    }


def _ready() -> bool:
    if not procs.port_open(ports.OIDC):
        return False
    try:
        with urllib.request.urlopen(f"{issuer()}/.well-known/openid-configuration", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def up(timeout: float = 180) -> None:
    if procs.running_pid(NAME) is not None:
        procs.wait_started(NAME, _ready, timeout)
        return
    install()
    procs.ensure_ports_free(NAME, [ports.OIDC, ports.OIDC_MANAGEMENT])
    imports = home() / "data" / "import"
    imports.mkdir(parents=True, exist_ok=True)
    (imports / f"{REALM}-realm.json").write_text(json.dumps(_realm()))
    cmd = [
        str(home() / "bin" / "kc.sh"),
        "start",
        "--optimized",
        "--import-realm",
        "--http-enabled=true",
        "--http-host=127.0.0.1",
        f"--http-port={ports.OIDC}",
        f"--http-management-port={ports.OIDC_MANAGEMENT}",
        f"--hostname=http://127.0.0.1:{ports.OIDC}",
    ]
    procs.start(NAME, cmd, env=_env())
    procs.wait_started(NAME, _ready, timeout)


def down() -> bool:
    return procs.stop(NAME, timeout=30)
