"""etcd, kube-apiserver, kube-controller-manager and kube-scheduler on 127.0.0.1.

Certificates come from ``openssl``: one CA that signs the API server's serving certificate
and an admin client certificate (group ``system:masters``), plus a service-account signing
key. The admin kubeconfig carries the CA, so clients verify TLS for real. The API server
listens on every address and advertises the node's (``node_ip``), so Pods on the node
(``batondev.node``) reach it through the ``kubernetes`` Service; it authorizes kubelets with
the Node authorizer and reaches them by their InternalIP. Without the node, Pods stay
unscheduled.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import urllib.request
from pathlib import Path

from . import gobuild, paths, ports, procs
from .requirements import need, run

APISERVER = "kube-apiserver"
ETCD = "etcd"
KCM = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
COMPONENTS = (ETCD, APISERVER, KCM, SCHEDULER)


def pki() -> Path:
    return paths.RUN / "pki"


def kubeconfig() -> Path:
    return paths.RUN / "kubeconfig"


def audit_log() -> Path:
    """The API server's audit log: one JSON line per request, with its user agent (bench/operator_scale.py)."""
    return paths.RUN / "kube-audit" / "audit.log"


# Metadata of every request (no bodies: small lines); RequestReceived left out so each request is one line.
_AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
"""


def _audit_args() -> list[str]:
    policy = paths.RUN / "kube-audit" / "policy.yaml"
    policy.parent.mkdir(parents=True, exist_ok=True)
    policy.write_text(_AUDIT_POLICY)
    return [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={audit_log()}",
        "--audit-log-format=json",
        "--audit-log-maxsize=64",  # MB, then rotated; one old file kept
        "--audit-log-maxbackup=1",
    ]


def server_url() -> str:
    return f"https://127.0.0.1:{ports.APISERVER}"


def _make_pki() -> None:
    """Create the CA, serving and admin certs and the SA key once per run dir and node address.

    The serving certificate names the node's address, so a machine whose address changed gets
    new certificates (with a stopped API server; a running one keeps serving the old ones)."""
    d = pki()
    marker = d / ".complete"
    if marker.exists() and marker.read_text().strip() == ports.node_ip():
        return
    if marker.exists() and procs.running_pid(APISERVER) is not None:
        raise RuntimeError(
            f"the API server runs with certificates for another address than {ports.node_ip()}: "
            "restart it (dev/stack down; dev/stack up)"
        )
    shutil.rmtree(d, ignore_errors=True)
    need("openssl")
    d.mkdir(parents=True, exist_ok=True)

    def ssl_cmd(*args: str) -> None:
        run(["openssl", *args], cwd=str(d))

    ssl_cmd(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "3650",
        "-subj",
        "/CN=baton-local-ca",
    )
    (d / "server.ext").write_text(
        f"subjectAltName=IP:127.0.0.1,IP:{ports.node_ip()},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.0.0.1\n"
        "extendedKeyUsage=serverAuth\n"
    )
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    _issue("server", "/CN=kube-apiserver", "server.ext")
    _issue("admin", "/O=system:masters/CN=baton-admin", "client.ext")
    ssl_cmd("genrsa", "-out", "sa.key", "2048")
    ssl_cmd("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")
    marker.write_text(ports.node_ip())


def _issue(name: str, subject: str, ext: str) -> None:
    """``<name>.key`` and ``<name>.crt`` in the PKI folder, signed by the stack's CA."""
    d = pki()
    run(
        [
            "openssl",
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            subject,
        ],
        cwd=str(d),
    )
    run(
        [
            "openssl",
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.crt",
            "-days",
            "3650",
            "-extfile",
            ext,
        ],
        cwd=str(d),
    )


