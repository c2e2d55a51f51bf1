"""A worker's heap, set up for chunk after chunk: glibc's malloc thresholds, and the
objects of its start kept out of the cyclic collector's full collections.

    tune_malloc()          # before the engine starts
    freeze_startup()       # once it has started (modules, plugins, the engine loaded)

Per query chunk, a worker allocates and frees a ~0.4 MB blob, a ~1-1.5 MB
decompressed body and the rows built from it. With glibc's defaults those blocks
were mapped and unmapped (or trimmed from an arena's top) chunk after chunk, ~80 page
faults a chunk; and the collector's full collections walked the ~220k objects of the
worker's start every few hundred chunks, 0.18 ms a chunk (``DESIGN.md``,
"Performance"). Neither changes what is computed or stored.

Failure semantics: where the C library has no ``mallopt`` (not glibc), the malloc
thresholds stay the library's; nothing here raises.
"""

from __future__ import annotations

import ctypes
import gc
import logging

from companion import defaults

log = logging.getLogger(__name__)

__all__ = ["freeze_startup", "tune_malloc"]

#: glibc's ``mallopt`` parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def tune_malloc(
    mmap_threshold: int = defaults.MALLOC_MMAP_THRESHOLD_BYTES,
    trim_threshold: int = defaults.MALLOC_TRIM_THRESHOLD_BYTES,
) -> bool:
    """Set glibc's malloc thresholds for this process (``defaults.py``: blocks up to
    ``mmap_threshold`` from the arenas; up to ``trim_threshold`` kept free at an
    arena's top). Returns whether they were set (False: no glibc ``mallopt``)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold))
    done = bool(mallopt(_M_TRIM_THRESHOLD, trim_threshold)) and done
    if not done:
        log.warning("companion: malloc thresholds not set (mallopt refused them)")
    return done


def freeze_startup() -> None:
    """Move every object this process holds now out of the cyclic collector's
    generations (``gc.freeze``): a full collection then walks only what was made since.
    Cycles already garbage are collected first; refcounting still frees anything
    frozen, and the rows and results of a chunk are made after."""
    gc.collect()
    gc.freeze()
