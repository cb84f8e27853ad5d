"""``dev/stack up node``: one real Kubernetes node on this machine, registered to the stack's API server.

Why: Baton is an operator; its Pods should run where users run them, under a kubelet, with a
container runtime, Pod IPs, Services and DNS that behave as Kubernetes says. The node is:

* containerd (its runc shim, ``ctr``) from the Go module proxy, with Debian's runc and CNI
  plugins: a ``bridge`` network ``baton0`` (10.244.0.0/24, host-local IPAM) plus ``portmap``;
* the kubelet and kube-proxy (iptables mode) from the same Kubernetes build as the control
  plane, each with a client certificate of its own (``system:node:<name>`` in
  ``system:nodes``, which the API server's Node authorizer checks; ``system:kube-proxy``);
* CoreDNS on the node's address, port 53, as the cluster DNS (``cluster.local``);
* volumes for ``volumeClaimTemplates`` from Rancher's local-path-provisioner (the ``standard``
  StorageClass, the default, as in kind and k3s): a folder per claim under the node's run
  folder, made world-writable by a helper Pod (a static busybox from Debian), so a Pod
  deleted and placed again finds its claim and its data whatever user it runs as.

Everything the node writes lives under ``~/.cache/baton/run/node`` and the binaries under
``~/.cache/baton/<tool>-<version>``. ``down`` removes the Pods through the CRI (so CNI
releases their addresses), kube-proxy's rules, mounts, the bridge and the Pods' cgroups.

The Node carries the taint ``baton.dev/node=local:NoSchedule``: the API server is shared by
tests that run in parallel, and several of them create Pods that must stay unscheduled.
Pods meant for the node tolerate the taint (``TOLERATION``).

The machine's facts that shape the settings: the cgroup hierarchy is v1 (``failCgroupV1:
false``, the cgroupfs driver); root lacks CAP_SYS_RESOURCE, so containerd must not ask runc
for an ``oom_score_adj`` below its own (``restrict_oom_score_adj``); the kubelet refuses a
loopback node IP, so the node uses the address of the interface holding the default route,
and the API server and Kafka listen there too, for Pods to reach them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import buildah, debtools, gobuild, kube, paths, ports, procs, versions
from .requirements import need, run

NAME = "baton-node"
CONTAINERD = "containerd"
KUBELET = "kubelet"
KUBE_PROXY = "kube-proxy"
COREDNS = "coredns"
PROVISIONER = "local-path-provisioner"
COMPONENTS = (CONTAINERD, COREDNS, KUBELET, KUBE_PROXY, PROVISIONER)
NAMESPACE = "k8s.io"  # containerd's namespace for what the CRI runs
BRIDGE = "baton0"
POD_CIDR = "10.244.0.0/24"
CLUSTER_DOMAIN = "cluster.local"
TAINT_KEY = "baton.dev/node"
TOLERATION = {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
PAUSE_IMAGE = "localhost/pause:baton-3.10"
HELPER_IMAGE = "localhost/busybox:baton"  # the provisioner's helper Pods: mkdir and rm of volume folders
STORAGE_CLASS = "standard"
PROVISIONER_NAMESPACE = "local-path-storage"


def root() -> Path:
    return paths.RUN / "node"


def socket() -> Path:
    return root() / "containerd" / "containerd.sock"


def node_ip() -> str:
    """The address of the interface that holds the default route (the kubelet refuses loopback)."""
    return ports.node_ip()


def _bins() -> dict[str, Path]:
    return {
        "kube": gobuild.build_kube_node(),
        "containerd": gobuild.build_containerd(),
        "coredns": gobuild.build_coredns(),
        "crictl": gobuild.build_crictl(),
        "provisioner": gobuild.build_local_path_provisioner(),
    }


# ---------------------------------------------------------------- configuration files


def _containerd_config() -> str:
    d = root()
    return f"""version = 3
root = "{d / "containerd" / "root"}"
state = "{d / "containerd" / "state"}"

[grpc]
  address = "{socket()}"