def write_client_kubeconfig(path: Path, user: str, group: str) -> None:
    """A kubeconfig for ``user`` (in ``group``) with a client certificate from the stack's CA, once.

    The node's kubelet and kube-proxy get identities of their own, as on a real cluster, so
    the Node authorizer and the default ``system:node-proxier`` binding apply to them."""
    d = pki()
    name = path.stem
    if not (d / f"{name}.crt").exists():
        need("openssl")
        _issue(name, f"/O={group}/CN={user}" if group else f"/CN={user}", "client.ext")
    path.write_text(_kubeconfig_text(user, d / f"{name}.crt", d / f"{name}.key"))


def kubectl(*args: str) -> list[str]:
    """argv of kubectl against the stack as its admin."""
    return [str(gobuild.kube_dir() / "bin" / "kubectl"), f"--kubeconfig={kubeconfig()}", *args]


def apply(manifest: str) -> None:
    out = subprocess.run(kubectl("apply", "-f", "-"), input=manifest, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"kubectl apply failed: {out.stderr.strip()}")


def require_node_ready_control_plane() -> None:
    """The node needs the API server started by this version of the stack (Node authorizer,
    advertised at the node's address) and the node-lifecycle controller; say so otherwise."""
    for name, flag in ((APISERVER, "--authorization-mode=Node,"), (KCM, "-nodeipam,-cloud-node-lifecycle")):
        pid = procs.running_pid(name)
        if pid is None:
            raise RuntimeError(f"{name} is not running: the node needs the control plane (dev/stack up kube)")
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        if flag not in cmdline:
            raise RuntimeError(
                f"{name} was started by an older stack without {flag.rstrip(',')}: restart it "
                "(dev/stack down; dev/stack up kube node)"
            )


def _write_kubeconfig() -> None:
    d = pki()
    kubeconfig().write_text(_kubeconfig_text("baton-admin", d / "admin.crt", d / "admin.key"))


def _kubeconfig_text(user: str, crt: Path, key: Path) -> str:
    d = pki()
    return f"""apiVersion: v1
kind: Config
clusters:
- name: baton-local
  cluster:
    server: {server_url()}
    certificate-authority: {d / "ca.crt"}
users:
- name: {user}
  user:
    client-certificate: {crt}
    client-key: {key}
contexts:
- name: baton-local
  context:
    cluster: baton-local
    user: {user}
    namespace: default
current-context: baton-local
"""


def _healthy(url: str, *, tls: bool) -> bool:
    ctx = None
    if tls:
        ctx = ssl.create_default_context(cafile=str(pki() / "ca.crt"))
        ctx.load_cert_chain(str(pki() / "admin.crt"), str(pki() / "admin.key"))
    with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
        return bool(resp.status == 200)


def _start_etcd(bin_dir: Path, timeout: float, *, fresh: bool) -> None:
    url = f"http://127.0.0.1:{ports.ETCD_CLIENT}"
    if procs.running_pid(ETCD) is None:
        procs.ensure_ports_free(ETCD, [ports.ETCD_CLIENT, ports.ETCD_PEER])
        data = paths.RUN / ETCD / "data"
        if fresh and procs.running_pid(APISERVER) is None:
            shutil.rmtree(data, ignore_errors=True)
        procs.start(
            ETCD,
            [
                str(bin_dir / "etcd"),
                "--name",
                "baton",
                "--data-dir",
                str(data),
                "--listen-client-urls",
                url,
                "--advertise-client-urls",
                url,
                "--listen-peer-urls",
                f"http://127.0.0.1:{ports.ETCD_PEER}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{ports.ETCD_PEER}",
                "--initial-cluster",
                f"baton=http://127.0.0.1:{ports.ETCD_PEER}",
                "--listen-metrics-urls",
                "",
                "--log-level",
                "warn",
                "--quota-backend-bytes",
                str(4 << 30),
                "--unsafe-no-fsync",  # a throwaway dev store: fsync would only slow tests down
            ],
        )
    procs.wait_started(ETCD, lambda: _healthy(f"{url}/health", tls=False), timeout)


