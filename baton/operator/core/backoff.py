"""How long kopf waits between retries of a failed Kubernetes API call, without ever giving up.

kopf's default (1, 1, 2, 3, 5, 8, 13, 21 s) escalates after ~54 s, and an escalated error
kills the watch stream of that resource for good: the process stays up, its liveness
stays green, and it never sees a StreamApp again. An API server that answers 429
"storage is (re)initializing" for a freshly created CRD on a loaded node, or 5xx during
a control-plane upgrade, can easily outlast 54 s. A stream operator must outlive that,
so its backoffs start the same and then settle at a steady pace for as long as it takes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

FIRST_S: tuple[float, ...] = (1, 1, 2, 3, 5, 8, 13, 21)
STEADY_S = 30.0


class EndlessBackoff:
    """An iterable kopf can read any number of times; each read starts the sequence anew.

    It is deliberately not ``Sized``: kopf then numbers attempts without a total and
    never reaches its "last attempt, escalate" branch.
    """

    def __init__(self, first: tuple[float, ...] = FIRST_S, steady: float = STEADY_S) -> None:
        self.first, self.steady = first, steady

    def __iter__(self) -> Iterator[float]:
        return itertools.chain(self.first, itertools.repeat(self.steady))
