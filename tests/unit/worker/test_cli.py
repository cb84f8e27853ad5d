"""`baton run`: its flags and BATON_* variables reach WorkerConfig under the config's own names."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from baton.worker import cli
from baton.worker.config import WorkerConfig, env_var

pytestmark = pytest.mark.unit

ASSIGNOR_SETTINGS = (
    "num_standby_replicas",
    "acceptable_recovery_lag",
    "max_warmup_replicas",
    "probing_rebalance_interval_ms",
)


def _options() -> dict[str, click.Parameter]:
    return {p.name: p for p in cli.run.params if p.name is not None}


def test_every_option_is_a_worker_setting_read_from_its_variable() -> None:
    for name, param in _options().items():
        assert name in WorkerConfig.model_fields, f"--{name} is not a WorkerConfig field"
        # -X takes key=value pairs; BATON_KAFKA_CONFIG (JSON) is read by WorkerConfig itself.
        assert param.envvar in (env_var(name), None if name == "kafka_config" else ""), name


@pytest.mark.parametrize("field", ASSIGNOR_SETTINGS)
def test_assignor_settings_have_flags(field: str) -> None:
    param = _options()[field]
    assert isinstance(param, click.Option)
    assert param.opts == ["--" + field.replace("_", "-")]


class _NoTopics:
    def input_topics(self) -> list[str]:
        return []


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, WorkerConfig]:
    """Run `baton run` up to the Worker, which records its config instead of running."""
    seen: dict[str, WorkerConfig] = {}

    class FakeWorker:
        def __init__(self, config: WorkerConfig, _built: Any, **_hooks: Any) -> None:
            seen["config"] = config

        def run(self) -> int:
            return 0

    fake_runtime = types.ModuleType("baton.worker.runtime.worker")
    fake_runtime.Worker = FakeWorker  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "baton.worker.runtime.worker", fake_runtime)
    monkeypatch.setattr("baton.worker.topology.loader.load", lambda _target: _NoTopics())
    monkeypatch.setattr("baton.worker.logs.setup", lambda _app, **_kw: None)
    # the connection check talks to a broker: tests/integration/test_security_errors.py covers it
    monkeypatch.setattr("baton.clients.preflight.check", lambda _settings: None)
    monkeypatch.setattr("baton.clients.preflight.missing_topics", lambda _settings, _topics: [])
    # what this machine has free and writable: test_laptop_defaults_* cover it
    monkeypatch.setattr(cli, "laptop_defaults", lambda config, _given: config)
    for name in list(os.environ):
        if name.startswith("BATON_"):
            monkeypatch.delenv(name)
    return seen


BASE = ["examples.click_counter:topology", "--bootstrap-servers", "k:9092", "--application-id", "clicks"]


def _invoke(args: list[str], env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(cli.run, args, env=env, catch_exceptions=False)


def test_defaults_are_the_worker_configs(captured: dict[str, WorkerConfig]) -> None:
    result = _invoke(BASE)
    assert result.exit_code == 0, result.output
    config = captured["config"]
    assert config.acceptable_recovery_lag == 10_000
    assert config.max_warmup_replicas == 2
    assert config.probing_rebalance_interval_ms == 600_000


def test_flags_reach_the_config(captured: dict[str, WorkerConfig]) -> None:
    result = _invoke(
        [
            *BASE,
            "--num-standby-replicas",
            "1",
            "--acceptable-recovery-lag",
            "0",
            "--max-warmup-replicas",
            "4",
            "--probing-rebalance-interval-ms",
            "5000",
        ]
    )
    assert result.exit_code == 0, result.output
    config = captured["config"]
    assert config.num_standby_replicas == 1
    assert config.acceptable_recovery_lag == 0
    assert config.max_warmup_replicas == 4
    assert config.probing_rebalance_interval_ms == 5000


def test_variables_reach_the_config_and_flags_win(captured: dict[str, WorkerConfig]) -> None:
    env = {
        "BATON_ACCEPTABLE_RECOVERY_LAG": "250",
        "BATON_MAX_WARMUP_REPLICAS": "3",
        "BATON_PROBING_REBALANCE_INTERVAL_MS": "60000",
    }
    result = _invoke([*BASE, "--max-warmup-replicas", "5"], env=env)
    assert result.exit_code == 0, result.output
    config = captured["config"]
    assert config.acceptable_recovery_lag == 250
    assert config.max_warmup_replicas == 5
    assert config.probing_rebalance_interval_ms == 60_000


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--acceptable-recovery-lag", "-1"),
        ("--max-warmup-replicas", "0"),
        ("--probing-rebalance-interval-ms", "999"),
    ],
)
def test_out_of_range_values_are_usage_errors(
    captured: dict[str, WorkerConfig], flag: str, value: str
) -> None:
    result = _invoke([*BASE, flag, value])
    assert result.exit_code == 2, result.output
    assert f"{flag}: " in result.output  # the flag, named as the user typed it
    assert "config" not in captured


def test_a_node_label_needs_the_node_and_a_given_zone_wins(captured: dict[str, WorkerConfig]) -> None:
    result = _invoke([*BASE, "--zone-node-label", "topology.kubernetes.io/zone"])
    assert result.exit_code == 2, result.output
    assert "zone_node_label needs node_name" in result.output
    assert "config" not in captured
    # --zone given outright: no Node is read (nothing here could answer), the zone is as given
    env = {"BATON_ZONE_NODE_LABEL": "topology.kubernetes.io/zone", "BATON_NODE_NAME": "node-a"}
    result = _invoke([*BASE, "--zone", "zone-b"], env=env)
    assert result.exit_code == 0, result.output
    config = captured["config"]
    assert (config.zone, config.node_name, config.zone_node_label) == (
        "zone-b",
        "node-a",
        "topology.kubernetes.io/zone",
    )


def test_laptop_defaults_replace_an_unset_state_dir_and_port_that_cannot_be_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "_writable", lambda _path: False)
    monkeypatch.setattr("baton.worker.runtime.health.port_free", lambda _port: False)
    config = WorkerConfig(topology="t", bootstrap_servers="k:9092", application_id="a")
    laptop = cli.laptop_defaults(config, {})
    assert laptop.state_dir == tmp_path / ".baton-state"
    assert laptop.metrics_port not in (0, 8080)


def test_laptop_defaults_keep_what_was_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator sets both: a port in use or a state dir not writable is an error there."""
    monkeypatch.setattr(cli, "_writable", lambda _path: False)
    monkeypatch.setattr("baton.worker.runtime.health.port_free", lambda _port: False)
    config = WorkerConfig(
        topology="t",
        bootstrap_servers="k:9092",
        application_id="a",
        state_dir=Path("/var/lib/baton"),
        metrics_port=8080,
    )
    assert cli.laptop_defaults(config, {"state_dir": config.state_dir, "metrics_port": 8080}) == config


def test_writable_asks_the_first_existing_ancestor(tmp_path: Path) -> None:
    assert cli._writable(tmp_path / "not" / "yet")


def test_describe_lists_sub_topologies_stores_and_topics() -> None:
    result = CliRunner().invoke(cli.describe, ["examples/click_counter.py", "--application-id", "clicks"])
    assert result.exit_code == 0, result.output
    assert "Sub-topology 0" in result.output and "Source: source-0001 (topics: clicks)" in result.output
    assert "user-counts-store (changelog clicks-user-counts-store-changelog)" in result.output
    assert "Output topics:\n  user_counts\n" in result.output and "  clicks-dlq" in result.output