def _start_apiserver(bin_dir: Path, timeout: float) -> None:
    d = pki()
    if procs.running_pid(APISERVER) is None:
        procs.ensure_ports_free(APISERVER, [ports.APISERVER])
        procs.start(
            APISERVER,
            [
                str(bin_dir / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{ports.ETCD_CLIENT}",
                "--bind-address=0.0.0.0",
                f"--advertise-address={ports.node_ip()}",
                f"--secure-port={ports.APISERVER}",
                f"--tls-cert-file={d / 'server.crt'}",
                f"--tls-private-key-file={d / 'server.key'}",
                f"--client-ca-file={d / 'ca.crt'}",
                # the front-proxy CA is unused here, but without it controllers log an error per sync
                f"--requestheader-client-ca-file={d / 'ca.crt'}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                # logs, exec and port-forward go to the kubelet at its address, as its admin
                "--kubelet-preferred-address-types=InternalIP",
                f"--kubelet-client-certificate={d / 'admin.crt'}",
                f"--kubelet-client-key={d / 'admin.key'}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={d / 'sa.pub'}",
                f"--service-account-signing-key-file={d / 'sa.key'}",
                "--allow-privileged=true",
                "--profiling=false",
                "--v=0",
                "--enable-priority-and-fairness=false",
                *_audit_args(),
            ],
        )
    procs.wait_started(APISERVER, lambda: _healthy(f"{server_url()}/readyz", tls=True), timeout)


def _start_controller(name: str, cmd: list[str], port: int, timeout: float) -> None:
    if procs.running_pid(name) is None:
        procs.ensure_ports_free(name, [port])
        procs.start(name, cmd)

    # both serve /healthz on their secure port with a self-signed cert; authz allows /healthz
    def ok() -> bool:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=2, context=ctx) as r:
            return bool(r.status == 200)

    procs.wait_started(name, ok, timeout)


def up(timeout: float = 120, *, fresh: bool = False) -> None:
    """``fresh``: a stopped etcd starts with an empty store (see ``kafka.up``); PKI and kubeconfig stay."""
    kube_bin = gobuild.build_kubernetes()
    etcd_bin = gobuild.build_etcd()
    paths.RUN.mkdir(parents=True, exist_ok=True)
    _make_pki()
    _write_kubeconfig()
    _start_etcd(etcd_bin, timeout, fresh=fresh)
    _start_apiserver(kube_bin, timeout)
    d = pki()
    common = [
        f"--kubeconfig={kubeconfig()}",
        "--bind-address=127.0.0.1",
        "--leader-elect=false",
        f"--authentication-kubeconfig={kubeconfig()}",
        f"--authorization-kubeconfig={kubeconfig()}",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez",
    ]
    _start_controller(
        KCM,
        [
            str(kube_bin / "kube-controller-manager"),
            *common,
            f"--secure-port={ports.CONTROLLER_MANAGER}",
            f"--service-account-private-key-file={d / 'sa.key'}",
            f"--root-ca-file={d / 'ca.crt'}",
            "--use-service-account-credentials=false",
            # node lifecycle: a Ready node loses its not-ready taint, a dead one its Pods
            "--controllers=*,-nodeipam,-cloud-node-lifecycle",
            "--concurrent-statefulset-syncs=5",
        ],
        ports.CONTROLLER_MANAGER,
        timeout,
    )
    _start_controller(
        SCHEDULER,
        [
            str(kube_bin / "kube-scheduler"),
            *common,
            f"--secure-port={ports.SCHEDULER}",
        ],
        ports.SCHEDULER,
        timeout,
    )


def down() -> list[str]:
    return [name for name in reversed(COMPONENTS) if procs.stop(name)]


def bin_dirs() -> list[Path]:
    """Folders with kubectl and helm, for PATH."""
    return [gobuild.kube_dir() / "bin", gobuild.helm_dir() / "bin"]
