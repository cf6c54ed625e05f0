"""The one policy for Python's cyclic garbage collector: off while a big state is built or encoded.

A fold of a long log, loading or encoding a snapshot, allocate millions of small objects that
make no reference cycles, so every pass of the cyclic collector over them is wasted (it was 40%
of a replay, and twice an encoding). The work that builds such a state, all of it here in
``persistence`` (and ``verify``'s fold), runs inside ``paused()``: the collector is put back as it
was when the work ends, whatever happens, and is never touched anywhere else. The core folds
without knowing.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The collector off for the block (nested blocks leave it off; the outermost puts it back)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