[ttrpc]
  address = "{socket()}.ttrpc"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{PAUSE_IMAGE}"

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{shutil.which("runc") or "runc"}"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "{d / "cni" / "net.d"}"

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def _cni_config() -> str:
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "baton",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": True,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_CIDR}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(root() / "cni" / "ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        },
        indent=2,
    )


def _kubelet_config() -> str:
    d = kube.pki()
    return f"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://{socket()}
address: {node_ip()}
port: {ports.KUBELET}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {ports.KUBELET_HEALTHZ}
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: false}}
  x509: {{clientCAFile: {d / "ca.crt"}}}
authorization:
  mode: AlwaysAllow
clusterDomain: {CLUSTER_DOMAIN}
clusterDNS: [{node_ip()}]
resolvConf: {root() / "resolv.conf"}
registerWithTaints:
- {{key: {TAINT_KEY}, value: local, effect: NoSchedule}}
# images here are imported, never pulled: the kubelet must not collect them
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {{memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}}
serializeImagePulls: false
maxPods: 60
"""


def _kube_proxy_config() -> str:
    return f"""apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {root() / "kube-proxy.kubeconfig"}
mode: iptables
clusterCIDR: {POD_CIDR}
hostnameOverride: {NAME}
bindAddress: {node_ip()}
healthzBindAddress: 127.0.0.1:{ports.KUBE_PROXY_HEALTHZ}
metricsBindAddress: 127.0.0.1:{ports.KUBE_PROXY_METRICS}
conntrack:
  maxPerCore: 0
iptables:
  masqueradeAll: true
"""


def _corefile() -> str:
    return f""".:53 {{
    bind {node_ip()}
    errors
    health 127.0.0.1:{ports.COREDNS_HEALTH}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kube.kubeconfig()} baton-local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"""


def _provisioner_objects() -> str:
    """local-path-provisioner's namespace, service account, configuration and StorageClass.

    The scripts are upstream's; the helper Pod names an image the node has (nothing is pulled)."""
    config = json.dumps(
        {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [str(root() / "volumes")]}]}
    )
    helper = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "helper-pod"},
        "spec": {"containers": [{"name": "helper-pod", "image": HELPER_IMAGE, "imagePullPolicy": "Never"}]},
    }
    items = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PROVISIONER_NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": PROVISIONER, "namespace": PROVISIONER_NAMESPACE},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "local-path-config", "namespace": PROVISIONER_NAMESPACE},
            "data": {
                "config.json": config,
                "setup": '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n',
                "teardown": '#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n',
                "helperPod.yaml": json.dumps(helper),
            },
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": STORAGE_CLASS,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "rancher.io/local-path",
            "reclaimPolicy": "Delete",
            # a local volume is made on the node the Pod is placed on
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    ]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


# ---------------------------------------------------------------- images


def _ctr(*args: str) -> list[str]:
    return [str(gobuild.containerd_dir() / "bin" / "ctr"), "--address", str(socket()), "-n", NAMESPACE, *args]


def has_image(name: str) -> bool:
    out = subprocess.run(_ctr("images", "ls", "-q", f"name=={name}"), capture_output=True, text=True)
    return out.returncode == 0 and name in out.stdout.split()


def load_image(name: str) -> None:
    """Copy ``name`` from the build's image store (buildah) into the node's (containerd), once.

    Nothing here can pull from a registry, so every image a Pod names is imported; Pods
    should say ``imagePullPolicy: IfNotPresent`` (or ``Never``)."""
    if has_image(name):
        return
    with tempfile.TemporaryDirectory(prefix="baton-image-", dir=paths.CACHE) as tmp:
        archive = Path(tmp) / "image.tar"
        buildah.run("push", "--quiet", name, f"docker-archive:{archive}:{name}")
        run(_ctr("images", "import", "--no-unpack=false", str(archive)), log=str(procs.log_file(CONTAINERD)))


