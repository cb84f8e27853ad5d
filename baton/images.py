"""What Baton's images promise the manifests that run them (the Dockerfile's ``USER``).

The operator's worker StatefulSets and the compactor's Job both run the images as this user
and give their volumes this group (``fsGroup``), so mounted Secrets (``defaultMode`` 0440)
and claims are readable by the process; tests/unit/test_dockerfile.py holds the Dockerfile's
``USER`` and ``useradd`` to it.
"""

from __future__ import annotations

from typing import Final

RUN_AS_USER: Final = 10001
