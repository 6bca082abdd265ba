"""Collections that walk only what a test made, not the heap a suite worker has grown (issue 25).

``gc.collect()`` walks every tracked object: in a worker that has run hundreds of tests (and imported
Ray, LangChain, the MCP SDK), that is the better part of a second each time. A test that collects to
see what its own calls left (a cycle, a weakly referenced object still alive, an unclosed socket's
warning) needs only the objects made since it began.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def own_heap() -> Iterator[None]:
    """Inside, ``gc.collect()`` walks only objects made inside: everything older is frozen (``gc.freeze()``).

    What the test makes and leaves in a cycle is still found and counted; the frozen objects go back to
    the collector's oldest generation at the end.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