def _pause_image() -> None:
    """The sandbox image: Kubernetes' own ``pause.c``, linked statically, alone in an image."""
    if has_image(PAUSE_IMAGE):
        return
    if not buildah.exists(PAUSE_IMAGE):
        need("gcc")
        source = _kubernetes_source() / "build" / "pause" / "linux" / "pause.c"
        with tempfile.TemporaryDirectory(prefix="baton-pause-") as tmp:
            binary = Path(tmp) / "pause"
            run(["gcc", "-Os", "-static", "-DVERSION=baton-3.10", "-o", str(binary), str(source)])
            run(["strip", str(binary)])
            (Path(tmp) / "rootfs").mkdir()
            binary.rename(Path(tmp) / "rootfs" / "pause")
            _scratch_image(
                PAUSE_IMAGE, Path(tmp) / "rootfs", "--entrypoint", '["/pause"]', "--user", "65535:65535"
            )
    load_image(PAUSE_IMAGE)


def _helper_image() -> None:
    """busybox, static, from Debian's ``busybox-static``, with the applets the helper scripts call."""
    if has_image(HELPER_IMAGE):
        return
    if not buildah.exists(HELPER_IMAGE):
        deb = debtools.download("busybox-static")
        with tempfile.TemporaryDirectory(prefix="baton-busybox-") as tmp:
            unpacked, rootfs = Path(tmp) / "deb", Path(tmp) / "rootfs"
            run(["dpkg-deb", "-x", str(deb), str(unpacked)])
            (rootfs / "bin").mkdir(parents=True)
            shutil.copy2(unpacked / "bin" / "busybox", rootfs / "bin" / "busybox")
            for applet in ("sh", "mkdir", "rm", "ls", "cat"):
                (rootfs / "bin" / applet).symlink_to("busybox")
            _scratch_image(HELPER_IMAGE, rootfs, "--env", "PATH=/bin", "--cmd", '["/bin/sh"]')
    load_image(HELPER_IMAGE)


def _scratch_image(name: str, rootfs: Path, *config: str) -> None:
    """An image of ``rootfs`` alone (``FROM scratch``) with ``buildah config`` options ``config``."""
    container = buildah.run("from", "scratch")
    try:
        buildah.run("copy", container, str(rootfs), "/")
        buildah.run("config", *config, container)
        buildah.run("commit", "--quiet", container, name)
    finally:
        buildah.run("rm", container)


def _kubernetes_source() -> Path:
    """The k8s.io/kubernetes module the node's binaries were built from (the Go module cache)."""
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{versions.KUBERNETES}"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),
        env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"},
    )
    return Path(json.loads(out.stdout)["Dir"])


# ---------------------------------------------------------------- up


