"""A principal with exactly the ACLs docs/security.md lists runs the click counter exactly-once;
with Write on its transactional ids revoked mid-run, the worker says which grant is missing and
stops (a Pod is then not ready); with the grant restored, a restart loses and repeats nothing.

The broker denies by default (``allow.everyone.if.no.acl.found=false``); the principal is a
SCRAM user of this test's own over SASL_SSL.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from batondev import kafka as stack_kafka
from batondev.paths import CLICK_COUNTER

from baton.testing import WorkerProcess, produce, wait_for
from tests.support import acls
from tests.support.secured import clicks, exact_sequences, properties_file

pytestmark = pytest.mark.integration

USERS = 20


def test_exactly_the_documented_acls_suffice_and_a_missing_one_is_named(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(2, name=f"{unique_name}-clicks")
    sink = new_topic(2, name=f"{unique_name}-counts")
    user = f"{unique_name}-user"
    principal = f"User:{user}"
    grants = acls.app_grants(unique_name, [source], [sink])
    acls.grant(principal, grants)
    config = properties_file(acls.scram_user(user, "pw-" + unique_name), tmp_path / "client.properties")
    worker = WorkerProcess(
        CLICK_COUNTER,
        bootstrap=stack_kafka.sasl_ssl_bootstrap(),
        application_id=unique_name,
        state_dir=tmp_path / "state",
        log_path=tmp_path / "worker.log",
        instance_id="w0",
        env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink},
        extra_args=["--kafka-config-file", str(config)],
    )
    expected = Counter[str]()

    def send(start: int, n: int) -> None:
        batch = clicks(USERS, n, start)
        produce(kafka_bootstrap, source, batch)
        expected.update(k.decode() for k, _ in batch)

    txn = acls.transactional_write(unique_name)
    try:
        worker.start().wait_ready(60)
        send(0, 2000)
        wait_for(
            "exact with the documented ACLs", lambda: exact_sequences(kafka_bootstrap, sink, expected), 60
        )

        acls.revoke(principal, [txn])
        revoked = time.monotonic()
        send(2000, 500)
        code = worker.wait(30)  # it stops, saying what to grant
        assert code != 0 and time.monotonic() - revoked < 30
        said = [str(x.get("error")) for x in worker.logs() if x.get("level") == "error"]
        assert any("TransactionalId prefix" in s and "Write" in s for s in said), said

        send(2500, 500)  # while it is down
        acls.grant(principal, [txn])
        worker.start().wait_ready(60)
        send(3000, 500)
        wait_for(
            "exact after the grant came back",
            lambda: exact_sequences(kafka_bootstrap, sink, expected),
            90,
            every=2,
        )
    finally:
        if worker.alive:
            worker.stop(30)
