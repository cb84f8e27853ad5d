"""Fill the per-Pod directories of secret, configMap, downwardAPI and projected volumes.

A projected ``serviceAccountToken`` gets a real token from the TokenRequest API, bound to
the Pod, so a process that talks to the API server (``baton operator``) does it with its
ServiceAccount's RBAC, not the admin's. The kubernetes client only looks for in-cluster
credentials at a fixed path, so the runner also writes a kubeconfig next to the token
(``kubeconfig_for``) and sets ``KUBECONFIG`` for the container.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from batondev.podrunner import envresolve

# (namespace, service account, audience or None, seconds, pod) -> token
TokenSource = Callable[[str, str, str | None, int, Mapping[str, Any]], str]

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_MODE = 0o644  # a volume's defaultMode when it names none (the API's 420)


def _write(directory: Path, rel: str, content: str | bytes, mode: int | None) -> None:
    target = directory / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode()
    target.write_bytes(content)
    target.chmod(0o600 if mode is None else (mode | 0o600) & 0o777)  # we must be able to rewrite it


def _items(data: Mapping[str, str], items: list[dict[str, Any]] | None) -> list[tuple[str, str, int | None]]:
    if not items:
        return [(k, v, None) for k, v in data.items()]
    return [(i["path"], data[i["key"]], i.get("mode")) for i in items if i["key"] in data]


def fill(
    directory: Path,
    volume: Mapping[str, Any],
    pod: Mapping[str, Any],
    lookup: envresolve.Lookup,
    token: TokenSource,
) -> None:
    """Write the volume's files under ``directory`` (created, emptied first)."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    namespace = pod["metadata"]["namespace"]
    # the API's default (420) when the volume names none: non-root containers can read the files
    default_mode = int(volume.get("projected", {}).get("defaultMode") or DEFAULT_MODE)
    sources: list[Mapping[str, Any]] = (
        (volume["projected"].get("sources") or []) if "projected" in volume else [volume]
    )
    for source in sources:
        for key, kind, ref_name in (("secret", "Secret", "secretName"), ("configMap", "ConfigMap", "name")):
            if key in source:
                ref = source[key]
                name = ref.get(ref_name) or ref.get("name")
                data = lookup(kind, namespace, name)
                if data is None:
                    if ref.get("optional"):
                        continue
                    raise envresolve.ConfigError(
                        f"{kind.lower()} {name!r} for volume {volume['name']!r} not found"
                    )
                for rel, content, mode in _items(data, ref.get("items")):
                    fallback = ref.get("defaultMode") if "projected" not in volume else default_mode
                    _write(directory, rel, content, mode if mode is not None else fallback or DEFAULT_MODE)
        if "downwardAPI" in source:
            for item in source["downwardAPI"].get("items") or []:
                if "fieldRef" in item:
                    _write(
                        directory,
                        item["path"],
                        envresolve.field_value(pod, item["fieldRef"]["fieldPath"]),
                        item.get("mode") or default_mode,
                    )
        if "serviceAccountToken" in source:
            sat = source["serviceAccountToken"]
            value = token(
                namespace,
                pod["spec"].get("serviceAccountName") or "default",
                sat.get("audience"),
                int(sat.get("expirationSeconds") or 3600),
                pod,
            )
            _write(directory, sat.get("path") or "token", value, default_mode)


def kubeconfig_for(server: str, token_dir: Path) -> str:
    """A kubeconfig that uses the projected token and CA in ``token_dir``, as in-cluster config would."""
    ca = token_dir / "ca.crt"
    ca_line = f"    certificate-authority: {ca}\n" if ca.exists() else "    insecure-skip-tls-verify: true\n"
    return (
        "apiVersion: v1\nkind: Config\nclusters:\n- name: in-cluster\n  cluster:\n"
        f"    server: {server}\n{ca_line}"
        "users:\n- name: pod\n  user:\n"
        f"    tokenFile: {token_dir / 'token'}\n"
        "contexts:\n- name: pod\n  context:\n    cluster: in-cluster\n    user: pod\n"
        f"    namespace: {(token_dir / 'namespace').read_text() if (token_dir / 'namespace').exists() else 'default'}\n"
        "current-context: pod\n"
    )