def up(timeout: float = 120, *, fresh: bool = False) -> None:
    """Start containerd, CoreDNS, the kubelet, kube-proxy and the provisioner unless they run; wait
    for the Node to be Ready.

    ``fresh``: the volumes of an earlier stack go (their claims went with etcd's data)."""
    debtools.ensure("runc", "iptables", "buildah")
    debtools.ensure_packages("containernetworking-plugins", "conntrack")
    bins = _bins()
    kube.require_node_ready_control_plane()
    if procs.running_pid(CONTAINERD) is None:
        _clean_leftovers()
        if fresh:
            shutil.rmtree(root() / "volumes", ignore_errors=True)
    d = root()
    for sub in ("containerd", "cni/net.d", "cni/ipam", "kubelet", "volumes"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "containerd.toml").write_text(_containerd_config())
    (d / "cni" / "net.d" / "10-baton.conflist").write_text(_cni_config())
    (d / "kubelet.yaml").write_text(_kubelet_config())
    (d / "kube-proxy.yaml").write_text(_kube_proxy_config())
    (d / "Corefile").write_text(_corefile())
    (d / "resolv.conf").write_text(f"nameserver {node_ip()}\n")
    kube.write_client_kubeconfig(d / "kubelet.kubeconfig", f"system:node:{NAME}", "system:nodes")
    kube.write_client_kubeconfig(d / "kube-proxy.kubeconfig", "system:kube-proxy", "")
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1")
    with contextlib.suppress(
        OSError
    ):  # Services between Pods on the bridge need bridged traffic to see iptables
        Path("/proc/sys/net/bridge/bridge-nf-call-iptables").write_text("1")

    path = os.pathsep.join([str(bins["containerd"]), os.environ.get("PATH", "")])
    if procs.running_pid(CONTAINERD) is None:
        procs.start(
            CONTAINERD,
            [str(bins["containerd"] / "containerd"), "--config", str(d / "containerd.toml")],
            env={**os.environ, "PATH": path},
        )
    procs.wait_started(CONTAINERD, lambda: socket().exists() and _ctr_ok(), timeout)
    _pause_image()
    _helper_image()

    if procs.running_pid(COREDNS) is None:
        procs.start(COREDNS, [str(bins["coredns"] / "coredns"), "-conf", str(d / "Corefile")], cwd=d)
    procs.wait_started(COREDNS, lambda: _http_ok(f"http://127.0.0.1:{ports.COREDNS_HEALTH}/health"), timeout)

    start_kubelet(timeout, path)

    if procs.running_pid(KUBE_PROXY) is None:
        procs.start(KUBE_PROXY, [str(bins["kube"] / "kube-proxy"), f"--config={d / 'kube-proxy.yaml'}"])
    procs.wait_started(
        KUBE_PROXY, lambda: _http_ok(f"http://127.0.0.1:{ports.KUBE_PROXY_HEALTHZ}/healthz"), timeout
    )
    kube.apply(_provisioner_objects())
    if procs.running_pid(PROVISIONER) is None:
        log = procs.log_file(PROVISIONER)
        offset = log.stat().st_size if log.exists() else 0
        procs.start(
            PROVISIONER,
            [
                str(bins["provisioner"] / "local-path-provisioner"),
                "start",
                f"--kubeconfig={kube.kubeconfig()}",
                f"--namespace={PROVISIONER_NAMESPACE}",
                "--configmap-name=local-path-config",
                f"--service-account-name={PROVISIONER}",
                f"--helper-image={HELPER_IMAGE}",
                "--provisioner-name=rancher.io/local-path",
            ],
        )
        started = "Started provisioner controller"  # it serves no health endpoint
        procs.wait_started(PROVISIONER, lambda: started in _read_from(log, offset), timeout)
    procs.wait_started(KUBELET, _node_ready, timeout)


def start_kubelet(timeout: float = 120, path: str | None = None) -> None:
    """Start the kubelet unless it runs (its configuration is written by ``up``); wait for the Node's Ready."""
    d = root()
    if path is None:
        path = os.pathsep.join([str(gobuild.containerd_dir() / "bin"), os.environ.get("PATH", "")])
    bins = gobuild.kube_node_dir() / "bin"
    if procs.running_pid(KUBELET) is None:
        procs.start(
            KUBELET,
            [
                str(bins / "kubelet"),
                f"--config={d / 'kubelet.yaml'}",
                f"--kubeconfig={d / 'kubelet.kubeconfig'}",
                f"--root-dir={d / 'kubelet'}",
                f"--cert-dir={d / 'kubelet' / 'pki'}",
                f"--hostname-override={NAME}",
                f"--node-ip={node_ip()}",
                "--v=1",
            ],
            env={**os.environ, "PATH": path},
        )
    procs.wait_started(
        KUBELET, lambda: _http_ok(f"http://127.0.0.1:{ports.KUBELET_HEALTHZ}/healthz"), timeout
    )

    procs.wait_started(KUBELET, _node_ready, timeout)


def _read_from(path: Path, offset: int) -> str:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def _ctr_ok() -> bool:
    return subprocess.run(_ctr("version"), capture_output=True).returncode == 0


def _http_ok(url: str) -> bool:
    import urllib.request

    with urllib.request.urlopen(url, timeout=2) as resp:
        return bool(resp.status == 200)


def _node_ready() -> bool:
    out = subprocess.run(
        kube.kubectl("get", "node", NAME, "-o", "json"), capture_output=True, text=True, timeout=10
    )
    if out.returncode != 0:
        return False
    node = json.loads(out.stdout)
    conditions = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
    taints = {t["key"] for t in node.get("spec", {}).get("taints", [])}
    return conditions.get("Ready") == "True" and "node.kubernetes.io/not-ready" not in taints


