"""`baton operator`, `baton render` and `baton status` (loaded lazily by baton.cli; `baton flip` is
baton.control's)."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Any

import click
import kopf
import yaml
from pydantic import ValidationError

from baton.operator import access, crd, handlers, leader
from baton.operator.core import rbac
from baton.operator.core.builders import desired_objects
from baton.operator.core.builders.rack import DEFAULT_NODE_READER_ROLE
from baton.operator.core.compaction.cronjob import DEFAULT_COMPACTOR_ROLE
from baton.operator.core.compaction.cronjob import DEFAULT_IMAGE as DEFAULT_COMPACTOR_IMAGE
from baton.operator.core.constants import API_VERSION, KIND
from baton.operator.core.spec import StreamApp
from baton.operator.kube import Kube
from baton.operator.metrics import serve_from_env


@click.command()
@click.option(
    "-n",
    "--namespace",
    "namespaces",
    multiple=True,
    help="Watch only this namespace (repeatable). Default: all namespaces.",
)
@click.option(
    "--lease",
    default="baton-operator",
    show_default=True,
    help="Name of the coordination.k8s.io Lease that elects the one acting operator replica.",
)
@click.option(
    "--lease-namespace",
    envvar="POD_NAMESPACE",
    default=None,
    help="Namespace of the Lease. Default: $POD_NAMESPACE (the chart sets it), else the first "
    "--namespace, else default.",
)
@click.option(
    "--lease-duration",
    type=int,
    default=leader.Timing.lease_duration,
    show_default=True,
    help="Seconds a Lease holds without renewal: a killed leader is replaced after this long.",
)
@click.option(
    "--renew-deadline",
    type=int,
    default=leader.Timing.renew_deadline,
    show_default=True,
    help="Seconds the leader keeps trying to renew before it exits (less than --lease-duration).",
)
@click.option(
    "--retry-period",
    type=int,
    default=leader.Timing.retry_period,
    show_default=True,
    help="Seconds between attempts to acquire or renew the Lease.",
)
@click.option("--standalone", is_flag=True, help="No leader election (a single replica, or local debugging).")
@click.option("--liveness", default=None, help="Liveness endpoint, e.g. http://0.0.0.0:8081/healthz.")
@click.option("--no-kafka", is_flag=True, help="Do not talk to Kafka (no topic management, no lag).")
@click.option(
    "--compactor-image",
    envvar="BATON_COMPACTOR_IMAGE",
    default=DEFAULT_COMPACTOR_IMAGE,
    show_default=True,
    help="Image of compaction Jobs whose StreamApp sets no spec.compaction.image (needs Java and Spark).",
)
@click.option(
    "--node-reader-role",
    envvar="BATON_NODE_READER_ROLE",
    default=DEFAULT_NODE_READER_ROLE,
    show_default=True,
    help="The ClusterRole (get on nodes) that the workers of StreamApps with spec.rack are bound to, "
    "so that each can read its Node's zone label; the chart creates it.",
)
@click.option(
    "--compactor-role",
    envvar="BATON_COMPACTOR_ROLE",
    default=DEFAULT_COMPACTOR_ROLE,
    show_default=True,
    help="The ClusterRole (get and patch of StreamApps' status) that compaction Jobs are bound to "
    "in their app's namespace; the chart creates it.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=16,
    show_default=True,
    help="Reconciliation passes that may run at once, over all apps (each may block on Kafka).",
)
@click.option(
    "--no-watch-cache",
    is_flag=True,
    help="Read every object from the API server on each pass instead of the watches' cache "
    "(to rule the cache out when debugging; bench/operator_scale.py compares both).",
)
@click.option(
    "--manage-crd",
    is_flag=True,
    envvar="BATON_MANAGE_CRD",
    help="At start, the leader applies the StreamApp CRD of this operator's version when the "
    "cluster's is older (never a downgrade); the chart sets it (crds.manage).",
)
@click.option("--verbose", is_flag=True)
def operator(  # noqa: PLR0917 (one parameter per click option)
    namespaces: tuple[str, ...],
    lease: str,
    lease_namespace: str | None,
    lease_duration: int,
    renew_deadline: int,
    retry_period: int,
    standalone: bool,
    liveness: str | None,
    no_kafka: bool,
    compactor_image: str,
    node_reader_role: str,
    compactor_role: str,
    workers: int,
    no_watch_cache: bool,
    manage_crd: bool,
    verbose: bool,
) -> None:
    """Run the StreamApp operator (kopf); with several replicas, the one holding the Lease acts."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        logging.getLogger("kopf.objects").addFilter(_QuietWatchHandlers())
    clusterwide = not namespaces
    timing = leader.Timing(lease_duration, renew_deadline, retry_period)
    problem = timing.check()
    if problem is not None:
        raise click.UsageError(problem)
    where = lease_namespace or (namespaces[0] if namespaces else "default")
    click.echo(
        f"baton operator: {'all namespaces' if clusterwide else ', '.join(namespaces)}; "
        f"{'standalone' if standalone else f'lease {where}/{lease}'}",
        err=True,
    )
    port = serve_from_env()  # before the election: a follower reports baton_operator_leader 0
    if port is not None:
        logging.getLogger(__name__).info(f"metrics on :{port}/metrics")
    if namespaces:  # a namespace the RBAC does not cover: say so and stop, before anything runs
        lacking = access.check(Kube.connect().dynamic.client, list(namespaces))
        if lacking:
            raise click.ClickException(access.refusal(lacking))
    if not standalone:
        kube = Kube.connect()
        leader.wait_until_leader(kube.dynamic.client, lease, where, leader.identity(), timing, liveness)
    if manage_crd:  # the leader only: followers would race it with the same object
        try:
            crd.ensure(Kube.connect())
        except Exception as exc:  # forbidden, refused: stop with what to do, not a traceback
            raise click.ClickException(
                f"--manage-crd: {exc}. Grant get and patch on customresourcedefinitions "
                f"{rbac.CRD_NAME}, or run without --manage-crd (the chart's crds.manage=false)"
            ) from exc
    memo = kopf.Memo(
        options=handlers.Options(
            kafka=not no_kafka,
            compactor_image=compactor_image,
            node_reader_role=node_reader_role,
            compactor_role=compactor_role,
            workers=workers,
            watch_cache=not no_watch_cache,
        )
    )
    kopf.run(
        clusterwide=clusterwide,
        namespaces=list(namespaces),
        # the Lease elects; kopf's own peering stays off (no peering objects, no pauses)
        standalone=True,
        peering_name=None,
        liveness_endpoint=liveness,
        memo=memo,
    )


