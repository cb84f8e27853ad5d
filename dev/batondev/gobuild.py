"""Builds Kubernetes, etcd, helm, MinIO and actionlint from the Go module proxy into the cache.

k8s.io/kubernetes cannot be ``go install``ed: its go.mod replaces every staging
module (k8s.io/api, k8s.io/client-go, ...) with a local folder. A small wrapper
module requires k8s.io/kubernetes and replaces each staging module with the
published ``v0.<minor>.<patch>`` instead; then ``go build`` works. The list of
staging modules is read from the release's own go.mod, so a version bump needs
no edit here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import paths, versions
from .requirements import need, run

KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
NODE_BINARIES = ("kubelet", "kube-proxy")
CONTAINERD_BINARIES = ("containerd", "containerd-shim-runc-v2", "ctr")


def kube_dir() -> Path:
    return paths.tool_dir("kubernetes", versions.KUBERNETES)


def kube_node_dir() -> Path:
    return paths.tool_dir("kubernetes-node", versions.KUBERNETES)


def containerd_dir() -> Path:
    return paths.tool_dir("containerd", versions.CONTAINERD)


def local_path_dir() -> Path:
    return paths.tool_dir("local-path-provisioner", versions.LOCAL_PATH_PROVISIONER)


def crictl_dir() -> Path:
    return paths.tool_dir("crictl", versions.CRI_TOOLS)


def coredns_dir() -> Path:
    return paths.tool_dir("coredns", versions.COREDNS)


def etcd_dir() -> Path:
    return paths.tool_dir("etcd", versions.ETCD)


def helm_dir() -> Path:
    return paths.tool_dir("helm", versions.HELM)


def minio_dir() -> Path:
    return paths.tool_dir("minio", versions.MINIO)


def spark_operator_dir() -> Path:
    return paths.tool_dir("spark-operator", versions.SPARK_OPERATOR)


def promtool_dir() -> Path:
    return paths.tool_dir("promtool", versions.PROMETHEUS)


def prometheus_dir() -> Path:
    return paths.tool_dir("prometheus", versions.PROMETHEUS)


def actionlint_dir() -> Path:
    return paths.tool_dir("actionlint", versions.ACTIONLINT)


def _go_env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GOFLAGS", "-mod=mod")
    env["GOFLAGS"] = (
        env["GOFLAGS"] + " -buildvcs=false" if "-buildvcs" not in env["GOFLAGS"] else env["GOFLAGS"]
    )
    env["GOTOOLCHAIN"] = "local"
    env["CGO_ENABLED"] = "0"
    return env


def _download(module: str, env: dict[str, str], cwd: Path) -> dict[str, str]:
    """``go mod download -json module@version``: where the module cache put it (Dir, GoMod, ...)."""
    out = subprocess.run(
        ["go", "mod", "download", "-json", module],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, str] = json.loads(out.stdout)
    return found


def _staging_modules(version: str, env: dict[str, str], cwd: Path) -> list[str]:
    gomod = Path(_download(f"k8s.io/kubernetes@{version}", env, cwd)["GoMod"]).read_text()
    return sorted(set(re.findall(r"^\s*(k8s\.io/[\w.-]+)\s*=>\s*\./staging/", gomod, re.M)))


def _install_bins(built: Path, dest: Path, names: tuple[str, ...]) -> None:
    """Move finished binaries into the cache atomically, so a half build is never 'installed'."""
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "bin").mkdir(parents=True)
    for name in names:
        shutil.copy2(built / name, tmp / "bin" / name)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


def build_kubernetes() -> Path:
    """Build kube-apiserver, kube-controller-manager, kube-scheduler and kubectl once per version."""
    return _build_kube(KUBE_BINARIES, kube_dir())


def build_kube_node() -> Path:
    """kubelet and kube-proxy, in a folder of their own so a control-plane-only cache stays valid."""
    return _build_kube(NODE_BINARIES, kube_node_dir())


def _build_kube(binaries: tuple[str, ...], dest: Path) -> Path:
    if all((dest / "bin" / b).exists() for b in binaries):
        return dest / "bin"
    need("go")
    version = versions.KUBERNETES
    major, minor, patch = version.lstrip("v").split(".")
    with tempfile.TemporaryDirectory(prefix="baton-kube-") as tmpd:
        work = Path(tmpd)
        env = _go_env(work)
        (work / "go.mod").write_text("module baton.dev/kubewrapper\n\ngo 1.25\n")
        staging = _staging_modules(version, env, work)
        replaces = "\n".join(f"\t{m} => {m} v0.{minor}.{patch}" for m in staging)
        (work / "go.mod").write_text(
            "module baton.dev/kubewrapper\n\ngo 1.25\n\n"
            f"require k8s.io/kubernetes {version}\n\nreplace (\n{replaces}\n)\n"
        )
        log = str(paths.CACHE / f"{dest.name}.build.log")
        pkgs = [f"k8s.io/kubernetes/cmd/{b}" for b in binaries]
        run(["go", "get", *[f"{p}@{version}" for p in pkgs]], cwd=str(work), env=env, log=log)
        ldflags = " ".join(
            f"-X {pkg}.{k}={v}"
            for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
            for k, v in (
                ("gitVersion", version),
                ("gitMajor", major),
                ("gitMinor", minor),
                ("gitTreeState", "clean"),
                ("gitCommit", f"baton-wrapper-{version}"),
                ("buildDate", "1970-01-01T00:00:00Z"),
            )
        )
        out = work / "out"
        out.mkdir()
        run(
            ["go", "build", "-trimpath", "-ldflags", f"-s -w {ldflags}", "-o", str(out) + "/", *pkgs],
            cwd=str(work),
            env=env,
            log=log,
        )
        _install_bins(out, dest, binaries)
    return dest / "bin"


def build_etcd() -> Path:
    """etcd's own go.mod also uses local replaces, so it gets the same wrapper treatment."""
    main = 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n'
    return _wrapper_build(
        "etcd", f"go.etcd.io/etcd/server/v3@{versions.ETCD}", main, etcd_dir(), versions.ETCD
    )


