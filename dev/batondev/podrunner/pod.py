"""One Pod bound to the runner's Node: a thread that sets it up, runs it and tears it down.

Set-up is the kubelet's: wait until its claims are Bound (creating their PVs), fill its
secret/configMap/projected volumes, pick its local ports and publish them in annotations.
Then, twice a second, each container ``tick``s and the Pod's status is written when it
changed. When the Pod gets a ``deletionTimestamp`` its processes get SIGTERM, the grace
period, SIGKILL, and the Pod is deleted for good (grace 0) so its controller can replace it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batondev.podrunner import (
    claims,
    envresolve,
    ocirun,
    ocispec,
    portmap,
    probes,
    process,
    rewrite,
    volfill,
    volumes,
)
from batondev.podrunner.container import Container, Launch, Policy
from batondev.podrunner.kubeapi import Api
from batondev.podrunner.node import capacity
from batondev.podrunner.status import pod_status

VOLUMES_ANNOTATION = "podrunner.baton.dev/volumes"
FILLED_KINDS = ("secret", "configMap", "projected", "downwardAPI")


@dataclass
class Context:
    """What every Pod of one runner shares."""

    api: Api
    node: str
    layout: volumes.Layout
    ports: portmap.Allocator
    bin_dir: Path  # the project's virtualenv bin: first on every container's PATH, so `baton` is found
    workdir: Path  # cwd (and PYTHONPATH) of containers without a usable workingDir: stands in for the image
    backoff_base: float
    backoff_cap: float
    log: Callable[[str], None]
    image_env: dict[str, str] = field(default_factory=dict)  # the image's ENV: below the Pod's env
    oci: ocirun.OciRuntime | None = None  # OCI mode: containers run from their images (ocirun)


class PodWorker(threading.Thread):
    def __init__(self, ctx: Context, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        super().__init__(name=f"pod-{meta['namespace']}/{meta['name']}", daemon=True)
        self.ctx = ctx
        self.key = f"{meta['namespace']}/{meta['name']}"
        self.uid: str = meta["uid"]
        self._pod = pod
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._gone = False
        self._shutdown_grace: float | None = None
        self.ports: dict[int, int] = {}
        self.dirs: dict[str, Path] = {}
        self.containers: list[Container] = []
        self._pushed: dict[str, Any] | None = None
        self.start_time = (pod.get("status") or {}).get("startTime") or process.now_rfc3339()

    # --- called from the runner's watch threads -------------------------------------------
    @property
    def pod(self) -> dict[str, Any]:
        with self._lock:
            return self._pod

    def update(self, pod: dict[str, Any]) -> None:
        with self._lock:
            self._pod = pod
        self._wake.set()

    def gone(self) -> None:
        """The Pod was removed from the API (force-deleted): stop its processes at once."""
        self._gone = True
        self._wake.set()

    def shutdown(self, grace_cap: float) -> None:
        """The runner is stopping: stop the processes, leave the Pod object alone."""
        self._shutdown_grace = grace_cap
        self._wake.set()

    # --- the thread ---------------------------------------------------------------------
    def run(self) -> None:
        try:
            if self._prepare():
                self._loop()
        except Exception:
            self.ctx.log(f"{self.key}: pod worker failed:\n{traceback.format_exc()}")
            for c in self.containers:
                c.stop(2.0)
        finally:
            self.ctx.ports.release(list(self.ports.values()))

    def _stopping(self) -> bool:
        return self._gone or self._shutdown_grace is not None or self._deleting()

    def _deleting(self) -> bool:
        return bool(self.pod["metadata"].get("deletionTimestamp"))

    def _prepare(self) -> bool:
        """Volumes, claims and ports; False when the Pod went away first."""
        pod = self.pod
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        pod_volumes = self.ctx.layout.pod_volumes(ns, name)
        marker = self.ctx.layout.pod_dir(ns, name) / ".uid"
        if marker.exists() and marker.read_text() != self.uid and pod_volumes.exists():
            shutil.rmtree(pod_volumes)  # emptyDirs belong to one Pod, not to its name
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(self.uid)
        self.dirs = volumes.volume_dirs(pod, self.ctx.layout)
        policy = Policy(
            restart=pod["spec"].get("restartPolicy") or "Always",
            grace=float(pod["spec"].get("terminationGracePeriodSeconds") or 30),
            backoff_base=self.ctx.backoff_base,
            backoff_cap=self.ctx.backoff_cap,
        )
        previous = {s["name"]: s for s in (pod.get("status") or {}).get("containerStatuses") or []}
        for spec in pod["spec"]["containers"]:
            c = Container(spec=spec, policy=policy, launch=self._launcher(spec), probe=self._prober())
            c.resume(previous.get(spec["name"]))
            self.containers.append(c)
        self._push(volumes_ready=False)
        while not self._stopping():
            try:
                if self._volumes_ready():
                    break
            except envresolve.ConfigError as exc:
                for c in self.containers:
                    c.view.message = str(exc)
            self._push(volumes_ready=False)
            self._wake.wait(1.0)
            self._wake.clear()
        else:
            if self._deleting() and not self._gone:  # deleted before it ever ran here
                meta = self.pod["metadata"]
                self.ctx.api.delete("v1", "Pod", meta["name"], meta["namespace"], grace=0, uid=self.uid)
            self._finish()
            return False
        previous_ports = portmap.decode(pod)
        self.ports = portmap.plan(pod, self.ctx.ports.free_port, previous_ports)
        self.ctx.ports.hold(list(self.ports.values()))
        annotations = {
            portmap.ANNOTATION: portmap.encode(self.ports),
            VOLUMES_ANNOTATION: json.dumps(
                {k: str(v) for k, v in sorted(self.dirs.items())}, separators=(",", ":")
            ),
        }
        if any((pod["metadata"].get("annotations") or {}).get(k) != v for k, v in annotations.items()):
            self.ctx.api.patch("v1", "Pod", name, {"metadata": {"annotations": annotations}}, ns)
        return True

    def _volumes_ready(self) -> bool:
        pod = self.pod
        ns = pod["metadata"]["namespace"]
        bound = [
            claims.ensure_bound(self.ctx.api, self.ctx.layout, ns, c, self.ctx.node)
            for c in volumes.claim_names(pod)
        ]
        if not all(bound):
            return False
        for vol in pod["spec"].get("volumes") or []:
            if any(kind in vol for kind in FILLED_KINDS):
                volfill.fill(self.dirs[vol["name"]], vol, pod, self.ctx.api.data, self.ctx.api.token)
            elif "persistentVolumeClaim" not in vol:
                self.dirs[vol["name"]].mkdir(parents=True, exist_ok=True)
        return True

    def _loop(self) -> None:
        while True:
            if self._gone:
                self._stop_all(2.0)
                self._finish()
                return
            if self._shutdown_grace is not None:
                self._stop_all(min(self._grace(), self._shutdown_grace))
                self._push()  # not Ready any more: nobody runs it until a runner takes it over
                return
            if self._deleting():
                self._stop_all(self._grace())
                self._push()
                meta = self.pod["metadata"]
                self.ctx.api.delete("v1", "Pod", meta["name"], meta["namespace"], grace=0, uid=self.uid)
                self.ctx.log(f"{self.key}: stopped and deleted")
                self._finish()
                return
            now = time.monotonic()
            for c in self.containers:
                c.tick(now)
            self._push()
            self._wake.wait(0.5)
            self._wake.clear()

    def _grace(self) -> float:
        meta, spec = self.pod["metadata"], self.pod["spec"]
        grace = meta.get("deletionGracePeriodSeconds")
        return float(grace if grace is not None else spec.get("terminationGracePeriodSeconds", 30))

    def _stop_all(self, grace: float) -> None:
        for c in self.containers:
            c.begin_stop()
        deadline = time.monotonic() + grace
        for c in self.containers:
            c.stop(max(0.0, deadline - time.monotonic()))

    def _finish(self) -> None:
        """The Pod is over: its emptyDirs go (claims and logs stay)."""
        ns, name = self.pod["metadata"]["namespace"], self.pod["metadata"]["name"]
        with contextlib.suppress(OSError):
            shutil.rmtree(self.ctx.layout.pod_volumes(ns, name))

    def _push(self, volumes_ready: bool = True) -> None:
        pod = self.pod
        status = pod_status(
            pod,
            [c.view for c in self.containers],
            start_time=self.start_time,
            now=process.now_rfc3339(),
            volumes_ready=volumes_ready,
        )
        if status == self._pushed:
            return
        try:
            self.ctx.api.patch(
                "v1",
                "Pod",
                pod["metadata"]["name"],
                {"status": status},
                pod["metadata"]["namespace"],
                status=True,
            )
            self._pushed = status
        except Exception as exc:  # gone or conflicting: the next tick (or the watch) sorts it out
            self.ctx.log(f"{self.key}: status update failed: {exc}")

    # --- launching ----------------------------------------------------------------------
    def _launcher(self, spec: Mapping[str, Any]) -> Callable[[], Launch]:
        return lambda: self._launch(spec)

    def _prober(self) -> Callable[[Mapping[str, Any], Launch], bool]:
        def run(probe: Mapping[str, Any], launch: Launch) -> bool:
            return probes.check(probe, self.pod, self.ports, env=launch.env, cwd=launch.cwd)

        return run

    def _launch(self, spec: Mapping[str, Any]) -> Launch:
        """Env, argv and cwd of one start of ``spec``, rewritten for this host (see ``rewrite``)."""
        if self.ctx.oci is not None:
            return self._launch_oci(spec, self.ctx.oci)
        pod = self.pod
        meta = pod["metadata"]
        mounts = volumes.mounts(spec, self.dirs)
        env = envresolve.resolve_env(pod, spec, self.ctx.api.data, _node_resources())
        env = rewrite.rewrite_env_ports(env, self.ports)
        env = {k: rewrite.rewrite_paths(v, mounts) for k, v in env.items()}
        base = {
            **self.ctx.image_env,
            "PATH": f"{self.ctx.bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": os.environ.get("HOME", "/tmp"),
            "HOSTNAME": meta["name"],
            "PYTHONPATH": str(self.ctx.workdir),
            process.NODE_ENV: self.ctx.node,
            "BATON_PODRUNNER_POD": self.key,
        }
        for var in ("LANG", "LC_ALL", "TZ"):
            if var in os.environ:
                base[var] = os.environ[var]
        if "/tmp" in mounts:
            base["TMPDIR"] = str(mounts["/tmp"])
        sa = mounts.get(volfill.SA_DIR)
        if sa is not None and (sa / "token").exists():
            kubeconfig = self.ctx.layout.pod_dir(meta["namespace"], meta["name"]) / "kubeconfig"
            kubeconfig.write_text(volfill.kubeconfig_for(self.ctx.api.server, sa))
            base["KUBECONFIG"] = str(kubeconfig)
        full = {**base, **env}
        argv = envresolve.expand_all(list(spec.get("command") or []) + list(spec.get("args") or []), full)
        argv = rewrite.rewrite_arg_ports([rewrite.rewrite_paths(a, mounts) for a in argv], self.ports)
        cwd = self.ctx.workdir
        if spec.get("workingDir"):
            local = Path(rewrite.rewrite_paths(spec["workingDir"], mounts))
            cwd = local if local.is_dir() else cwd
        return Launch(
            argv=argv,
            env=full,
            cwd=cwd,
            log=self.ctx.layout.log_file(meta["namespace"], meta["name"], spec["name"]),
            readiness=_rewrite_probe(spec.get("readinessProbe"), mounts),
            liveness=_rewrite_probe(spec.get("livenessProbe"), mounts),
        )

    def _launch_oci(self, spec: Mapping[str, Any], runtime: ocirun.OciRuntime) -> Launch:
        """One start of ``spec`` from its image: volumes at their real mountPaths, so only
        ports are rewritten (the container shares the host's network, see ``ocispec``)."""
        pod = self.pod
        meta = pod["metadata"]
        ns, name = meta["namespace"], meta["name"]
        rootfs, image = runtime.image(spec.get("image") or "")
        env = envresolve.resolve_env(pod, spec, self.ctx.api.data, _node_resources())
        env = rewrite.rewrite_env_ports(env, self.ports)
        pod_dir = self.ctx.layout.pod_dir(ns, name)
        files = {"/etc/hosts": _hosts_file(pod_dir, name)}
        base = {"HOSTNAME": name, process.NODE_ENV: self.ctx.node, "BATON_PODRUNNER_POD": self.key}
        mounts = volumes.mounts(spec, self.dirs)
        for local in mounts.values():  # a bind needs its source: a new claim's directory, a subPath
            local.mkdir(parents=True, exist_ok=True)
        sa = mounts.get(volfill.SA_DIR)
        if sa is not None and (sa / "token").exists():
            kubeconfig = pod_dir / "kubeconfig"
            kubeconfig.write_text(
                volfill.kubeconfig_for(self.ctx.api.server, sa).replace(str(sa), volfill.SA_DIR)
            )
            files[KUBECONFIG_PATH] = kubeconfig
            base["KUBECONFIG"] = KUBECONFIG_PATH
        full = {**image.env, **base, **env}
        argv = envresolve.expand_all(ocispec.argv(spec, image), full)
        argv = rewrite.rewrite_arg_ports(argv, self.ports)
        _apply_fs_group(pod, self.dirs)
        cid = f"{self.ctx.node}.{ns}.{name}.{spec['name']}"
        read_only = {
            m["mountPath"]
            for m in spec.get("volumeMounts") or []
            if m.get("readOnly") or self._filled(m["name"])
        }
        config = ocispec.config(
            pod=pod,
            container=spec,
            image=image,
            rootfs=rootfs,
            args=argv,
            env={**base, **env},
            binds=mounts,
            read_only_binds=read_only,
            files=files,
            hostname=name,
        )
        writable_root = not config["root"]["readonly"]
        return Launch(
            argv=argv,
            env=full,
            cwd=pod_dir,
            log=self.ctx.layout.log_file(ns, name, spec["name"]),
            readiness=_exec_inside(spec.get("readinessProbe"), runtime, cid),
            liveness=_exec_inside(spec.get("livenessProbe"), runtime, cid),
            oci=ocirun.OciLaunch(
                cid=cid,
                bundle=pod_dir / "oci" / spec["name"],
                config=config,
                lower=rootfs,
                overlay=writable_root,
            ),
            runtime=runtime,
        )

    def _filled(self, volume: str) -> bool:
        """Secret, configMap, projected and downwardAPI volumes are mounted read-only, as the kubelet does."""
        for vol in self.pod["spec"].get("volumes") or []:
            if vol["name"] == volume:
                return any(kind in vol for kind in FILLED_KINDS)
        return False


KUBECONFIG_PATH = "/var/run/baton-podrunner/kubeconfig"


def _hosts_file(pod_dir: Path, hostname: str) -> Path:
    """The Pod's /etc/hosts, as the kubelet writes it: localhost and the Pod's own name."""
    hosts = pod_dir / "hosts"
    pod_dir.mkdir(parents=True, exist_ok=True)
    hosts.write_text(f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n127.0.0.1\t{hostname}\n")
    return hosts


def _apply_fs_group(pod: Mapping[str, Any], dirs: Mapping[str, Path]) -> None:
    """What the kubelet does for volumes: emptyDirs world-writable, ``fsGroup`` owning the rest
    (group read-write, setgid directories), so a non-root container can write its state."""
    ctx = pod["spec"].get("securityContext") or {}
    fs_group = ctx.get("fsGroup")
    for vol in pod["spec"].get("volumes") or []:
        local = dirs.get(vol["name"])
        if local is None or "hostPath" in vol or not local.exists():
            continue
        if "emptyDir" in vol:
            local.chmod(0o777)
        if fs_group is None:
            continue
        top = local.stat()
        if (
            ctx.get("fsGroupChangePolicy") == "OnRootMismatch"
            and top.st_gid == int(fs_group)
            and top.st_mode & 0o2070 == 0o2070
        ):
            continue  # already done: the kubelet skips the walk too
        for path in [local, *local.rglob("*")]:
            if path.is_symlink():
                continue
            os.chown(path, -1, int(fs_group))
            mode = path.stat().st_mode
            path.chmod((mode | 0o2070) & 0o7777 if path.is_dir() else (mode | 0o060) & 0o7777)


def _exec_inside(
    probe: Mapping[str, Any] | None, runtime: ocirun.OciRuntime, cid: str
) -> Mapping[str, Any] | None:
    """An ``exec`` probe runs inside the container (``<runtime> exec``); the others are unchanged."""
    if probe is None or "exec" not in probe:
        return probe
    return {**probe, "exec": {"command": runtime.exec_argv(cid, list(probe["exec"].get("command") or []))}}


def _rewrite_probe(probe: Mapping[str, Any] | None, mounts: Mapping[str, Path]) -> Mapping[str, Any] | None:
    if probe is None or "exec" not in probe:
        return probe
    command = [rewrite.rewrite_paths(a, mounts) for a in probe["exec"].get("command") or []]
    return {**probe, "exec": {"command": command}}


def _node_resources() -> envresolve.NodeResources:
    cap = capacity()
    return envresolve.NodeResources(
        cpu=cap["cpu"], memory=cap["memory"], ephemeral_storage=cap["ephemeral-storage"]
    )
