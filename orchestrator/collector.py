"""The cyclic garbage collector, paused while a listing or a check builds a large heap it keeps.

A listing of 10,000 tools makes hundreds of thousands of container objects
(parsed frontmatters, plans, index rows) and frees almost none of them: the
caches keep them. The collector's passes over that growing heap found
nothing to free and took 16% of a first ``toolcascade list`` and 12% of a
repeated one (``bench/catalog.py --cpu``), and ~2 of 7 s of a ``check``.

The switch is the process's, shared by every thread, so pauses are counted:
the collector comes back when the last pause ends, and only when it was on
as the first began.

What a pause made is then moved to the oldest generation (``gc.freeze()``
then ``gc.unfreeze()``: two list splices). Left in the youngest, the first
two passes after the pause would each walk all of it, to promote what the
caches keep anyway: ~0.1 s of a repeated 10,000-tool ``list`` (0.7 s).
Cycles made meanwhile are collected by the collector's next full pass.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_pauses = 0  # pauses in progress, on any thread
_resume = False  # whether the collector was on when the first of them began


@contextmanager
def paused() -> Iterator[None]:
    """The cyclic collector off while the block runs (on every thread), back as it was after the last pause."""
    global _pauses, _resume
    with _lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.freeze()  # every tracked object to the permanent generation,
                gc.unfreeze()  # and from there to the oldest one
                gc.enable()