# The plugins the node's Corefile uses (batondev.node): the whole CoreDNS also links every
# cloud provider's SDK and tracers, which take minutes to compile and are never used here.
COREDNS_PLUGINS = ("bind", "cache", "errors", "forward", "health", "kubernetes", "log", "ready")


def build_coredns() -> Path:
    """CoreDNS with the plugins the node needs, in the main package CoreDNS documents for custom builds."""
    imports = "".join(f'\t_ "github.com/coredns/coredns/plugin/{p}"\n' for p in COREDNS_PLUGINS)
    main = (
        f'package main\n\nimport (\n\t"github.com/coredns/coredns/coremain"\n{imports})\n\n'
        "func main() { coremain.Run() }\n"
    )
    module = f"github.com/coredns/coredns@{versions.COREDNS}"
    return _wrapper_build("coredns", module, main, coredns_dir(), versions.COREDNS)


def _wrapper_build(name: str, module: str, main_go: str, dest: Path, version: str) -> Path:
    """Build ``name`` from a one-file main package that requires ``module``, once per version."""
    if (dest / "bin" / name).exists():
        return dest / "bin"
    need("go")
    paths.CACHE.mkdir(parents=True, exist_ok=True)  # the build log goes there
    with tempfile.TemporaryDirectory(prefix=f"baton-{name}-") as tmpd:
        work = Path(tmpd)
        env = _go_env(work)
        (work / "go.mod").write_text(f"module baton.dev/{name}wrapper\n\ngo 1.25\n")
        (work / "main.go").write_text(main_go)
        log = str(paths.CACHE / f"{name}-{version}.build.log")
        run(["go", "get", module], cwd=str(work), env=env, log=log)
        run(["go", "mod", "tidy"], cwd=str(work), env=env, log=log)
        out = work / "out"
        out.mkdir()
        run(
            ["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / name), "."],
            cwd=str(work),
            env=env,
            log=log,
        )
        _install_bins(out, dest, (name,))
    return dest / "bin"


def _go_install(
    name: str,
    package: str | list[str],
    version: str,
    dest: Path,
    ldflags: str = "-s -w",
    *,
    names: tuple[str, ...] = (),
    tags: str = "",
) -> Path:
    """``go install package@version`` into ``dest/bin`` once (modules whose go.mod has no local replaces).

    ``package`` may list several commands of one module; ``names`` are then the binaries they make."""
    names = names or (name,)
    if all((dest / "bin" / n).exists() for n in names):
        return dest / "bin"
    packages = [package] if isinstance(package, str) else package
    need("go")
    paths.CACHE.mkdir(parents=True, exist_ok=True)  # the build log goes there
    with tempfile.TemporaryDirectory(prefix=f"baton-{name}-") as tmpd:
        work = Path(tmpd)
        env = _go_env(work)
        env["GOBIN"] = str(work / "out")
        env["GOFLAGS"] = "-buildvcs=false"
        run(
            [
                "go",
                "install",
                "-trimpath",
                *(["-tags", tags] if tags else []),
                "-ldflags",
                ldflags,
                *(f"{p}@{version}" for p in packages),
            ],
            cwd=str(work),
            env=env,
            log=str(paths.CACHE / f"{name}-{version}.build.log"),
        )
        _install_bins(work / "out", dest, names)
    return dest / "bin"


def build_helm() -> Path:
    ver = versions.HELM
    ldflags = f"-s -w -X helm.sh/helm/v3/internal/version.version={ver}"
    return _go_install("helm", "helm.sh/helm/v3/cmd/helm", ver, helm_dir(), ldflags)


def build_minio() -> Path:
    """MinIO, the S3-compatible server the snapshot store tests write to and restore from."""
    return _go_install("minio", "github.com/minio/minio", versions.MINIO, minio_dir())


def build_promtool() -> Path:
    """promtool: checks the chart's alert rules and runs their unit tests (tests/unit/artifacts/test_alert_rules.py)."""
    package = "github.com/prometheus/prometheus/cmd/promtool"
    return _go_install("promtool", package, versions.PROMETHEUS, promtool_dir())


def build_prometheus() -> Path:
    """The Prometheus server (no web UI assets: its API is what the tests query), scraping the
    operator and workers as the chart's monitors declare (tests/e2e/test_prometheus.py). Built
    after promtool, it reuses most of promtool's compiled packages from Go's build cache."""
    package = "github.com/prometheus/prometheus/cmd/prometheus"
    return _go_install("prometheus", package, versions.PROMETHEUS, prometheus_dir())


def build_actionlint() -> Path:
    """actionlint, the linter of the GitHub Actions workflows in .github/workflows."""
    package = "github.com/rhysd/actionlint/cmd/actionlint"
    return _go_install("actionlint", package, versions.ACTIONLINT, actionlint_dir())


def build_containerd() -> Path:
    """containerd, its runc shim and ``ctr`` (image import), the node's container runtime.

    Static (no cgo), so the snapshotters that need C libraries are left out; overlayfs and
    native remain, which is all the node uses."""
    module = "github.com/containerd/containerd/v2"
    version = versions.CONTAINERD
    ldflags = f"-s -w -X {module}/version.Version={version}"
    return _go_install(
        "containerd",
        [f"{module}/cmd/{b}" for b in CONTAINERD_BINARIES],
        version,
        containerd_dir(),
        ldflags,
        names=CONTAINERD_BINARIES,
        tags="no_btrfs no_devmapper no_zfs",
    )


def build_crictl() -> Path:
    """crictl: the CRI client that stops and removes every Pod on the node (its network too)."""
    return _go_install("crictl", "sigs.k8s.io/cri-tools/cmd/crictl", versions.CRI_TOOLS, crictl_dir())


def build_local_path_provisioner() -> Path:
    """Rancher's local-path-provisioner: volumes for claims, as folders on the node (as kind and k3s do)."""
    package = "github.com/rancher/local-path-provisioner"
    return _go_install("local-path-provisioner", package, versions.LOCAL_PATH_PROVISIONER, local_path_dir())


SPARK_OPERATOR_MODULE = "github.com/kubeflow/spark-operator/v2"


def build_spark_operator() -> Path:
    """The Kubeflow Spark Operator's binary (``bin/spark-operator``) and its Helm chart (``chart/``).

    Its go.mod replaces the k8s.io modules with published versions (no local folders), but
    ``go install`` refuses any module with replaces; so the module's own tree is built, as
    its Dockerfile does. The chart comes from the same tree, so binary and chart match."""
    dest = spark_operator_dir()
    if (dest / "bin" / "spark-operator").exists() and (dest / "chart" / "Chart.yaml").exists():
        return dest
    need("go")
    version = versions.SPARK_OPERATOR
    paths.CACHE.mkdir(parents=True, exist_ok=True)
    log = str(paths.CACHE / f"spark-operator-{version}.build.log")
    with tempfile.TemporaryDirectory(prefix="baton-spark-operator-") as tmpd:
        work = Path(tmpd)
        env = _go_env(work)
        source = work / "src"
        shutil.copytree(_download(f"{SPARK_OPERATOR_MODULE}@{version}", env, work)["Dir"], source)
        for path in [source, *source.rglob("*")]:  # the module cache's copy is read-only
            path.chmod(path.stat().st_mode | 0o200)
        (work / "out").mkdir()
        run(
            [
                "go",
                "build",
                "-trimpath",
                "-ldflags",
                "-s -w",
                "-o",
                str(work / "out" / "spark-operator"),
                "./cmd/operator",
            ],
            cwd=str(source),
            env=env,
            log=log,
        )
        _install_bins(work / "out", dest, ("spark-operator",))
        shutil.copytree(source / "charts" / "spark-operator-chart", dest / "chart")
    return dest
