"""The real kubectl and the CRD lock, for fixtures of any scope (tests/conftest.py's use them)."""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.support.durations import cli_deadline

KubectlFn = Callable[..., "subprocess.CompletedProcess[str]"]

CRD_LOCK = Path(tempfile.gettempdir()) / "baton-tests-crd.lock"


@contextlib.contextmanager
def crd_flock(mode: int) -> Iterator[None]:
    """The CRD lock across pytest-xdist's workers: ``fcntl.LOCK_EX`` for a test that changes a
    cluster-wide CRD, ``fcntl.LOCK_SH`` for one that needs the CRDs as installed."""
    with open(CRD_LOCK, "w") as lock:
        fcntl.flock(lock, mode)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def kubectl_runner(kubectl: Path, kubeconfig: Path) -> KubectlFn:
    """Run the real kubectl: ``run("get", "pods", "-n", ns, check=True, input=None)``."""

    def run(
        *args: str, check: bool = True, input: str | None = None, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [str(kubectl), f"--kubeconfig={kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout if timeout is not None else cli_deadline(args),
        )
        if check and out.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}"
            )
        return out

    return run
