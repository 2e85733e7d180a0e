"""Interval arithmetic on numpy arrays, grouped by an integer key (a device, a thread ...).

All functions are pure and vectorised: millions of intervals are handled with a few sorts and
prefix sums, never Python loops over rows. Intervals are half-open ``[start, end)`` in integer
nanoseconds; empty intervals (``end <= start``) contribute nothing.

Trick used throughout: key ``k``'s times are shifted by ``k * stride`` (``stride`` larger than the
whole time span), so every key lives in its own stretch of one sorted axis and a single
``searchsorted`` answers per-key queries.
"""
from __future__ import annotations

import numpy as np

_EMPTY = np.zeros(0, dtype=np.int64)


def sort_order(keys: np.ndarray, starts: np.ndarray) -> np.ndarray | None:
    """Stable order by (key, start); ``None`` when the input is already in that order.

    Uses one int64 composite key when (key, time span) fit in 62 bits, and a stable sort, which
    is close to linear on the nearly-sorted data nsys writes (buffer flushes in time order).
    """
    keys = np.asarray(keys, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    if len(keys) < 2:
        return None
    kmin, kmax = int(keys.min()), int(keys.max())
    tmin, tmax = int(starts.min()), int(starts.max())
    span_bits = max(1, (tmax - tmin + 1).bit_length())
    key_bits = max(1, (kmax - kmin + 1).bit_length())
    if span_bits + key_bits <= 62:
        comp = ((keys - kmin) << span_bits) | (starts - tmin)
        if np.all(comp[1:] >= comp[:-1]):
            return None
        return np.argsort(comp, kind="stable")
    return np.lexsort((starts, keys))


def take(order: np.ndarray | None, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """Apply an order from :func:`sort_order` (``None`` = keep as is)."""
    if order is None:
        return arrays
    return tuple(a[order] for a in arrays)


class Union:
    """Disjoint, sorted intervals per key (build with :func:`union`).

    Stored shifted (key ``k`` moved by ``k * span``) so that one sorted axis answers per-key
    queries; raw ``starts``/``ends`` are derived on demand.
    """

    def __init__(self, keys: np.ndarray, starts: np.ndarray, ends: np.ndarray, tmin: int, span: int) -> None:
        self.keys = keys
        self.tmin = tmin
        self.span = span
        shift = keys.astype(np.int64) * span - tmin
        self._s = starts + shift
        self._e = ends + shift
        del shift
        self._cum = np.empty(len(starts) + 1, dtype=np.int64)
        self._cum[0] = 0
        np.cumsum(self._e - self._s, out=self._cum[1:])

    @classmethod
    def from_shifted(cls, keys: np.ndarray, s_shifted: np.ndarray, e_shifted: np.ndarray, tmin: int,
                     span: int) -> "Union":
        u = cls.__new__(cls)
        u.keys, u.tmin, u.span, u._s, u._e = keys, tmin, span, s_shifted, e_shifted
        u._cum = np.empty(len(s_shifted) + 1, dtype=np.int64)
        u._cum[0] = 0
        np.cumsum(e_shifted - s_shifted, out=u._cum[1:])
        return u

    @property
    def starts(self) -> np.ndarray:
        return self._s - (self.keys.astype(np.int64) * self.span - self.tmin)

    @property
    def ends(self) -> np.ndarray:
        return self._e - (self.keys.astype(np.int64) * self.span - self.tmin)

    def __len__(self) -> int:
        return len(self._s)

    @property
    def lengths(self) -> np.ndarray:
        return self._e - self._s

    def total_by_key(self, nkeys: int) -> np.ndarray:
        """Sum of union lengths per key ``0..nkeys-1``."""
        if len(self.keys) == 0:
            return np.zeros(nkeys, dtype=np.int64)
        return np.bincount(self.keys, weights=self.lengths, minlength=nkeys)[:nkeys].astype(np.int64)

    def _before(self, shifted_t: np.ndarray) -> np.ndarray:
        p = np.searchsorted(self._s, shifted_t, side="left")  # intervals starting before t
        over = np.where(p > 0, np.maximum(self._e[np.maximum(p - 1, 0)] - shifted_t, 0), 0)
        return self._cum[p] - over

    def _shift(self, keys, t) -> np.ndarray:
        t = np.clip(np.asarray(t, dtype=np.int64), self.tmin, self.tmin + self.span - 1)
        return t + np.asarray(keys, dtype=np.int64) * self.span - self.tmin

    def covered(self, keys, lo, hi) -> np.ndarray:
        """Length of ``[lo, hi)`` covered by key ``keys``'s union (element-wise, vectorised)."""
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.maximum(np.asarray(hi, dtype=np.int64), lo)
        if len(self._s) == 0:
            return np.zeros(np.broadcast(keys, lo, hi).shape, dtype=np.int64)
        return self._before(self._shift(keys, hi)) - self._before(self._shift(keys, lo))

    def interval_near(self, keys, t, tol: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per query, the union interval of ``keys`` that covers any instant of ``[t - tol, t + tol]``
        (the latest one starting by ``t + tol``): ``(found, start, end)`` — times may be negative, so
        ``found`` says which queries have one (start and end are 0 where not)."""
        t = np.asarray(t, dtype=np.int64)
        keys = np.asarray(keys, dtype=np.int64)
        if len(self._s) == 0 or t.size == 0:
            return np.zeros(t.shape, dtype=bool), np.zeros(t.shape, np.int64), np.zeros(t.shape, np.int64)
        p = np.searchsorted(self._s, self._shift(keys, t + tol), side="right") - 1
        pc = np.maximum(p, 0)
        back = keys * self.span - self.tmin
        rs, re_ = self._s[pc] - back, self._e[pc] - back
        hit = (p >= 0) & (self.keys[pc] == keys) & (rs <= t + tol) & (re_ >= t - tol)
        return hit, np.where(hit, rs, 0), np.where(hit, re_, 0)

    def overlaps_any(self, keys, lo, hi) -> np.ndarray:
        """Whether ``[lo, hi)`` shares any time with key ``keys``'s union: ``covered(...) > 0``
        with one binary search instead of two (the first union interval ending after ``lo`` must
        start before ``hi``; intervals of other keys lie in other bands of the shifted axis)."""
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.asarray(hi, dtype=np.int64)
        n = len(self._s)
        if n == 0:
            return np.zeros(np.broadcast(keys, lo, hi).shape, dtype=bool)
        a = self._shift(keys, lo)
        b = self._shift(keys, hi)
        p = np.searchsorted(self._e, a, side="right")
        return (b > a) & (p < n) & (self._s[np.minimum(p, n - 1)] < b)

    def contains(self, keys, t) -> np.ndarray:
        """Whether time ``t`` lies inside key ``keys``'s union."""
        t = np.asarray(t, dtype=np.int64)
        return self.overlaps_any(keys, t, t + 1)


def union(keys, starts, ends, *, lo=None, hi=None, presorted: bool = False) -> Union:
    """Merge intervals per key into disjoint sorted intervals, optionally clipped to ``[lo, hi)``.

    ``lo``/``hi`` may be scalars or per-interval arrays. Touching intervals merge. The input
    order does not matter (``presorted`` is accepted for callers that know it, and ignored by
    the event-sort path).

    Method: starts and ends become events on one axis (key ``k`` shifted by ``k * span``), tagged
    in the lowest bit so that at equal times a start sorts before an end; one value sort (no
    argsort, which is an order of magnitude slower in numpy) and a running count of open
    intervals give the union: it opens where the count goes 0 -> 1 and closes where it goes to 0.
    """
    keys = np.asarray(keys, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    if len(starts) == 0:
        return Union(_EMPTY, _EMPTY, _EMPTY, 0, 1)
    if lo is not None and (np.ndim(lo) or starts.min() < lo):
        starts = np.maximum(starts, lo)
    if hi is not None and (np.ndim(hi) or ends.max() > hi):
        ends = np.minimum(ends, hi)
    keep = ends > starts
    if not keep.all():
        keys, starts, ends = keys[keep], starts[keep], ends[keep]
    if len(keys) == 0:
        return Union(_EMPTY, _EMPTY, _EMPTY, 0, 1)
    tmin = int(starts.min())
    span = int(ends.max()) - tmin + 1
    kmin, kmax = int(keys.min()), int(keys.max())
    if _in_key_start_order(keys, starts):
        # already ordered by (key, start), as GPU operations are: a running maximum of the ends
        # gives the union in one pass, with no sort at all
        return _union_of_ordered(keys, starts, ends, tmin, kmin, span)
    if kmin >= 0 and (kmax + 1).bit_length() + span.bit_length() <= 61:
        n = len(keys)
        ev = np.empty(2 * n, dtype=np.int64)
        shift = keys * span - tmin
        np.add(starts, shift, out=ev[:n])
        np.add(ends, shift, out=ev[n:])
        del shift
        ev <<= 1
        ev[n:] |= 1                      # tag: 0 = start, 1 = end (a start sorts first on ties)
        # kind="stable" (timsort on int64) exploits the two nearly sorted runs (starts, then
        # ends): 5-20x faster than the default introsort on GPU rows in time order
        ev.sort(kind="stable")
        step = 1 - 2 * (ev & 1).astype(np.int32)  # +1 start, -1 end
        open_after = np.cumsum(step, dtype=np.int32)
        del step
        is_end_tag = (ev & 1).astype(bool)
        opens = np.flatnonzero(~is_end_tag & (open_after == 1))
        closes = np.flatnonzero(is_end_tag & (open_after == 0))
        del open_after, is_end_tag
        s_sh = ev[opens] >> 1
        e_sh = ev[closes] >> 1
        del ev
        ukeys = s_sh // span
        return Union.from_shifted(ukeys, s_sh, e_sh, tmin, span)
    # ids or times too wide to pack: sort with a permutation and a segmented running max
    k, s, e = take(sort_order(keys, starts), keys, starts, ends)
    return _union_of_ordered(k, s, e, tmin, kmin, span)


def merge_few(u: Union, keys, starts, ends, *, lo: int | None = None, hi: int | None = None) -> Union:
    """``union(u's pieces + the intervals (keys, starts, ends), lo=lo, hi=hi)`` (scalar bounds) for a
    few intervals, without rebuilding ``u``: the pieces a new interval overlaps or touches are
    found by binary search in its key's band and merged with it, the clipping cuts each key's
    first and last pieces, and every untouched run of pieces is copied, moved to the new origin
    and span (issue 50: a slice's union joined with the few operations carried from the previous
    slice). The same pieces, ``tmin`` and ``span`` as :func:`union` gives."""
    add = union(keys, starts, ends, lo=lo, hi=hi)  # the new intervals, clipped, merged among themselves
    n = len(u)
    if n == 0:
        return add
    if not len(add):
        add = None
    a_k = add.keys.tolist() if add is not None else []
    a_s = add.starts.tolist() if add is not None else []
    a_e = add.ends.tolist() if add is not None else []
    ukeys, us, ue, span0, tmin0 = u.keys, u._s, u._e, u.span, u.tmin
    # each key of u: its band [a, b) (keys are sorted, and few)
    bands = {}
    a = 0
    while a < n:
        k = int(ukeys[a])
        b = int(np.searchsorted(ukeys, k, side="right"))
        bands[k] = (a, b)
        a = b
    plan = []  # per key: (key, old offset, [("run", i, j) | ("new", s, e)], first start, last end)
    j_add = 0
    for k in sorted(set(bands) | set(a_k)):
        a, b = bands.get(k, (0, 0))
        off = k * span0 - tmin0
        if b > a:
            # pieces kept by the clipping: those ending after lo and starting before hi
            i0 = a if lo is None else a + int(np.searchsorted(ue[a:b], lo + off, side="right"))
            i1 = b if hi is None else a + int(np.searchsorted(us[a:b], hi + off, side="left"))
        else:
            i0 = i1 = 0
        segs = []
        cur = i0
        while j_add < len(a_k) and a_k[j_add] == k:
            x0, x1 = a_s[j_add], a_e[j_add]
            j_add += 1
            if i1 > i0:
                # the kept pieces it overlaps or touches: ending at or after x0, starting by x1
                j0 = i0 + int(np.searchsorted(ue[i0:i1], x0 + off, side="left"))
                j1 = i0 + int(np.searchsorted(us[i0:i1], x1 + off, side="right"))
            else:
                j0 = j1 = i0
            if j1 > j0:
                ps = int(us[j0]) - off
                pe = int(ue[j1 - 1]) - off
                x0 = min(x0, ps if lo is None else max(ps, lo))
                x1 = max(x1, pe if hi is None else min(pe, hi))
            if segs and segs[-1][0] == "new" and j0 < segs[-1][4]:  # a piece both touch: one piece
                _, p0, p1, pj0, pj1 = segs.pop()
                x0, x1, j0, j1 = min(p0, x0), max(p1, x1), pj0, max(pj1, j1)
            if j0 > cur:
                segs.append(("run", cur, j0))
            segs.append(("new", x0, x1, j0, j1))
            cur = max(cur, j1)
        if i1 > cur:
            segs.append(("run", cur, i1))
        if not segs:
            continue
        first = segs[0][1] if segs[0][0] == "new" else int(us[segs[0][1]]) - off
        last = segs[-1][2] if segs[-1][0] == "new" else int(ue[segs[-1][2] - 1]) - off
        if lo is not None:
            first = max(first, lo)
        if hi is not None:
            last = min(last, hi)
        plan.append((k, off, segs, first, last))
    if not plan:
        return union([], [], [])
    tmin = min(p[3] for p in plan)
    span = max(p[4] for p in plan) - tmin + 1
    ks, ss, es, fix = [], [], [], []
    pos = 0
    for k, off, segs, first, last in plan:
        new_off = k * span - tmin
        d = new_off - off
        start_pos = pos
        for sg in segs:
            if sg[0] == "run":
                ss.append(us[sg[1]:sg[2]] + d)
                es.append(ue[sg[1]:sg[2]] + d)
                m = sg[2] - sg[1]
            else:
                ss.append(np.array([sg[1] + new_off], dtype=np.int64))
                es.append(np.array([sg[2] + new_off], dtype=np.int64))
                m = 1
            pos += m
        ks.append((k, pos - start_pos))
        fix.append((start_pos, first + new_off, pos - 1, last + new_off))
    s_sh = np.concatenate(ss)
    e_sh = np.concatenate(es)
    for p0, v0, p1, v1 in fix:  # each key's first and last piece, as clipped
        s_sh[p0] = v0
        e_sh[p1] = v1
    keys_out = np.repeat(np.array([k for k, _ in ks], dtype=np.int64), [m for _, m in ks])
    return Union.from_shifted(keys_out, s_sh, e_sh, tmin, span)


def _in_key_start_order(keys: np.ndarray, starts: np.ndarray) -> bool:
    """Whether rows are ordered by key, then start (one vectorised pass, no sort)."""
    if len(keys) < 2:
        return True
    dk = keys[1:] - keys[:-1] if keys.dtype.kind == "i" else np.diff(keys)
    if (dk < 0).any():
        return False
    same = dk == 0
    return not (same & (starts[1:] < starts[:-1])).any()


def _union_of_ordered(k: np.ndarray, s: np.ndarray, e: np.ndarray, tmin: int, kmin: int, span: int) -> Union:
    """Union of intervals ordered by (key, start): a segmented running maximum of the ends; an
    interval starts a new piece when it starts after every earlier end of its key (touching
    intervals merge)."""
    new_key = np.concatenate(([True], k[1:] != k[:-1]))
    if (int(k[-1]) - kmin + 1).bit_length() + span.bit_length() <= 62:
        run_max = np.maximum.accumulate((e - tmin) + (k - kmin) * span) - (k - kmin) * span + tmin
    else:  # shifting keys apart would overflow int64: one running maximum per key
        run_max = np.empty_like(e)
        bounds = np.append(np.flatnonzero(new_key), len(k))
        for a, b in zip(bounds[:-1], bounds[1:]):
            run_max[a:b] = np.maximum.accumulate(e[a:b])
    is_start = new_key.copy()
    is_start[1:] |= s[1:] > run_max[:-1]
    idx = np.flatnonzero(is_start)
    last = np.concatenate((idx[1:] - 1, [len(s) - 1]))
    return Union(k[idx], s[idx], run_max[last], tmin, span)


def intersection_length(a: Union, b: Union, nkeys: int) -> np.ndarray:
    """Per key, the length of (union a) ∩ (union b)."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros(nkeys, dtype=np.int64)
    cov = b.covered(a.keys, a.starts, a.ends)
    return np.bincount(a.keys, weights=cov, minlength=nkeys)[:nkeys].astype(np.int64)


def gaps(u: Union, nkeys: int, lo=None, hi=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaps per key between union intervals, plus leading/trailing gaps to ``[lo[k], hi[k])``.

    With ``lo``/``hi`` (arrays of length ``nkeys``) a key with no interval has one gap covering
    its whole window. Returns ``(keys, gap_start, gap_end)`` sorted by key then time, non-empty.
    """
    if lo is not None and hi is not None and nkeys > 0 and len(u) and int(u.keys[0]) >= 0 \
            and int(u.keys[-1]) < nkeys:
        return _gaps_by_key(u, nkeys, lo, hi)
    k, s, e = u.keys, u.starts, u.ends
    pk, ps, pe = [], [], []
    if len(k):
        same = k[1:] == k[:-1]
        pk.append(k[1:][same]); ps.append(e[:-1][same]); pe.append(s[1:][same])
    if lo is not None and hi is not None:
        lo = np.broadcast_to(np.asarray(lo, dtype=np.int64), (nkeys,))
        hi = np.broadcast_to(np.asarray(hi, dtype=np.int64), (nkeys,))
        allk = np.arange(nkeys, dtype=np.int64)
        fi = np.searchsorted(k, allk, side="left")
        li = np.searchsorted(k, allk, side="right") - 1
        has = li >= fi
        first_s = np.where(has, s[np.clip(fi, 0, max(len(s) - 1, 0))] if len(s) else 0, hi)
        last_e = np.where(has, e[np.clip(li, 0, max(len(e) - 1, 0))] if len(e) else 0, hi)
        pk.append(allk); ps.append(lo); pe.append(np.minimum(first_s, hi))
        pk.append(allk[has]); ps.append(np.maximum(last_e[has], lo[has])); pe.append(hi[has])
    if not pk:
        return _EMPTY, _EMPTY, _EMPTY
    if lo is not None and hi is not None:
        for i in range(len(pk)):
            ps[i] = np.maximum(ps[i], lo[pk[i]]); pe[i] = np.minimum(pe[i], hi[pk[i]])
    for i in range(len(pk)):
        keep = pe[i] > ps[i]
        pk[i], ps[i], pe[i] = pk[i][keep], ps[i][keep], pe[i][keep]
    if len(pk) == 3 and (not len(k) or (int(k[0]) >= 0 and int(k[-1]) < nkeys)):
        return _by_key(nkeys, pk, ps, pe)
    gk = np.concatenate(pk); gs = np.concatenate(ps); ge = np.concatenate(pe)
    return take(sort_order(gk, gs), gk, gs, ge)


def _gaps_by_key(u: Union, nkeys: int, lo, hi) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`gaps` with bounds, key by key (keys are few): the leading gap, the gaps between the
    key's pieces (one slice of the union's arrays, clipped only when the bounds cut the key's
    pieces), the
    trailing gap; the parts are concatenated in (key, start) order, with no mask, scatter or sort
    over the union's pieces (issue 50: one piece per kernel on a GPU-bound capture)."""
    lo = np.broadcast_to(np.asarray(lo, dtype=np.int64), (nkeys,)).tolist()
    hi = np.broadcast_to(np.asarray(hi, dtype=np.int64), (nkeys,)).tolist()
    keys = u.keys
    bounds = np.searchsorted(keys, np.arange(nkeys + 1, dtype=np.int64), side="left").tolist()
    s_sh, e_sh = u._s, u._e
    pk, ps, pe = [], [], []

    def one(key, a, b):
        pk.append(np.array([key], dtype=np.int64)); ps.append(np.array([a], dtype=np.int64))
        pe.append(np.array([b], dtype=np.int64))

    for key in range(nkeys):
        a, b = bounds[key], bounds[key + 1]
        k_lo, k_hi = lo[key], hi[key]
        if b <= a:
            if k_hi > k_lo:
                one(key, k_lo, k_hi)
            continue
        off = key * u.span - u.tmin
        first_s, last_e = int(s_sh[a]) - off, int(e_sh[b - 1]) - off
        if min(first_s, k_hi) > k_lo:  # leading
            one(key, k_lo, min(first_s, k_hi))
        if b - a > 1:
            gs = e_sh[a:b - 1] - off
            ge = s_sh[a + 1:b] - off
            if not (k_lo <= first_s and k_hi >= last_e):
                gs = np.maximum(gs, k_lo)
                ge = np.minimum(ge, k_hi)
            keep = ge > gs
            if not keep.all():
                gs, ge = gs[keep], ge[keep]
            pk.append(np.full(len(gs), key, dtype=np.int64)); ps.append(gs); pe.append(ge)
        if k_hi > max(last_e, k_lo):  # trailing
            one(key, max(last_e, k_lo), k_hi)
    if not pk:
        return _EMPTY, _EMPTY, _EMPTY
    return np.concatenate(pk), np.concatenate(ps), np.concatenate(pe)


def _by_key(nkeys: int, pk: list, ps: list, pe: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gaps of :func:`gaps` in (key, start) order without a sort: per key the leading gap
    (``pk[1]``, at most one), the inner gaps (``pk[0]``, in order: the union's are) and the
    trailing gap (``pk[2]``, at most one). Their starts strictly increase within a key (a leading
    gap ends where the key's first interval starts, a trailing gap starts where its last ends), so
    this is exactly the order a sort by (key, start) gives; each piece is scattered to its place."""
    ik, lk, tk = pk
    cin = np.bincount(ik, minlength=nkeys)[:nkeys]
    cl = np.bincount(lk, minlength=nkeys)[:nkeys]
    ct = np.bincount(tk, minlength=nkeys)[:nkeys]
    base = np.zeros(nkeys, dtype=np.int64)
    np.cumsum((cin + cl + ct)[:-1], out=base[1:])
    first_in = np.zeros(nkeys, dtype=np.int64)
    np.cumsum(cin[:-1], out=first_in[1:])
    n = int(cin.sum() + cl.sum() + ct.sum())
    pos = (base[ik] + cl[ik] - first_in[ik] + np.arange(len(ik), dtype=np.int64),
           base[lk], base[tk] + cl[tk] + cin[tk])
    out = tuple(np.empty(n, dtype=np.int64) for _ in range(3))
    for p, a, b, c in zip(pos, pk, ps, pe):
        out[0][p] = a; out[1][p] = b; out[2][p] = c
    return out


class Partition:
    """Disjoint labelled segments per key, from :func:`paint`: on each stretch of time the label
    is the *smallest* level of the intervals covering it (level 1 outranks level 2, ...).
    Uncovered time has no segment."""

    def __init__(self, s_shifted: np.ndarray, e_shifted: np.ndarray, level: np.ndarray, tmin: int, span: int) -> None:
        self._s, self._e, self.level, self.tmin, self.span = s_shifted, e_shifted, level, tmin, span

    def __len__(self) -> int:
        return len(self._s)

    def amounts(self, keys, lo, hi, nlevels: int) -> np.ndarray:
        """``out[i, l]`` = length of ``[lo[i], hi[i])`` on key ``keys[i]`` labelled level ``l``
        (``l = 1..nlevels``; column 0 stays zero). Shape ``(len(lo), nlevels + 1)``, int64."""
        n = len(np.asarray(lo))
        out = np.zeros((n, nlevels + 1), dtype=np.int64)
        win, lev, ov = self.overlaps(keys, lo, hi)
        np.add.at(out.reshape(-1), win * (nlevels + 1) + lev, ov)  # flat index: 6x faster than a pair
        return out

    def overlaps(self, keys, lo, hi) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The labelled pieces of the windows ``[lo[i], hi[i])`` on keys ``keys[i]``, as aligned
        arrays ``(window index, level, length)`` (only pieces of non-zero length; a window crossing
        k segments gives k pieces). Memory is proportional to the pieces, not windows x levels."""
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.maximum(np.asarray(hi, dtype=np.int64), lo)
        n = len(lo)
        none = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
        if n == 0 or len(self._s) == 0:
            return none
        keys = np.asarray(keys, dtype=np.int64)
        top = self.tmin + self.span - 1
        shift = keys * self.span - self.tmin
        a = np.clip(lo, self.tmin, top) + shift
        b = np.clip(hi, self.tmin, top) + shift
        i0 = np.searchsorted(self._e, a, side="right")   # first segment ending after a
        i1 = np.searchsorted(self._s, b, side="left")    # segments starting before b
        count = np.maximum(i1 - i0, 0)
        total = int(count.sum())
        if total == 0:
            return none
        win = np.repeat(np.arange(n, dtype=np.int64), count)
        first = np.cumsum(count) - count
        seg = i0[win] + (np.arange(total, dtype=np.int64) - first[win])
        del first
        ov = np.minimum(self._e[seg], b[win]) - np.maximum(self._s[seg], a[win])
        ok = ov > 0
        if not ok.all():
            win, seg, ov = win[ok], seg[ok], ov[ok]
        return win, self.level[seg].astype(np.int64), ov


def paint(keys, starts, ends, levels, nlevels: int) -> Partition:
    """Label every stretch of time per key with the highest-priority (smallest) level among the
    intervals covering it. One sort of tagged start/end events, then one running count per level."""
    keys = np.asarray(keys, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    levels = np.asarray(levels, dtype=np.int64)
    keep = ends > starts
    if not keep.all():
        keys, starts, ends, levels = keys[keep], starts[keep], ends[keep], levels[keep]
    if len(keys) == 0:
        return Partition(_EMPTY, _EMPTY, np.zeros(0, np.int8), 0, 1)
    tmin = int(starts.min())
    span = int(ends.max()) - tmin + 1
    shift = keys * span - tmin
    n = len(keys)
    t = np.concatenate([starts + shift, ends + shift])
    lev = np.concatenate([levels, levels])
    delta = np.concatenate([np.ones(n, np.int32), -np.ones(n, np.int32)])
    tag_bits = max(1, int(nlevels).bit_length()) + 1
    if int(t.max()).bit_length() + tag_bits <= 62 and int(t.min()) >= 0:
        packed = (t << tag_bits) | (lev << 1) | (delta < 0)
        packed.sort(kind="stable")  # nearly sorted runs: see union()
        t = packed >> tag_bits
        lev = (packed >> 1) & ((1 << (tag_bits - 1)) - 1)
        delta = np.where(packed & 1, -1, 1).astype(np.int32)
        del packed
    else:
        order = np.argsort(t, kind="stable")
        t, lev, delta = t[order], lev[order], delta[order]
    top = np.zeros(len(t), dtype=np.int8)
    for lv in range(int(nlevels), 0, -1):  # lowest priority first; higher ones overwrite
        mine = lev == lv
        if not mine.any():
            continue
        cnt = np.cumsum(np.where(mine, delta, 0), dtype=np.int32)
        top[cnt > 0] = lv
    s, e, lvl = t[:-1], t[1:], top[:-1]
    ok = (e > s) & (lvl > 0)
    s, e, lvl = s[ok], e[ok], lvl[ok]
    if len(s) > 1:  # merge touching segments of the same level
        new = np.concatenate(([True], (s[1:] != e[:-1]) | (lvl[1:] != lvl[:-1])))
        idx = np.flatnonzero(new)
        last = np.concatenate((idx[1:] - 1, [len(s) - 1]))
        s, e, lvl = s[idx], e[last], lvl[idx]
    return Partition(s, e, lvl, tmin, span)
