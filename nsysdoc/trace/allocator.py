"""Returning freed memory to the operating system, and letting the allocator keep it (issue 51:
apart from the block store, which only holds rows).

Why a module of its own: the loader, the engine's slice loop and the assembly all free large
arrays and allocate similar ones again. Two allocators keep what is freed: Arrow's memory pool and
glibc's heap (numpy's large arrays land there once its mmap threshold has grown). Kept pages count
in the process's resident memory, so after a phase that held much (the loader's chunks) they are
handed back (:func:`release_memory`); but handing them back after every slice costs a page fault
per 4 KB when the next slice allocates again, so a loop releases only once it has grown
(:class:`Releaser`), and the command line asks glibc to keep freed memory (:func:`keep_freed_memory`).
Linux/glibc specifics (``/proc/self/statm``, ``mallopt``, ``malloc_trim``) are no-ops elsewhere.
"""
from __future__ import annotations

import os
import sys

#: Resident bytes below which :func:`release_memory` keeps freed memory for reuse: handing pages
#: back costs a page fault per 4 KB when the next slice allocates again (0.2-0.3 s of a 2 M-row
#: report), and a process this small is far inside every memory goal.
RELEASE_RSS_BYTES = 640 << 20


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux ``/proc/self/statm``; None where unavailable)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def release_memory() -> bool:
    """Give Arrow's freed memory back to the system (its allocator keeps freed pages for reuse,
    which would count in the process's resident memory after the loader's chunks are gone), once
    the process holds :data:`RELEASE_RSS_BYTES` (always, where that cannot be measured). Returns
    whether it released."""
    rss = resident_bytes()
    if rss is not None and rss < RELEASE_RSS_BYTES:
        return False
    release_now()
    return True


def release_now() -> None:
    """Give what Arrow's pool and glibc's heap keep of freed memory back to the system, now and
    whatever the process holds (Arrow's only once pyarrow is imported: before, its pool holds
    nothing). What the callers below and the Kineto reader's windows share."""
    pa = sys.modules.get("pyarrow")
    if pa is not None:
        try:
            pa.default_memory_pool().release_unused()
        except Exception:  # pragma: no cover - older pyarrow
            pass
    _malloc_trim()


def release_after_load() -> None:
    """Give the memory a trace's load freed back to the system, whatever the process holds: for
    a load whose temporaries are gone and whose analysis does not allocate them again (a
    PyTorch Profiler trace: parsed in one go, analysed by numpy). Arrow's pool and glibc's heap
    both keep freed pages: after parsing 400 k launches the heap held 195 MB with 90 MB in use,
    and a cache hit's string tables left ~80 MB in Arrow's pool (issue 50)."""
    release_now()


#: :class:`Releaser`'s default: how much more than before its last release the process must hold
RELEASE_GROWTH_BYTES = 64 << 20


class Releaser:
    """:func:`release_memory` for a loop whose every pass frees most of what the next pass
    allocates again (the analysis slices): it releases only once the process holds
    ``growth_bytes`` more than it did just before its previous release. Releasing after every
    pass hands back pages the next pass faults in again, a page fault per 4 KB: on a 20 M-row
    report 2.1 M faults and 8 s of system time against 0.7 M and 3.8 s, for a peak 40-90 MB
    higher (measured 2026-12-05, docs/loader.md). Where memory cannot be measured, it releases
    every time, as :func:`release_memory` does."""

    def __init__(self, growth_bytes: int = RELEASE_GROWTH_BYTES) -> None:
        self.growth_bytes = growth_bytes
        #: resident bytes just before the last release (0: none yet)
        self.released_at = 0
        self.releases = 0

    def __call__(self) -> bool:
        rss = resident_bytes()
        if rss is not None and self.released_at and rss < self.released_at + self.growth_bytes:
            return False
        if not release_memory():
            return False
        self.released_at = rss or 0
        self.releases += 1
        return True


#: glibc ``mallopt`` parameters (``malloc.h``)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: Arrays up to this size come from the heap, where freed ones are reused: glibc's own limit for
#: its adaptive threshold (which starts at 128 KB and grows only as big blocks are freed)
MMAP_THRESHOLD_BYTES = 32 << 20


def keep_freed_memory() -> bool:
    """Let glibc reuse freed memory instead of returning it to the system at once: the analysis
    frees and allocates similar arrays slice after slice, every fresh page costs a page fault on
    first touch, and on a VM a fault costs several microseconds (a third fewer faults on a 2 M-row
    report, 64 k -> 42 k). Large arrays stay on the heap (mmap threshold 32 MB) and the heap top is
    not trimmed automatically; :func:`release_memory` still hands memory back once the process
    holds :data:`RELEASE_RSS_BYTES`. For the command line only (a library should not change its
    host process's allocator); a no-op where there is no glibc. Returns whether it applied."""
    try:
        import ctypes
        import ctypes.util

        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = getattr(lib, "mallopt", None)
        if mallopt is None or not hasattr(lib, "malloc_trim"):
            return False
        global _KEEPS
        _KEEPS = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30))
        return _KEEPS
    except Exception:  # not glibc, no ctypes
        return False


#: whether :func:`keep_freed_memory` applied in this process
_KEEPS = False


def release_between_phases() -> bool:
    """Between two phases of an analysis that do not allocate the same arrays again (a PyTorch
    Profiler trace's plan, run and operator tables: each built once, over the whole capture),
    hand back what the one before freed: glibc keeps freed holes of its heap resident (100 MB of
    a 400 k-launch report's 210 MB heap held 110 MB), and the next phase's peak would come on
    top (issue 50). Not when :func:`keep_freed_memory` applied: the process chose to keep freed
    memory for reuse (an Nsight Systems capture's slices). Returns whether it released."""
    if _KEEPS:
        return False
    release_now()
    return True


def _malloc_trim() -> None:
    """glibc keeps freed heap pages (numpy's large arrays end up there once its mmap threshold has
    grown); ``malloc_trim`` returns them. A no-op elsewhere."""
    global _TRIM
    if _TRIM is None:
        try:
            import ctypes
            import ctypes.util

            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _TRIM = lib.malloc_trim if hasattr(lib, "malloc_trim") else False
        except Exception:  # pragma: no cover - not glibc
            _TRIM = False
    if _TRIM:
        _TRIM(0)


_TRIM = None