class _QuietWatchHandlers(logging.Filter):
    """Drop kopf's "Handler 'x' succeeded." lines of the watch handlers: one per event of
    every owned object, Pod and StreamApp (thousands a minute at hundreds of apps) that say
    nothing; their failures, and the spec handlers' lines, still show."""

    QUIET = re.compile(
        r"Handler '(cache-\w+|on_pod|on_statefulset|on_annotation|on_compaction_job)' succeeded\."
    )

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.INFO and self.QUIET.fullmatch(record.getMessage()))


def _load_docs(path: Path) -> list[dict[str, Any]]:
    text = sys.stdin.read() if str(path) == "-" else path.read_text()
    return [d for d in yaml.safe_load_all(text) if d]


@click.command()
@click.argument("spec", type=click.Path(allow_dash=True, path_type=Path))
@click.option("-n", "--namespace", default=None, help="Namespace for apps whose manifest has none.")
@click.option(
    "--rbac",
    "rbac_namespace",
    default=None,
    metavar="NAMESPACE",
    help="Also print the operator's RBAC for a ServiceAccount baton-operator in NAMESPACE.",
)
@click.option(
    "--compactor-image",
    envvar="BATON_COMPACTOR_IMAGE",
    default=DEFAULT_COMPACTOR_IMAGE,
    show_default=True,
    help="The operator's compactor image (for apps that set no spec.compaction.image).",
)
@click.option(
    "--node-reader-role",
    envvar="BATON_NODE_READER_ROLE",
    default=DEFAULT_NODE_READER_ROLE,
    show_default=True,
    help="The operator's node-reader ClusterRole (for apps with spec.rack).",
)
@click.option(
    "--compactor-role",
    envvar="BATON_COMPACTOR_ROLE",
    default=DEFAULT_COMPACTOR_ROLE,
    show_default=True,
    help="The operator's compactor ClusterRole (for apps with spec.compaction).",
)
def render(  # noqa: PLR0917 (one parameter per click option)
    spec: Path,
    namespace: str | None,
    rbac_namespace: str | None,
    compactor_image: str,
    node_reader_role: str,
    compactor_role: str,
) -> None:
    """Print the objects the operator would create for the StreamApps in SPEC (no cluster needed)."""
    out: list[dict[str, Any]] = []
    if rbac_namespace:
        out += rbac.rbac_objects("baton-operator", rbac_namespace)
    for doc in _load_docs(spec):
        if doc.get("apiVersion") != API_VERSION or doc.get("kind") != KIND:
            continue
        if namespace and not doc.get("metadata", {}).get("namespace"):
            doc.setdefault("metadata", {})["namespace"] = namespace
        try:
            out += desired_objects(
                StreamApp.from_body(doc),
                compactor_image=compactor_image,
                node_reader_role=node_reader_role,
                compactor_role=compactor_role,
            )
        except (ValidationError, KeyError, ValueError) as exc:
            raise click.ClickException(f"{spec}: invalid StreamApp: {exc}") from exc
    if not out:
        raise click.ClickException(f"{spec}: no {API_VERSION} {KIND} found")
    click.echo(yaml.safe_dump_all(out, sort_keys=False), nl=False)


@click.command()
@click.argument("name")
@click.option("-n", "--namespace", default="default", show_default=True)
def status(name: str, namespace: str) -> None:
    """Show a StreamApp's status: phase, active color, conditions, per-color replicas.

    Exits 0 when the app is Ready and 1 otherwise, so scripts can test it.
    """
    body = Kube.connect().get(API_VERSION, KIND, name, namespace)
    if body is None:
        raise click.ClickException(f"StreamApp {namespace}/{name} not found")
    st = body.get("status") or {}
    gen = body["metadata"].get("generation")
    click.echo(f"{KIND} {namespace}/{name}  generation {gen} (observed {st.get('observedGeneration', '-')})")
    click.echo(
        f"phase: {st.get('phase', '-')}   active: {st.get('activeColor', '-')}   lag: {st.get('lag', '-')}"
    )
    for cond in st.get("conditions") or []:
        click.echo(
            f"  {cond['type']:<12} {cond['status']:<6} {cond.get('reason', '')}: {cond.get('message', '')}"
        )
    for color, cs in sorted((st.get("colors") or {}).items()):
        click.echo(
            f"  {color:<6} {cs.get('readyReplicas', 0)}/{cs.get('replicas', 0)} ready, "
            f"revision {cs.get('revision', '-')}, application.id {cs.get('applicationId', '-')}"
        )
    ready: dict[str, Any] = next((c for c in st.get("conditions") or [] if c.get("type") == "Ready"), {})
    sys.exit(0 if ready.get("status") == "True" else 1)
