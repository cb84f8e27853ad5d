"""``dev/podrunner run|start|stop|status``: the local pod runner's command line (dev tooling).

``run`` stays in the foreground; ``start`` runs the same detached under the stack's process
tools (component ``podrunner-<node>``: pid and log in ``~/.cache/baton/run/podrunner-<node>/``),
so the demo and tests can leave it running and ``stop`` it later.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from batondev import kube, procs

if TYPE_CHECKING:
    from batondev.podrunner.runner import Options

COMPONENT_PREFIX = "podrunner-"


def component(node: str) -> str:
    return f"{COMPONENT_PREFIX}{node}"


def _options(f: click.decorators.FC) -> click.decorators.FC:
    for option in reversed(
        [
            click.option("--node", default="baton-local", show_default=True, help="Node name to register."),
            click.option(
                "--namespace",
                "-n",
                "namespaces",
                multiple=True,
                help="Run Pods of this namespace (repeatable).",
            ),
            click.option(
                "--selector", "-l", default=None, help="Run only Pods matching this label selector."
            ),
            click.option("--all", "run_all", is_flag=True, help="Run every Pod (no selector needed)."),
            click.option(
                "--scheduler",
                is_flag=True,
                help="Let kube-scheduler bind Pods (to this tainted Node: only Pods that tolerate it).",
            ),
            click.option(
                "--untainted",
                is_flag=True,
                help="No taint on the Node: kube-scheduler may place any Pod here.",
            ),
            click.option("--kubeconfig", default=None, help="Default: the local stack's admin kubeconfig."),
            click.option("--backoff-base", default=1.0, show_default=True, help="First crash back-off (s)."),
            click.option(
                "--backoff-cap", default=30.0, show_default=True, help="Longest crash back-off (s)."
            ),
            click.option(
                "--workdir",
                type=click.Path(file_okay=False, path_type=Path),
                default=None,
                help="Containers' cwd and PYTHONPATH (stands in for the image's code). Default: the repo.",
            ),
            click.option(
                "--runtime",
                type=click.Choice(["process", "runc", "crun"]),
                default=lambda: os.environ.get("BATON_PODRUNNER_RUNTIME", "process"),
                show_default="process, or $BATON_PODRUNNER_RUNTIME",
                help="process: each container's command as a local process (fast, no image). "
                "runc/crun: each container from its image (built by dev/image) under that OCI runtime.",
            ),
            click.option(
                "--image-env",
                "image_env",
                multiple=True,
                metavar="KEY=VALUE",
                help="Env every container starts with, below the Pod's own (stands in for the image's ENV).",
            ),
        ]
    ):
        f = option(f)
    return f


def _build(
    *,
    node: str,
    namespaces: tuple[str, ...],
    selector: str | None,
    run_all: bool,
    scheduler: bool,
    untainted: bool,
    kubeconfig: str | None,
    backoff_base: float,
    backoff_cap: float,
    workdir: Path | None,
    image_env: tuple[str, ...] = (),
    runtime: str = "process",
) -> Options:
    from batondev.podrunner.runner import Options  # kubernetes is slow to import: only when needed

    if not (namespaces or selector or run_all):
        raise click.UsageError("say which Pods to run: --namespace, --selector or --all")
    options = Options(
        node=node,
        namespaces=list(namespaces),
        selector=None if run_all else selector,
        scheduler=scheduler,
        untainted=untainted,
        kubeconfig=kubeconfig or str(kube.kubeconfig()),
        backoff_base=backoff_base,
        backoff_cap=backoff_cap,
        image_env=dict(_key_value(item) for item in image_env),
        runtime=runtime,
    )
    if workdir is not None:
        options.workdir = workdir.resolve()
    return options


@click.group()
def main() -> None:
    """Baton's local pod runner (dev and test tooling): runs the local stack's Pods as processes."""


@main.command()
@_options
def run(**kwargs: object) -> None:
    """Register the Node and run the selected Pods in the foreground until SIGTERM or Ctrl-C."""
    from batondev.podrunner.runner import Runner

    runner = Runner(_build(**kwargs))  # type: ignore[arg-type]
    runner.install_signal_handlers()
    runner.run()


@main.command()
@_options
def start(**kwargs: object) -> None:
    """Like ``run``, detached; idempotent per --node."""
    options = _build(**kwargs)  # type: ignore[arg-type]
    name = component(options.node)
    if procs.running_pid(name) is None:
        argv = [sys.executable, "-m", "batondev.podrunner", "run", *_argv(kwargs)]
        pid = procs.start(name, argv)
        click.echo(f"podrunner {options.node} started (pid {pid}); log: {procs.log_file(name)}", err=True)
    else:
        click.echo(f"podrunner {options.node} already running; log: {procs.log_file(name)}", err=True)


def _key_value(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--image-env")
    return key, value


def _argv(kwargs: dict[str, object]) -> list[str]:
    out: list[str] = []
    for key, value in kwargs.items():
        flag = "--" + {"namespaces": "namespace", "run_all": "all"}.get(key, key).replace("_", "-")
        if isinstance(value, tuple):
            for item in value:
                out += [flag, str(item)]
        elif value is True:
            out.append(flag)
        elif value not in (None, False):
            out += [flag, str(value)]
    return out


@main.command()
@click.option("--node", default="baton-local", show_default=True)
def stop(node: str) -> None:
    """Stop a detached runner: its processes end, its Node goes away."""
    stopped = procs.stop(component(node), timeout=30)
    click.echo(f"podrunner {node}: {'stopped' if stopped else 'was not running'}", err=True)


@main.command()
@click.option("--node", default="baton-local", show_default=True)
def status(node: str) -> None:
    """Exit 0 when a detached runner for --node is running."""
    pid = procs.running_pid(component(node))
    state = f"running (pid {pid})" if pid else "stopped"
    click.echo(f"podrunner {node}: {state}; log: {procs.log_file(component(node))}")
    sys.exit(0 if pid else 1)
