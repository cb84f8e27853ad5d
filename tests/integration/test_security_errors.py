"""Bad credentials and settings a client cannot carry: one line naming the problem, a non-zero
exit, within 30 s, against the stack broker's enforcing listeners (not pages of librdkafka)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from batondev import kafka as stack_kafka
from batondev import tls
from batondev.paths import CLICK_COUNTER

from tests.support.secured import listener, oauth_settings

pytestmark = pytest.mark.integration


def _cases(tmp: Path) -> dict[str, tuple[str, dict[str, str], str]]:
    """name -> (bootstrap, settings, a phrase the one line must hold)."""
    scram_bootstrap, scram = listener("sasl-ssl-scram-sha-512")
    expired = tls.issue_client("expired-app", tmp, expired=True)
    untrusted = tls.issue_client("untrusted-app", tmp, untrusted=True)
    return {
        "wrong-password": (
            scram_bootstrap,
            {**scram, "sasl.password": "not-the-password"},
            "check sasl.username ('baton') and sasl.password",
        ),
        "untrusted-client-certificate": (
            stack_kafka.mtls_bootstrap(),
            untrusted.settings(),
            "does not accept the client certificate",
        ),
        "expired-client-certificate": (
            stack_kafka.mtls_bootstrap(),
            expired.settings(),
            "does not accept the client certificate",
        ),
        "untrusted-broker": (
            scram_bootstrap,
            {k: v for k, v in scram.items() if k != "ssl.ca.location"},
            "not signed by the CA in ssl.ca.location",
        ),
        "unknown-oauth-client": (
            stack_kafka.oauth_bootstrap(),
            oauth_settings("no-such-client", "whatever"),
            "refused client 'no-such-client'",
        ),
        "setting-kafka-python-cannot-carry": (
            stack_kafka.mtls_bootstrap(),
            {**tls.stack_client().settings(), "ssl.keystore.location": str(tmp / "user.p12")},
            "'ssl.keystore.location' is refused for the group membership client",
        ),
        "misspelled-security-setting": (
            stack_kafka.mtls_bootstrap(),
            {"security.protocol": "SSL", "ssl.ca.locaton": str(tls.ca_file())},
            "did you mean 'ssl.ca.location'?",
        ),
        "misspelled-tuning-setting": (
            stack_kafka.bootstrap(),
            {"linger.msx": "5"},
            'No such configuration property: "linger.msx"',
        ),
        "setting-nobody-carries": (
            scram_bootstrap,
            {**scram, "sasl.kerberos.service.name": "kafka"},
            "'sasl.kerberos.service.name' is refused",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "wrong-password",
        "untrusted-client-certificate",
        "expired-client-certificate",
        "untrusted-broker",
        "unknown-oauth-client",
        "setting-kafka-python-cannot-carry",
        "misspelled-security-setting",
        "misspelled-tuning-setting",
        "setting-nobody-carries",
    ],
)
def test_a_refused_connection_is_one_line_and_a_non_zero_exit(
    case: str, kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(2, name=f"{unique_name}-clicks")
    bootstrap, settings, phrase = _cases(tmp_path)[case]
    args = [sys.executable, "-m", "baton.cli", "run", str(CLICK_COUNTER), "--bootstrap-servers", bootstrap]
    args += ["--application-id", unique_name, "--state-dir", str(tmp_path / "state"), "--metrics-port", "0"]
    for key, value in settings.items():
        args += ["-X", f"{key}={value}"]
    started = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, env=_env(source))
    took = time.monotonic() - started
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode != 0, lines
    assert took < 30, f"{case} took {took:.1f}s"
    # a plain-HTTP token endpoint is worth its one warning line; the error is one line
    errors = [line for line in lines if "plain HTTP" not in line]
    assert len(errors) <= 3 and any(phrase in line for line in errors), "\n".join(lines)
    assert not any(line.startswith(("%3|", "%4|", "Traceback")) for line in lines), "\n".join(lines)


def _env(source: str) -> dict[str, str]:
    import os

    return {**os.environ, "CLICKS_TOPIC": source, "COUNTS_TOPIC": f"{source}-out"}