# ---------------------------------------------------------------- down


def down() -> list[str]:
    """Stop the node and leave nothing behind on the machine: Pods, rules, mounts, bridge, cgroups."""
    stopped = []
    if procs.stop(KUBELET):
        stopped.append(KUBELET)
    if procs.running_pid(CONTAINERD) is not None:
        _remove_pods()
    for name in (PROVISIONER, KUBE_PROXY, COREDNS, CONTAINERD):
        if procs.stop(name):
            stopped.append(name)
    if stopped:
        _clean_leftovers()
    return stopped


def _crictl(*args: str) -> list[str]:
    return [str(gobuild.crictl_dir() / "bin" / "crictl"), "--runtime-endpoint", f"unix://{socket()}", *args]


def container_pid(container_id: str) -> int:
    """The host pid of a container's first process (``containerd://<id>``): what a node failure kills.

    0 when the container has exited."""
    out = run(_crictl("inspect", "-o", "json", container_id.removeprefix("containerd://")))
    return int(json.loads(out)["info"].get("pid") or 0)


def _remove_pods() -> None:
    """Stop and remove every Pod through the CRI, so CNI tears their networks down."""
    subprocess.run(_crictl("rmp", "--all", "--force"), capture_output=True, timeout=120)


def _clean_leftovers() -> None:
    """What a node killed without ``down`` leaves: shims, kube-proxy's rules, mounts, the bridge, cgroups."""
    state = str(root())
    for pid in _pids_mentioning(state):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    proxy = gobuild.kube_node_dir() / "bin" / "kube-proxy"
    if proxy.exists():
        subprocess.run([str(proxy), "--cleanup"], capture_output=True, timeout=60)
    _remove_chains()
    for mount in sorted(_mounts_under(state), key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True)
    subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)
    for ns in Path("/var/run/netns").glob("cni-*"):
        subprocess.run(["ip", "netns", "del", ns.name], capture_output=True)
    _remove_cgroups()
    for sub in ("containerd/state", "kubelet/pods", "cni/ipam"):
        shutil.rmtree(root() / sub, ignore_errors=True)


def _pids_mentioning(text: str) -> list[int]:
    """Processes whose command line names ``text`` (the containerd shims of this node)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if text in cmdline and "containerd-shim" in cmdline:
                found.append(int(proc.name))
    return found


def _mounts_under(prefix: str) -> list[str]:
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefix):
                mounts.append(point)
    return mounts


def _remove_chains() -> None:
    """The iptables chains the node made (``KUBE-*`` of the kubelet and kube-proxy, ``CNI-*`` of
    the bridge plugin) and the rules that jump to them, in every table they use."""
    for table in ("nat", "filter", "mangle"):
        out = subprocess.run(["iptables", "-t", table, "-S"], capture_output=True, text=True)
        lines = out.stdout.splitlines()
        chains = [line.split()[1] for line in lines if line.startswith(("-N KUBE-", "-N CNI-"))]
        for rule in lines:
            builtin = rule.startswith("-A ") and not rule.split()[1].startswith(("KUBE-", "CNI-"))
            if builtin and any(f"-j {chain}" in rule for chain in chains):
                subprocess.run(["iptables", "-t", table, "-D", *shlex.split(rule)[1:]], capture_output=True)
        for action in ("-F", "-X"):
            for chain in chains:
                subprocess.run(["iptables", "-t", table, action, chain], capture_output=True)


def _remove_cgroups() -> None:
    """The kubelet's ``kubepods`` cgroups, deepest first (a cgroup goes only when empty)."""
    base = Path("/sys/fs/cgroup")
    for controller in base.iterdir() if base.exists() else []:
        top = controller / "kubepods"
        if not top.is_dir():
            continue
        for group in sorted(
            (p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
        ):
            with contextlib.suppress(OSError):
                group.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()
