"""Kernels that cannot fill the GPU: SM fill from the grid size, theoretical occupancy from the
launch configuration, and the SM time left idle while such kernels run.

Definitions (``docs/glossary.md``, "Under-filled GPU"); no GPU metrics are needed:

* **SM fill** of a kernel on a GPU with ``S`` SMs: ``min(1, blocks / S)``, ``blocks`` being the
  grid size (gridX x gridY x gridZ). A block runs on one SM, so a grid of fewer blocks than SMs
  leaves ``S - blocks`` SMs with nothing of it to run.
* **Under-filled** kernel: fewer blocks than SMs. NCCL kernels are never under-filled: they use
  few blocks on purpose and wait on other GPUs (their SMs still count as in use).
* **Theoretical occupancy** (%): the CUDA occupancy calculator's resident warps per SM over the
  SM's maximum, from the block size, registers per thread and shared memory per block
  (:func:`theoretical_occupancy`). **Low occupancy**: fewer resident warps per SM than the SM
  has warp schedulers (:data:`MIN_RESIDENT_WARPS`), so at least one scheduler of every SM has no
  warp to issue from (below 6.25% on SMs of 64 warps, 8.3% on SMs of 48). Well-tuned GEMM and
  attention kernels run at 6-25% (large tiles, one or two blocks per SM): a higher threshold
  would mark them, and theoretical occupancy alone is not a cost (no impact is derived from it).
* **Idle SM time while under-filled kernels run** (the recoverable time): on each GPU, the time
  integral of ``max(0, S - sum of the running kernels' min(blocks, S)) / S`` over the moments when
  at least one under-filled kernel runs (every kernel running counts its SMs as used, so a kernel
  on another stream that fills the idle SMs leaves nothing to recover). For one kernel alone for
  ``d`` ns that is ``d * (1 - blocks / S)``. It assumes the work could be spread over every SM
  (more blocks, or independent kernels run concurrently): an upper bound on the gain.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace import schema as S

#: Warp schedulers per SM (compute capability 7.0 and newer): a kernel that cannot keep this many
#: warps resident on an SM leaves a scheduler with nothing to issue (low occupancy).
MIN_RESIDENT_WARPS = 4
WARP_SIZE = 32
#: The occupancy calculator's constants (``cuda_occupancy.h``) for compute capability 7.0 and
#: newer: registers are allocated per warp in units of 256, split over 4 sub-partitions; shared
#: memory in units of 128 bytes (256 before 7.0); at most 255 registers per thread.
REG_ALLOC_UNIT = 256
SUB_PARTITIONS = 4
MAX_REGS_PER_THREAD = 255
MAX_THREADS_PER_BLOCK = 1024
REGS_PER_BLOCK = 65536

#: Per compute capability, when the capture does not carry them: (max warps per SM, max blocks
#: per SM, 32-bit registers per SM, shared memory per SM in bytes, shared memory per block with
#: opt-in). From the CUDA C++ Programming Guide's "Technical Specifications per Compute
#: Capability"; the rows for 7.0, 7.5, 8.0, 8.6, 8.9, 9.0 and 12.0 equal what real exports and
#: PyTorch Profiler traces record for those GPUs (V100, TITAN RTX, A100, RTX 3080, RTX 4060,
#: H100/H200, RTX 5060 Ti).
CC_LIMITS: dict[tuple[int, int], tuple[int, int, int, int, int]] = {
    (7, 0): (64, 32, 65536, 98304, 98304),
    (7, 2): (64, 32, 65536, 98304, 98304),
    (7, 5): (32, 16, 65536, 65536, 65536),
    (8, 0): (64, 32, 65536, 167936, 166912),
    (8, 6): (48, 16, 65536, 102400, 101376),
    (8, 7): (48, 16, 65536, 167936, 166912),
    (8, 9): (48, 24, 65536, 102400, 101376),
    (9, 0): (64, 32, 65536, 233472, 232448),
    (10, 0): (64, 32, 65536, 233472, 232448),
    (12, 0): (48, 24, 65536, 102400, 101376),
}


def _pos_int(v) -> int | None:
    """``v`` as a positive int, or None (missing, NaN, zero, negative)."""
    try:
        if v is None or v != v:
            return None
        i = int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return i if i > 0 else None


@dataclass(frozen=True)
class DeviceLimits:
    """What the calculator needs of one GPU; None when unknown."""

    sm_count: int | None
    compute_capability: float | None = None
    max_warps_per_sm: int | None = None
    max_blocks_per_sm: int | None = None
    regs_per_sm: int | None = None
    smem_per_sm: int | None = None
    #: shared memory the driver reserves per block (1 KB from compute capability 8.0 on)
    reserved_smem_per_block: int = 0
    #: shared memory allocation granularity (bytes)
    smem_unit: int = 128

    @property
    def occupancy_known(self) -> bool:
        return None not in (self.max_warps_per_sm, self.max_blocks_per_sm, self.regs_per_sm, self.smem_per_sm)


def device_limits(sm_count, compute_capability=None, max_warps_per_sm=None, max_blocks_per_sm=None,
                  regs_per_sm=None, smem_per_sm=None, smem_per_block_optin=None) -> DeviceLimits:
    """A GPU's limits from what the capture records, the rest from its compute capability
    (:data:`CC_LIMITS`); a value the capture records wins."""
    cc = None
    try:
        if compute_capability is not None and compute_capability == compute_capability:
            cc = float(compute_capability)
    except (TypeError, ValueError):
        cc = None
    table = None
    if cc is not None and cc > 0:
        major = int(cc)
        minor = int(round((cc - major) * 10))
        table = CC_LIMITS.get((major, minor))
    given = [_pos_int(v) for v in (max_warps_per_sm, max_blocks_per_sm, regs_per_sm, smem_per_sm,
                                   smem_per_block_optin)]
    vals = [g if g is not None else (table[i] if table else None) for i, g in enumerate(given)]
    warps, blocks, regs, smem, optin = vals
    # the driver's reserve per block is what a block may not use of an SM's shared memory
    if smem is not None and optin is not None and 0 <= smem - optin <= 4096:
        reserved = smem - optin
    else:
        reserved = 1024 if cc is not None and cc >= 8.0 else 0
    return DeviceLimits(sm_count=_pos_int(sm_count), compute_capability=cc, max_warps_per_sm=warps,
                        max_blocks_per_sm=blocks, regs_per_sm=regs, smem_per_sm=smem,
                        reserved_smem_per_block=reserved,
                        smem_unit=256 if cc is not None and cc < 7.0 else 128)


def sm_fill(blocks, sm_count) -> np.ndarray:
    """``min(1, blocks / sm_count)`` (NaN when either is unknown, i.e. not positive)."""
    b = np.asarray(blocks, dtype=np.float64)
    s = np.asarray(sm_count, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((b > 0) & (s > 0), np.minimum(1.0, b / np.where(s > 0, s, 1.0)), np.nan)


def _round_up(x: np.ndarray, unit: int) -> np.ndarray:
    return (x + unit - 1) // unit * unit


def blocks_per_sm(threads, regs, smem, lim: DeviceLimits) -> np.ndarray:
    """Resident blocks per SM (``cudaOccupancyMaxActiveBlocksPerMultiprocessor`` with the default
    shared-memory carve-out: the SM's whole shared memory), -1 when a field or limit is unknown.

    The smallest of: warp slots (max warps per SM // warps per block), registers (per warp, rounded
    up to 256, per sub-partition of the register file), shared memory (per block plus the driver's
    reserve, rounded up to the allocation unit) and the maximum blocks per SM. A block that cannot
    launch at all (over 1,024 threads, 255 registers per thread or 64 K registers per block) gets 0."""
    t = np.asarray(threads, dtype=np.int64)
    r = np.asarray(regs, dtype=np.int64)
    m = np.asarray(smem, dtype=np.int64)
    unknown = (t <= 0) | (r < 0) | (m < 0)
    if not lim.occupancy_known:
        return np.full(np.broadcast(t, r, m).shape, -1, dtype=np.int64)
    big = np.int64(1 << 30)
    warps = (np.maximum(t, 1) + WARP_SIZE - 1) // WARP_SIZE
    by_warps = lim.max_warps_per_sm // warps
    regs_warp = _round_up(np.maximum(r, 0) * WARP_SIZE, REG_ALLOC_UNIT)
    per_part = (lim.regs_per_sm // SUB_PARTITIONS) // np.maximum(regs_warp, 1)
    by_regs = np.where(regs_warp > 0, per_part * SUB_PARTITIONS // warps, big)
    cannot = (t > MAX_THREADS_PER_BLOCK) | (r > MAX_REGS_PER_THREAD) \
        | (regs_warp * _round_up(warps, SUB_PARTITIONS) > REGS_PER_BLOCK)
    alloc = _round_up(np.maximum(m, 0) + lim.reserved_smem_per_block, lim.smem_unit)
    by_smem = np.where(alloc > 0, lim.smem_per_sm // np.maximum(alloc, 1), big)
    out = np.minimum(np.minimum(by_warps, by_regs), np.minimum(by_smem, lim.max_blocks_per_sm))
    out = np.where(cannot, 0, out)
    return np.where(unknown, -1, out).astype(np.int64)


def theoretical_occupancy(threads, regs, smem, lim: DeviceLimits) -> np.ndarray:
    """Theoretical occupancy (%): resident blocks per SM x warps per block / max warps per SM x 100
    (NaN when unknown)."""
    b = blocks_per_sm(threads, regs, smem, lim)
    t = np.asarray(threads, dtype=np.int64)
    if not lim.occupancy_known:
        return np.full(b.shape, np.nan)
    warps = (np.maximum(t, 1) + WARP_SIZE - 1) // WARP_SIZE
    return np.where(b >= 0, b * warps / lim.max_warps_per_sm * 100.0, np.nan)


@dataclass
class LaunchTable:
    """Per device and launch code (``trace.derived["launch_keys"]``): SMs a kernel of that
    configuration uses there, whether it is under-filled, its theoretical occupancy."""

    sm_count: np.ndarray       # per device, 0 when unknown
    used: np.ndarray           # (device, code): min(blocks, S), S when the grid is unknown
    under: np.ndarray          # (device, code): blocks known and < S
    occupancy_pct: np.ndarray  # (device, code): NaN when unknown
    low_occupancy: np.ndarray  # (device, code): fewer resident warps per SM than MIN_RESIDENT_WARPS
    fields: dict               # unpacked keys: blocks, threads, regs, smem (-1 unknown)

    @property
    def any_known(self) -> bool:
        return bool((self.sm_count > 0).any())


def launch_table(keys: np.ndarray, limits: list[DeviceLimits]) -> LaunchTable:
    f = S.unpack_launch(np.asarray(keys, dtype=np.int64))
    n = len(limits)
    k = len(f["blocks"])
    sm = np.array([lim.sm_count or 0 for lim in limits], dtype=np.int64)
    used = np.zeros((n, k), dtype=np.int64)
    under = np.zeros((n, k), dtype=bool)
    occ = np.full((n, k), np.nan)
    low = np.zeros((n, k), dtype=bool)
    warps = (np.maximum(f["threads"], 1) + WARP_SIZE - 1) // WARP_SIZE
    for d, lim in enumerate(limits):
        s = int(sm[d])
        if s > 0:
            used[d] = np.where(f["blocks"] > 0, np.minimum(f["blocks"], s), s)
            under[d] = (f["blocks"] > 0) & (f["blocks"] < s)
        b = blocks_per_sm(f["threads"], f["regs"], f["smem"], lim)
        occ[d] = theoretical_occupancy(f["threads"], f["regs"], f["smem"], lim)
        low[d] = (b > 0) & (b * warps < MIN_RESIDENT_WARPS)
    return LaunchTable(sm, used, under, occ, low, f)


# ---------------------------------------------------------------------------------------------
# idle SMs while under-filled kernels run
# ---------------------------------------------------------------------------------------------
@dataclass
class _Steps:
    """One device's piecewise-constant state: breakpoints ``t``, and per segment ``[t[i], t[i+1])``
    the idle SMs (``idle``, counted only while an under-filled kernel runs), whether one runs
    (``on``) and the idle SMs per running under-filled kernel (``share``); cumulative integrals
    at each breakpoint."""

    sm: int
    t: np.ndarray
    idle: np.ndarray
    on: np.ndarray
    share: np.ndarray
    cum_idle: np.ndarray
    cum_on: np.ndarray
    cum_share: np.ndarray

    def at(self, cum: np.ndarray, rate: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The integral from the first breakpoint to ``x`` of a rate (piecewise constant)."""
        x = np.asarray(x, dtype=np.int64)
        i = np.searchsorted(self.t, x, side="right") - 1
        inside = (i >= 0) & (i < len(rate))
        ic = np.clip(i, 0, max(len(rate) - 1, 0))
        part = np.where(inside, rate[ic] * (x - self.t[np.clip(i, 0, len(self.t) - 1)]) if len(rate) else 0, 0)
        base = np.where(i < 0, 0, cum[np.clip(i, 0, len(cum) - 1)])
        return base + part


class FillSweep:
    """Idle-SM time of a set of kernels per device (see the module docstring), answering integrals
    over any range: built once per slice from the kernels running in it (times clipped to it)."""

    def __init__(self, device, start, end, used, under, sm_count, near_only: bool = True) -> None:
        """``near_only``: keep only the kernels that overlap an under-filled one (the others change
        no integral); False when the caller has done so."""
        self.by_dev: dict[int, _Steps] = {}
        device = np.asarray(device, dtype=np.int64)
        for d in np.unique(device).tolist():
            sm = int(sm_count[d])
            m = np.flatnonzero(device == d)
            s, e = np.asarray(start, dtype=np.int64)[m], np.asarray(end, dtype=np.int64)[m]
            ok = e > s
            if sm <= 0 or not ok.any():
                continue
            s, e, u, k = s[ok], e[ok], np.asarray(used, dtype=np.int64)[m][ok], np.asarray(under, dtype=bool)[m][ok]
            if not k.any():
                continue
            if near_only and k.mean() < 0.5:  # only kernels beside an under-filled one change its integrals
                near = overlapping(s, e, k)
                s, e, u, k = s[near], e[near], u[near], k[near]
            self.by_dev[d] = _build(s, e, u, k.astype(np.int64), sm)

    def _each(self, dev, lo, hi, what: str) -> np.ndarray:
        dev = np.asarray(dev, dtype=np.int64)
        lo = np.broadcast_to(np.asarray(lo, dtype=np.int64), dev.shape)
        hi = np.broadcast_to(np.asarray(hi, dtype=np.int64), dev.shape)
        out = np.zeros(dev.shape, dtype=np.float64)
        for d, st in self.by_dev.items():
            m = np.flatnonzero(dev == d)
            if not len(m):
                continue
            a, b = lo[m], np.maximum(hi[m], lo[m])
            cum, rate = {"idle": (st.cum_idle, st.idle), "on": (st.cum_on, st.on),
                         "share": (st.cum_share, st.share)}[what]
            v = st.at(cum, rate, b) - st.at(cum, rate, a)
            out[m] = v / st.sm if what != "on" else v
        return out

    def recoverable_ns(self, dev, lo, hi) -> np.ndarray:
        """Idle-SM time in ``[lo, hi)`` per query (ns of the whole GPU: idle SMs x time / SMs)."""
        return self._each(dev, lo, hi, "idle")

    def wall_ns(self, dev, lo, hi) -> np.ndarray:
        """Time in ``[lo, hi)`` during which at least one under-filled kernel runs."""
        return self._each(dev, lo, hi, "on")

    def share_ns(self, dev, lo, hi) -> np.ndarray:
        """A running under-filled kernel's share of the recoverable time in ``[lo, hi)`` (its
        start and end): at each moment the idle SMs are split evenly between the under-filled
        kernels running, so the shares of all of them add up to :meth:`recoverable_ns`."""
        return self._each(dev, lo, hi, "share")

    def inside(self, dev: int, ts: np.ndarray) -> np.ndarray:
        """Whether an under-filled kernel runs at each time ``ts`` on device ``dev``."""
        st = self.by_dev.get(int(dev))
        ts = np.asarray(ts, dtype=np.int64)
        if st is None or not len(st.on):
            return np.zeros(len(ts), dtype=bool)
        i = np.searchsorted(st.t, ts, side="right") - 1
        ok = (i >= 0) & (i < len(st.on))
        return ok & (st.on[np.clip(i, 0, len(st.on) - 1)] > 0)


def overlapping(s: np.ndarray, e: np.ndarray, under: np.ndarray) -> np.ndarray:
    """Which intervals ``[s, e)`` overlap the union of the ``under`` ones (those included)."""
    us, ue = s[under], e[under]
    order = np.argsort(us, kind="stable")
    us, ue = us[order], ue[order]
    run = np.maximum.accumulate(ue)
    first = np.flatnonzero(np.concatenate(([True], us[1:] > run[:-1])))   # a new union piece starts
    starts, ends = us[first], run[np.append(first[1:], len(us)) - 1]
    i = np.searchsorted(ends, s, side="right")        # the first piece ending after s
    return (i < len(ends)) & (starts[np.minimum(i, len(ends) - 1)] < e)


#: events are sorted as one int64 value: time, then whether it is an end, under-filled, SMs used
_SM_BITS = 11


def _build(s: np.ndarray, e: np.ndarray, used: np.ndarray, under: np.ndarray, sm: int) -> _Steps:
    t0 = int(s.min())
    if sm < (1 << _SM_BITS) and int(e.max()) - t0 < (1 << (62 - _SM_BITS - 2)):
        # one value sort (an argsort and three gathers cost several times more)
        ev = np.concatenate([((s - t0) << (_SM_BITS + 2)) | (under << (_SM_BITS + 1)) | used,
                             ((e - t0) << (_SM_BITS + 2)) | (1 << _SM_BITS) | (under << (_SM_BITS + 1)) | used])
        ev.sort()
        t = (ev >> (_SM_BITS + 2)) + t0
        end = ((ev >> _SM_BITS) & 1).astype(bool)
        u = ev & ((1 << _SM_BITS) - 1)
        k = (ev >> (_SM_BITS + 1)) & 1
        du, dk = np.where(end, -u, u), np.where(end, -k, k)
        del ev, end, u, k
    else:
        t = np.concatenate([s, e])
        du = np.concatenate([used, -used])
        dk = np.concatenate([under, -under])
        order = np.argsort(t, kind="stable")
        t, du, dk = t[order], du[order], dk[order]
    level, count = np.cumsum(du), np.cumsum(dk)
    last = np.flatnonzero(np.concatenate((t[1:] != t[:-1], [True])))  # state after every event at t
    bt, lv, ct = t[last], level[last], count[last]
    seg = np.diff(bt)
    lv, ct = lv[:-1], ct[:-1]
    on = (ct > 0).astype(np.int64)
    idle = np.where(ct > 0, np.maximum(sm - lv, 0), 0).astype(np.int64)
    share = np.where(ct > 0, idle / np.maximum(ct, 1), 0.0)
    cum = lambda rate: np.concatenate(([0], np.cumsum(rate * seg)))  # noqa: E731
    return _Steps(sm, bt, idle, on, share, cum(idle), cum(on), cum(share))


__all__ = ["MIN_RESIDENT_WARPS", "CC_LIMITS", "DeviceLimits", "device_limits", "sm_fill", "blocks_per_sm",
           "theoretical_occupancy", "LaunchTable", "launch_table", "FillSweep", "overlapping"]
