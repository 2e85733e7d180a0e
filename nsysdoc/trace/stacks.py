"""Call stacks of CUDA API calls in an Nsight Systems export (``--cudabacktrace``).

The schema (docs: SQLite Schema Reference; ``shared`` notes): ``CUPTI_ACTIVITY_KIND_RUNTIME.callchainId``
references ``CUDA_CALLCHAINS(id, symbol → StringIds, module → StringIds, unresolved, originalIP,
stackDepth)``, one row per frame, ``stackDepth`` 0 the innermost. Python frames of
``--python-backtrace=cuda`` are not stored there (nsys keeps them in NVTX payloads the SQLite
export does not include, checked with nsys 2023.4), so these are native frames.

:func:`cuda_call_frames` returns, per backtraced call, the innermost frame of the program's own
code: the first frame (from the leaf) outside the CUDA driver, runtime and profiler, the C/C++
runtime, the Python interpreter, PyTorch and the CUDA math/communication libraries, and not an
unresolved address or a pseudo frame (``[Unknown]``, ``[Broken backtraces]``, ``[Max depth]``).
Its label is ``"symbol (module file)"``.
"""
from __future__ import annotations

import os
import re
import sqlite3

import numpy as np

from . import schema as S
from .open import open_export

CHAINS = "CUDA_CALLCHAINS"
#: modules whose frames are never the program's own code (matched on the file name)
_LIBRARY_MODULE = re.compile(
    r"^(libcuda|libcudart|libcupti|libnvidia|libnvToolsExt|libnvtx|libToolsInjection|libcublas|libcudnn|libnccl|"
    r"libcufft|libcurand|libcusparse|libcusolver|libnvrtc|libnvJitLink|libtorch|libc10|libcaffe2|libpython|python\d|"
    r"libc\.so|libc-|libpthread|libdl|ld-linux|libstdc\+\+|libgcc_s|libgomp|libm\.so|_C\.|libtriton|libshm)",
    re.IGNORECASE)
_PSEUDO = re.compile(r"^\[.*\]$")


def is_user_native(symbol: str, module: str) -> bool:
    base = os.path.basename(module or "")
    if not symbol or _PSEUDO.match(base) or _PSEUDO.match(symbol) or symbol.startswith("0x"):
        return False
    return not _LIBRARY_MODULE.match(base)


def cuda_call_frames(trace) -> dict | None:
    """``{"global_tid", "start_ns", "end_ns", "frame"}`` arrays for the CUDA calls with a backtrace whose
    stack holds a frame of the program's own code; None when the export has no call stacks."""
    if trace.source_tool != "nsys" or CHAINS not in trace.tables:
        return None
    try:
        exp = open_export(trace.path)
    except Exception:  # noqa: BLE001 - the input was loaded already; a vanished file only loses stacks
        return None
    rt_cols = set(exp.columns(S.RUNTIME))
    ch_cols = set(exp.columns(CHAINS))
    if not {"callchainId", "start", "globalTid"} <= rt_cols or not {"id", "symbol", "module", "stackDepth"} <= ch_cols:
        return None
    con = exp.connect()
    try:
        strings = {}
        lookup = lambda v: strings.get(v, v) if isinstance(v, int) else v  # noqa: E731
        if exp.has(S.STRINGS):
            strings = dict(con.execute(f'SELECT id, value FROM "{S.STRINGS}"'))
        # modules of the program's own code, decided once per distinct module (SQLite scans the
        # frames; Python sees only the frames of those modules)
        mods = [m for (m,) in con.execute(f'SELECT DISTINCT module FROM "{CHAINS}"')]
        user_mods = [m for m in mods if is_user_native("x", str(lookup(m) or ""))]
        if not user_mods:
            return None
        best: dict[int, str] = {}
        marks = ",".join("?" * len(user_mods))
        for cid, sym, mod in con.execute(
                f'SELECT id, symbol, module FROM "{CHAINS}" WHERE module IN ({marks}) ORDER BY id, stackDepth',
                user_mods):
            if cid in best:
                continue
            sname, mname = str(lookup(sym) or ""), str(lookup(mod) or "")
            if is_user_native(sname, mname):
                best[cid] = f"{sname} ({os.path.basename(mname)})"
        if not best:
            return None
        rows = con.execute(
            f'SELECT globalTid, start, "end", callchainId FROM "{S.RUNTIME}" WHERE callchainId IS NOT NULL').fetchall()
    except sqlite3.DatabaseError:
        return None
    finally:
        con.close()
    keep = [(g, s, e, best[c]) for g, s, e, c in rows
            if c in best and isinstance(g, int) and isinstance(s, int) and isinstance(e, int)]
    if not keep:
        return None
    return {"global_tid": np.array([k[0] for k in keep], dtype=np.int64),
            "start_ns": np.array([k[1] for k in keep], dtype=np.int64),
            "end_ns": np.array([k[2] for k in keep], dtype=np.int64),
            "frame": np.array([k[3] for k in keep], dtype=object)}
