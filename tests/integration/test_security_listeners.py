"""The click counter on each secured listener of the stack's broker, configured only through
``--kafka-config-file``: two exactly-once workers with one standby, one SIGKILLed mid-run and
restarted after its session expired (its tasks fail over, some by standby promotion), and every
user's committed counts strictly 1..n.

Every Kafka client of the workers (consumer, producer, admin, restore and standby consumers,
the group member) must connect with the file's settings: the broker enforces TLS client
certificates, SCRAM or OAuth tokens from the stack's Keycloak on these listeners, and grants
the stack's principal, not ANONYMOUS, what it does.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from batondev.paths import CLICK_COUNTER

from baton.testing import WorkerProcess, produce, wait_for
from tests.support.secured import LISTENERS, clicks, exact_sequences, listener, properties_file

pytestmark = pytest.mark.integration

USERS = 50
EVENTS = 6000
SESSION_MS = 6000


@pytest.mark.parametrize("name", LISTENERS)
def test_click_counter_is_exact_over_a_secured_listener_across_a_kill(
    name: str, kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(4, name=f"{unique_name}-clicks")
    sink = new_topic(4, name=f"{unique_name}-counts")
    bootstrap, settings = listener(name)
    config = properties_file(settings, tmp_path / "client.properties")
    workers = [
        WorkerProcess(
            CLICK_COUNTER,
            bootstrap=bootstrap,
            application_id=unique_name,
            state_dir=tmp_path / f"s{i}",
            log_path=tmp_path / f"w{i}.log",
            instance_id=f"w{i}",
            env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink},
            extra_args=[
                "--kafka-config-file",
                str(config),
                "--num-standby-replicas",
                "1",
                "-X",
                f"consumer.session.timeout.ms={SESSION_MS}",
            ],
        ).start()
        for i in range(2)
    ]
    records = clicks(USERS, EVENTS)
    expected = Counter(k.decode() for k, _ in records)

    def feed() -> None:  # the producer side is the test's, over PLAINTEXT
        for i in range(0, len(records), 300):
            produce(kafka_bootstrap, source, records[i : i + 300])
            time.sleep(0.25)

    feeder = threading.Thread(target=feed)
    try:
        for w in workers:
            w.wait_ready(60)
        feeder.start()
        time.sleep(1.5)
        victim = workers[0]
        victim.kill(signal.SIGKILL)
        victim.wait(10)
        time.sleep(SESSION_MS / 1000 + 2)  # past the session: its tasks move to the survivor
        victim.start()
        feeder.join()
        wait_for(
            f"counts over {name} never became exact",
            lambda: exact_sequences(kafka_bootstrap, sink, expected),
            120,
            every=2,
        )
        survivor_events = [x.get("msg") for x in workers[1].logs(current_run_only=False)]
        assert "standby promoted" in survivor_events or "active task started" in survivor_events
        # a refusal, not an address: "sasl_ssl://..." names every broker of this listener
        refused = re.compile(
            r"authentication (failed|error)|authorization failed|AUTHORIZATION_FAILED|SSL handshake failed",
            re.IGNORECASE,
        )
        for w in workers:  # nothing was refused on the way, by any client
            lines = [x for x in w.logs(current_run_only=False) if refused.search(orjson.dumps(x).decode())]
            assert lines == [], lines
    finally:
        for w in workers:
            if w.alive:
                w.stop(30)
