"""One HTTP port for ``/metrics``, ``/healthz`` (the loop is alive) and ``/readyz`` (tasks restored)."""

from __future__ import annotations

import errno
import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from baton.worker.runtime.queries import Answer, is_query, split_query


class PortTaken(OSError):
    """The HTTP port is in use (another ``baton run`` on this machine, most often): one line that
    names the flag, not ``[Errno 98]`` at the end of a traceback."""

    def __init__(self, port: int) -> None:
        super().__init__(
            f"port {port} (/metrics, /healthz, /readyz) is in use, by another baton run perhaps; "
            "choose another with --metrics-port, or --metrics-port 0 for any free port"
        )
        self.port = port


def port_free(port: int) -> bool:
    """Whether this process could listen on ``port`` now (the laptop default falls back if not)."""
    try:
        ThreadingHTTPServer(("0.0.0.0", port), BaseHTTPRequestHandler).server_close()
    except OSError:
        return False
    return True


def serve(
    port: int,
    registry: CollectorRegistry,
    healthy: Callable[[], bool],
    ready: Callable[[], bool],
    queries: Callable[[str, dict[str, str]], Answer] | None = None,
    *,
    by_name: bool = True,
) -> ThreadingHTTPServer:
    """Start the server in a daemon thread; port 0 picks a free port (see ``server_address``).

    ``queries`` answers the interactive queries (``/stores/...``, ``/metadata/...``).
    ``/metrics?name[]=A&name[]=B`` serves only those samples, as prometheus_client's own
    handler does (``restricted_registry``): a client that polls one counter several times a
    second (the operator's autoscaler, a benchmark) then costs the worker that counter, not
    the whole exposition of every task's series, rendered while the processing thread waits
    for the GIL (docs/benchmarks.md, "Measured design choices": named-scrape).
    ``by_name=False`` (the pod supervisor, whose collector merges its children and names
    nothing in advance) serves everything whatever the query.
    """

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path, params = split_query(self.path)
            if queries is not None and is_query(path):
                answer = queries(path, params)
                body = answer.body()
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                if answer.location is not None:
                    self.send_header("Location", answer.location)
                self.end_headers()
                self.wfile.write(body)
            elif path == "/metrics":
                names = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("name[]")
                source = registry.restricted_registry(names) if names and by_name else registry
                self._reply(200, generate_latest(source), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                ok = healthy()
                self._reply(200 if ok else 503, b"ok\n" if ok else b"stalled\n")
            elif path == "/readyz":
                ok = ready()
                self._reply(200 if ok else 503, b"ready\n" if ok else b"not ready\n")
            else:
                self._reply(404, b"not found\n")

        def _reply(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    try:
        server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise PortTaken(port) from exc
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="baton-http", daemon=True).start()
    return server
