"""The pod's one ``/metrics``: every process's metrics, each series labelled with its ``process``.

The supervisor reads each child's exposition (prometheus_client's parser) on every scrape
and serves the union, so one ServiceMonitor sees the whole pod; PromQL sums over
``process`` where a pod total is wanted. A child that does not answer is left out of that
scrape (``baton_worker_processes{state="unreachable"}`` says so) rather than failing it.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence

import orjson
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from baton.worker.runtime.queries import Answer

log = logging.getLogger(__name__)

TIMEOUT_S = 2.0


def fetch(port: int, path: str, timeout: float = TIMEOUT_S) -> tuple[int, str]:
    """GET a child's endpoint on localhost: (status, body); status 0 when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:
        return 0, ""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_args: object, **_kwargs: object) -> None:
        return None  # a 307 to the owning process goes back to the client as it is


def proxy_query(port: int, path: str, params: dict[str, str], timeout: float = 12.0) -> Answer:
    """An interactive query asked at the pod's port, answered by one of its processes.

    Any process can answer or redirect (the group's routing is the same in all of them),
    so the first one does; its redirect names the owning process's own port.
    """
    url = f"http://127.0.0.1:{port}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.build_opener(_NoRedirect).open(url, timeout=timeout) as reply:
            return Answer(reply.status, orjson.loads(reply.read()), reply.headers.get("Location"))
    except urllib.error.HTTPError as exc:
        body = exc.read()
        return Answer(exc.code, orjson.loads(body) if body else {}, exc.headers.get("Location"))
    except OSError:
        return Answer(503, {"error": "the pod's worker processes do not answer; retry shortly"})


def merge(expositions: Sequence[tuple[str, str]]) -> list[Metric]:
    """Families of several children's texts, keyed ``(process label, text)``, merged by name."""
    families: dict[str, Metric] = {}
    for process, text in expositions:
        for family in text_string_to_metric_families(text):
            merged = families.get(family.name)
            if merged is None:
                merged = families[family.name] = Metric(
                    family.name, family.documentation, family.type, family.unit
                )
            for sample in family.samples:
                merged.add_sample(
                    sample.name,
                    {**sample.labels, "process": process},
                    sample.value,
                    sample.timestamp,
                    sample.exemplar,
                )
    return list(families.values())


class ChildrenCollector(Collector):
    """Collects from the children at scrape time; ``ports()`` gives (process label, port) pairs."""

    def __init__(self, ports: Callable[[], Sequence[tuple[str, int]]]) -> None:
        self._ports = ports

    def collect(self) -> Iterator[Metric]:
        texts: list[tuple[str, str]] = []
        unreachable = 0
        ports = self._ports()
        for process, port in ports:
            status, body = fetch(port, "/metrics")
            if status == 200:
                texts.append((process, body))
            else:
                unreachable += 1
        yield from merge(texts)
        state = GaugeMetricFamily(
            "baton_worker_processes", "Worker processes of this pod, by state", labels=["state"]
        )
        state.add_metric(["scraped"], len(texts))
        state.add_metric(["unreachable"], unreachable)
        yield state
