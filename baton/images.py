"""What Baton's images promise the manifests that run them (the Dockerfile's ``USER``).

The operator's worker StatefulSets and the compactor's Job both run the images as this user
and give their volumes this group (``fsGroup``), so mounted Secrets (``defaultMode`` 0440)
and claims are readable by the process; tests/unit/artifacts/test_dockerfile.py holds the Dockerfile's
``USER`` and ``useradd`` to it.
"""

from __future__ import annotations

from typing import Any, Final

RUN_AS_USER: Final = 10001


def pod_security_context() -> dict[str, Any]:
    """The Pod securityContext of everything the operator runs from the images: non-root as
    the image's user, its group on the volumes, the runtime's default seccomp profile."""
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "fsGroup": RUN_AS_USER,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context(*, read_only_root: bool = True) -> dict[str, Any]:
    """The container securityContext of the same: no privilege escalation, no capabilities,
    a read-only root (writable paths are volumes), as Pod Security's ``restricted`` asks."""
    out: dict[str, Any] = {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if read_only_root:
        out["readOnlyRootFilesystem"] = True
    return out
