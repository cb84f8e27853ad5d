"""Memory settings of the processing process, for the per-record path's sake.

**The C heap's top.** Every commit interval builds and drops the same working set: the write cache's dirty
entries, the serialized changelog and output values, the store batch. glibc trims the top
of the heap as soon as that much is free, so the next interval touches fresh pages and
takes a page fault for nearly every flushed entry. On the click counter that was one fault
per flushed entry and about a third of the flush (docs/benchmarks.md, "Measured design choices":
heap-top-pad).
Asking glibc to keep a pad at the top (``M_TOP_PAD``, the knob behind ``MALLOC_TOP_PAD_``)
keeps those pages mapped, at the cost of holding that much memory once it was used.

**The cyclic garbage collector.** Everything loaded before the loop (modules, pydantic's
validators, the topology) lives as long as the process, yet every full collection walked
it again. Freezing it at start moves it out of the collector's way, and a larger first
generation collects the per-record containers (decoded values, dirty entries) less often.
Reference counting frees them either way; only cycles wait for a collection.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os

log = logging.getLogger(__name__)

M_TOP_PAD = -2  # glibc's mallopt parameter number (malloc.h)
TOP_PAD_BYTES = 16 * 1024 * 1024  # the working set of one commit interval at the default cache size


def keep_heap_top(pad: int = TOP_PAD_BYTES) -> bool:
    """Set glibc's top pad, unless the environment already chose one; False where there is no glibc."""
    if "MALLOC_TOP_PAD_" in os.environ:
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    ok = bool(mallopt(M_TOP_PAD, pad))
    log.debug("heap top pad", extra={"bytes": pad, "applied": ok})
    return ok


GC_FIRST_GENERATION = 10_000  # CPython's default is 700 allocations


def settle_garbage_collector() -> None:
    """Freeze what start-up allocated and collect the young generation less often."""
    gc.collect()
    gc.freeze()
    _, second, third = gc.get_threshold()
    gc.set_threshold(GC_FIRST_GENERATION, second, third)
