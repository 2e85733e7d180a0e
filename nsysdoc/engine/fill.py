"""Under-filled kernels in the slices (definitions: :mod:`nsysdoc.metrics.occupancy`): each slice
builds, for the kernels running in it, the idle-SM sweep of the devices where an under-filled
kernel runs, and adds to the window (per device: idle-SM time, time with an under-filled kernel
running, SM Active samples taken then; per kernel name and launch configuration: launches, time
and share of the idle-SM time) and to each step (idle-SM time on the step's device)."""
from __future__ import annotations

import numpy as np

from ..metrics.occupancy import FillSweep, LaunchTable, device_limits, launch_table, overlapping
from ..metrics.ops import KIND_KERNEL
from .data import FLAG_LOW_OCC, FLAG_UNDERFILLED, Ops, in_window


class FillContext:
    """Per device and launch code: SMs used, under-filled, low occupancy; and each device's SM
    Active samples (sorted), when the capture has GPU metrics."""

    def __init__(self, trace, ndev: int) -> None:
        dev = trace.devices
        keys = np.asarray(trace.derived.get("launch_keys", np.zeros(0, np.int64)), dtype=np.int64)
        self.est = np.asarray(trace.derived.get("launch_est_occupancy", np.full(len(keys), -1)), dtype=np.int64)
        col = lambda c: list(dev[c]) if c in dev else [None] * ndev  # noqa: E731
        limits = [device_limits(*args) for args in zip(
            col("sm_count"), col("compute_capability"), col("max_warps_per_sm"), col("max_blocks_per_sm"),
            col("regs_per_sm"), col("smem_per_sm"), col("smem_per_block_optin"))]
        self.limits = limits
        self.table: LaunchTable = launch_table(keys, limits)
        self.ncodes = len(keys)
        self.active = self.table.any_known and self.ncodes > 0
        #: per device and code, the flags its kernels get (one gather per slice); None when no
        #: configuration is under-filled or low-occupancy anywhere (the usual healthy capture)
        lut = (np.where(self.table.under, FLAG_UNDERFILLED, 0) | np.where(self.table.low_occupancy, FLAG_LOW_OCC, 0))
        self.flag_lut = lut.astype(np.int16) if self.active and lut.any() else None
        # SM Active samples per device index (GPU metrics name their device by its raw id)
        self.sm_active: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        gm = trace.gpu_metrics
        if self.active and len(gm):
            metric = np.asarray(gm["metric"])
            raw = np.asarray(dev["device_id"], dtype=np.int64) if len(dev) else np.zeros(0, np.int64)
            g_dev = np.asarray(gm["device_id"], dtype=np.int64)
            for d in range(ndev):
                if len(np.flatnonzero(raw == raw[d])) != 1:  # the same raw id on several hosts: ambiguous
                    continue
                m = np.flatnonzero((metric == "sm_active_pct") & (g_dev == raw[d]))
                if len(m):
                    ts = np.asarray(gm["timestamp_ns"], dtype=np.int64)[m]
                    order = np.argsort(ts, kind="stable")
                    self.sm_active[d] = (ts[order], np.asarray(gm["value"], dtype=np.float64)[m][order])

    def flags(self, ops: Ops, kernel: np.ndarray, tune: np.ndarray) -> np.ndarray:
        """FLAG_UNDERFILLED / FLAG_LOW_OCC of each operation (kernels that are not NCCL and not
        autotuning candidates)."""
        out = np.zeros(len(ops), dtype=np.int16)
        if self.flag_lut is None:
            return out
        k = np.flatnonzero(kernel & ~ops.is_nccl & ~tune & (ops.launch >= 0) & (ops.launch < self.ncodes))
        if len(k):
            out[k] = self.flag_lut[ops.device[k].astype(np.int64), ops.launch[k].astype(np.int64)]
        return out


