"""Scalar reads slice by slice (definition: :mod:`nsysdoc.metrics.host`): a slice's tiny
device-to-host copies whose own call syncs, or whose thread's next CUDA call does, that next call
being looked for in the slice's rows and, when it is not read yet, in a later slice (the checks
wait in :attr:`nsysdoc.engine.slice_state.Carry.pending`). Split out of
:mod:`nsysdoc.engine.slices` (issue 51): the one total that waits across slices for later rows."""
from __future__ import annotations

import numpy as np

from ..metrics import intervals as iv
from ..metrics.host import SCALAR_READ_MAX_BYTES
from ..metrics.ops import KIND_MEMCPY
from ..trace import schema as S
from .data import POS, in_sorted
from .slice_state import Carry, Context, Global, SliceState


def _scalar_reads(ctx: Context, st: SliceState, tot: Global, carry: Carry, nxt: Carry) -> None:
    """Scalar reads (definition: ``nsysdoc.metrics.host``) among the slice's own copies, and
    the checks left waiting by earlier slices for their thread's next call."""
    ops = st.ops
    m = np.flatnonzero(ops.owned & (ops.kind == KIND_MEMCPY) & (ops.api >= 0) & (ops.copy_kind == S.COPY_DTOH)
                       & (ops.nbytes <= SCALAR_READ_MAX_BYTES))
    pending = list(carry.pending)
    nxt.pending = []
    found = []
    if len(m):
        kind = ops.api_kind[m]
        blocking = (np.isin(kind, (S.API_SYNC, S.API_SYNC_COPY, S.API_SYNC_MEMSET))
                    | in_sorted(ctx.pageable_api, ops.api[m]))
        itself = (kind == S.API_SYNC_COPY) | blocking
        for i in m[itself].tolist():
            found.append(int(ops.step[i]))
        rest = m[~itself]
        pending += [(int(ops.step[i]), int(ops.api_thread[i]), int(ops.api_start_ns[i])) for i in rest.tolist()]
    if pending:
        found += _resolve_pending(ctx, st, pending, nxt)
    for step in found:
        tot.scalar_reads += 1
        if ctx.has_markers and 0 <= step < tot.nsteps:
            tot.step_scalar[step] += 1


def _resolve_pending(ctx: Context, st: SliceState, pending: list, nxt: Carry) -> list:
    """Checks ``(step, thread, call start)``: is the thread's next CUDA call (the earliest starting
    strictly later) a blocking sync call? Answered from the CUDA API rows that start up to the
    slice end; a check with no later call yet waits for the next slice."""
    c1 = st.c1
    lo = min(t for _s, _th, t in pending)
    if st.rt is not None and lo >= st.rt_lo:
        rows = st.rt  # every row starting in [rt_lo, c1) was read
        m = (rows["start_ns"] > lo) & (rows["start_ns"] < c1)
        th, s, k = rows["thread"][m].astype(np.int64), rows["start_ns"][m], rows["api_kind"][m]
    else:
        rt = ctx.trace.store.get("runtime")
        if rt is None or not len(rt):
            return []
        rows = rt.rows_starting_in(lo + 1, None if c1 >= POS else c1, ["start_ns", "thread", "api_kind"])
        th, s, k = rows["thread"].astype(np.int64), rows["start_ns"], rows["api_kind"]
    q_step = np.array([p[0] for p in pending], dtype=np.int64)
    q_thread = np.array([p[1] for p in pending], dtype=np.int64)
    q_time = np.array([p[2] for p in pending], dtype=np.int64)
    later, syncs = next_call_syncs(th, s, k == S.API_SYNC, q_thread, q_time)
    if c1 < POS:
        nxt.pending.extend(pending[i] for i in np.flatnonzero(~later).tolist())
    return q_step[later & syncs].tolist()


def next_call_syncs(thread: np.ndarray, start_ns: np.ndarray, is_sync: np.ndarray, q_thread: np.ndarray,
                    q_time: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each query (thread, time): whether the thread has a call starting strictly later among
    the rows, and whether one of its earliest such calls (all those starting at that instant) is
    a blocking sync. One sort of the rows and one binary search for all queries (a Python loop per
    query cost ~10 us each: seconds on a capture with a million scalar reads)."""
    n, q = len(start_ns), len(q_time)
    later, syncs = np.zeros(q, dtype=bool), np.zeros(q, dtype=bool)
    if n == 0 or q == 0:
        return later, syncs
    th, st, sy = iv.take(iv.sort_order(thread, start_ns), np.asarray(thread, dtype=np.int64),
                         np.asarray(start_ns, dtype=np.int64), np.asarray(is_sync, dtype=bool))
    # both sorted by (thread, start): pack into one axis where every thread has its own band
    uth, rank = np.unique(th, return_inverse=True)
    base = int(min(st.min(), q_time.min()))
    span = max(int(st.max()), int(q_time.max())) - base + 2
    if (len(uth) + 1).bit_length() + span.bit_length() > 62:  # too wide to pack: rare, per thread
        for i in range(q):
            m = th == q_thread[i]
            ts, ss = st[m], sy[m]
            j = int(np.searchsorted(ts, q_time[i], side="right"))
            if j < len(ts):
                later[i] = True
                syncs[i] = bool(ss[j:int(np.searchsorted(ts, ts[j], side="right"))].any())
        return later, syncs
    key = rank.astype(np.int64) * span + (st - base)
    qpos = np.searchsorted(uth, q_thread)
    known = (qpos < len(uth)) & (uth[np.minimum(qpos, len(uth) - 1)] == q_thread)
    qkey = qpos.astype(np.int64) * span + (q_time - base)
    j = np.searchsorted(key, qkey, side="right")  # first row after the query, in its band or later
    jc = np.minimum(j, n - 1)
    later = known & (j < n) & (rank[jc] == qpos)
    cs = np.concatenate(([0], np.cumsum(sy, dtype=np.int64)))
    j_end = np.searchsorted(key, key[jc], side="right")  # every row starting at that same instant
    syncs = later & (cs[j_end] - cs[jc] > 0)
    return later, syncs