def sweep(ctx, st) -> tuple[FillSweep, dict] | None:
    """The slice's idle-SM sweep (computed once per slice) and its under-filled or low-occupancy
    kernels, or None when no such kernel runs in it. The kernels that count are those running
    beside an under-filled one (owned, or still running from an earlier slice), their time
    clipped to the slice: the others change none of its integrals."""
    got = st.fill_cache.get("sweep", False)
    if got is not False:
        return got
    fc: FillContext = ctx.fill
    parts = [p for p in (st.carried, st.ops) if p is not None and len(p)]
    if not any(((p.flags & (FLAG_UNDERFILLED | FLAG_LOW_OCC)) != 0).any() for p in parts):
        st.fill_cache["sweep"] = None
        return None
    c0, c1 = st.c0, st.c1
    idxs = [np.flatnonzero((p.kind == KIND_KERNEL) & (p.end_ns > p.start_ns)) for p in parts]

    def get(field: str, sel=None) -> np.ndarray:
        got = [getattr(p, field)[i] for p, i in zip(parts, idxs)]
        v = np.concatenate(got) if len(got) > 1 else got[0]
        return v if sel is None else v[sel]

    flags, d = get("flags"), get("device").astype(np.int64)
    s0, e0 = get("start_ns"), get("end_ns")
    s, e = np.maximum(s0, c0), np.minimum(e0, c1)
    under = (flags & FLAG_UNDERFILLED) != 0
    near = under.copy()
    for dv in np.unique(d[under]).tolist():
        m = np.flatnonzero(d == dv)
        near[m] = overlapping(s[m], e[m], under[m])
    keep = np.flatnonzero(near)
    code = get("launch").astype(np.int64)
    known = (code >= 0) & (code < fc.ncodes)
    used = np.where(known, fc.table.used[d, np.where(known, code, 0)], fc.table.sm_count[d])
    sw = FillSweep(d[keep], s[keep], e[keep], used[keep], under[keep], fc.table.sm_count, near_only=False)
    f = np.flatnonzero((flags & (FLAG_UNDERFILLED | FLAG_LOW_OCC)) != 0)
    sel = {"device": d[f], "start": s[f], "end": e[f], "s0": s0[f], "e0": e0[f], "name": get("name_id", f),
           "launch": code[f], "under": under[f], "counted": get("owned", f)}
    got = (sw, sel)
    st.fill_cache["sweep"] = got
    return got


def window(ctx, st, win, w0: int, w1: int, a: int, b: int) -> None:
    """The slice's share of the window's under-filled totals, in ``[a, b)`` = the slice's part of
    the window ``[w0, w1)``."""
    got = sweep(ctx, st)
    if got is None:
        return
    sw, k = got
    ndev = ctx.ndev
    devs = np.arange(ndev)
    lo, hi = np.full(ndev, a, dtype=np.int64), np.full(ndev, b, dtype=np.int64)
    win.uf_idle += sw.recoverable_ns(devs, lo, hi)
    win.uf_wall += sw.wall_ns(devs, lo, hi).astype(np.int64)
    if k is not None and len(k["device"]):
        s, e = np.maximum(k["start"], a), np.minimum(k["end"], b)
        over = np.flatnonzero(e > s)
        if len(over):
            d = k["device"][over]
            rec = np.where(k["under"][over], sw.share_ns(d, s[over], e[over]), 0.0)
            counted = k["counted"][over] & in_window(k["s0"][over], k["e0"][over], w0, w1)
            name = ctx.name_code(k["name"][over]).astype(np.int64)
            key = (name * max(ctx.fill.ncodes, 1) + k["launch"][over]) * max(ndev, 1) + d
            top = int(key.max()) + 1
            if top <= max(1 << 22, 4 * len(key)):  # dense keys: one bincount each, no sort
                n, t, r = (np.bincount(key, weights=w, minlength=top) for w in (counted, (e - s)[over], rec))
                uk = np.flatnonzero(np.bincount(key, minlength=top))
                n, t, r = n[uk], t[uk], r[uk]
            else:
                uk, inv = np.unique(key, return_inverse=True)
                inv = inv.reshape(-1)
                n, t, r = (np.bincount(inv, weights=w, minlength=len(uk)) for w in (counted, (e - s)[over], rec))
            for j, kk in enumerate(uk.tolist()):
                acc = win.uf_groups.get(kk)
                if acc is None:
                    win.uf_groups[kk] = [int(n[j]), float(t[j]), float(r[j])]
                else:
                    acc[0] += int(n[j])
                    acc[1] += float(t[j])
                    acc[2] += float(r[j])
    for d, (ts, val) in ctx.fill.sm_active.items():
        i0, i1 = np.searchsorted(ts, [a, b], side="left")
        if i1 > i0:
            inside = sw.inside(d, ts[i0:i1])
            win.uf_smact[d] += float(val[i0:i1][inside].sum())
            win.uf_smact_n[d] += int(inside.sum())


def steps(ctx, st, tot, idx: np.ndarray, dev: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Idle-SM time of steps ``idx`` on their devices ``dev`` in ``[a, b)`` (their part in the slice)."""
    got = sweep(ctx, st)
    if got is None or not len(idx):
        return
    tot.step_uf[idx] += got[0].recoverable_ns(dev, a, b)


def decode_group(key: int, ncodes: int, ndev: int) -> tuple[int, int, int]:
    """(name code, launch code, device) of a :func:`window` group key."""
    ndev, ncodes = max(ndev, 1), max(ncodes, 1)
    d = key % ndev
    rest = key // ndev
    return rest // ncodes, rest % ncodes, d


__all__ = ["FillContext", "sweep", "window", "steps", "decode_group"]
