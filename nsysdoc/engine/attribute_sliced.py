"""Attribution slice by slice, for Nsight Systems captures.

The whole-capture :class:`~nsysdoc.engine.attribute.Attributor` holds every operator range of the
capture with its per-range codes and accumulators: about 200 bytes a range, 4 GB for the 20 M
ranges ``nsys --pytorch=autograd-nvtx`` writes for 20 M kernels (issue 33 measured 5.9 GB peak).
An Nsight Systems capture is attributed per slice instead (from :data:`SLICED_MIN_ROWS` NVTX rows:
every capture; ``NSYSDOC_ATTR_SLICED_ROWS`` overrides it, and the tests compare both ways), with
the same answers:

* the plan's NVTX pass (:class:`Collector`) keeps only what is global and small: each text group's
  operator name (coded in the order the whole-capture build codes them), the module and frame
  range families (regions a user named: few), and the ``(process, seq)`` keys of backward nodes;
  when there are any, one pass over the slices before the run finds each key's forward operator
  (:class:`~nsysdoc.engine.attribute.FwdMap`);
* each slice builds the operator forest of the NVTX ranges that overlap the host times it asks
  about (:meth:`SlicedAttributor.for_slice`, from the NVTX blocks that can hold them): the ranges that
  hold a time, with their ancestors, are all among them, so the innermost range, its backward
  node and its parents are the whole-capture ones. A time outside that span (rare: a gap that
  began before the slice) is answered from a forest read for it alone;
* the operator view's per-name totals are added as the slices run (:meth:`SliceView.count_ranges`,
  :meth:`SliceView.add_ops`): a range's call and CPU time in the slice that holds its start (one
  still open at the slice's end waits for its children's time until it ends), each GPU
  operation's time to its range and, once per name, to the ranges above it. Sums of integer
  nanoseconds are exact in any order, so every number equals the whole-capture one. The parts
  that read only the slice are computed on the thread that prepares it (:meth:`SliceView.prepare`).

The PyTorch Profiler reader keeps the whole-capture build: its traces are smaller (issue 33's
budget is 0.45 GB for 400 k kernels) and its families depend on per-row domains.
"""
from __future__ import annotations

import numpy as np

from ..metrics import attribution as A
from ..trace import schema as S
from ..trace.nvtx_text import FLAG_DECORATED, FLAG_STACK
from .attribute import (NONE, Attributor, Forest, FwdMap, Names, SiteSums, _name_at, first_start_of,
                        first_starts, group_fact, main_threads_of, merge_first_starts, set_call_frames_of,
                        site_counts, site_index, site_rows, stack_frame_label)
from .data import NEG, POS, env_rows

#: NVTX rows from which an Nsight Systems capture is attributed slice by slice: every capture (at
#: 2 M steps-ops the sliced path measured faster than the whole-capture one, cold 4.96 s against
#: 5.50 s and warm 2.10 s against 2.28 s, and 0.17 GB smaller)
SLICED_MIN_ROWS = 1
_COLS = ["start_ns", "end_ns", "event_type", "thread", "domain", "text_group", "call_flags", "seq", "pos"]


def _per_name(codes: np.ndarray, nn: int, weights=None):
    """One slice's sums per name code: an array over every name when the slice's rows are many
    beside the names (the usual few operator names), else ``(codes present, their sums)`` (a
    capture with millions of distinct operator names made each slice's part arrays as long as all
    of them: 16 MB each, six per slice, two slices at once). Exact either way: integer sums."""
    codes = np.asarray(codes, dtype=np.int64)
    if nn <= max(1 << 16, 4 * len(codes)):
        return np.bincount(codes, weights=weights, minlength=nn)
    u, inv = np.unique(codes, return_inverse=True)
    return u, np.bincount(inv.reshape(-1), weights=weights, minlength=len(u))


def _add_to(total: np.ndarray, part) -> None:
    """``total += part`` for either form :func:`_per_name` gives."""
    if isinstance(part, tuple):
        total[part[0]] += part[1]
    else:
        total += part


def sliced_min_rows() -> int:
    return env_rows("NSYSDOC_ATTR_SLICED_ROWS", SLICED_MIN_ROWS)


def use_sliced(trace) -> bool:
    """Whether this capture is attributed slice by slice."""
    if trace.source_tool == "pytorch-profiler":
        return False
    t = trace.store.get("nvtx")
    return t is not None and len(t) >= sliced_min_rows()


class _GroupFacts:
    """Per text group: operator name (text), operator-like, pyprof kind (1: a source-line marker);
    read the first time a group is met (the whole-capture build's ``_group_facts``)."""

    def __init__(self, gtexts: list[str]) -> None:
        g = len(gtexts)
        self.gtexts = gtexts
        self.done = np.zeros(g, dtype=bool)
        self.text = [""] * g
        self.like = np.zeros(g, dtype=bool)
        self.kind = np.zeros(g, dtype=np.int8)
        self.empty = np.zeros(g, dtype=bool)
        self.bwd = np.zeros(g, dtype=bool)

    def ensure(self, grp: np.ndarray) -> None:
        new = grp[~self.done[grp]]
        if not len(new):
            return
        # the facts as lists, set into the arrays at once (a capture of unique texts has a group
        # per range: millions, where numpy scalar stores per group cost as much as the facts)
        cs = np.unique(new)
        gtexts, text = self.gtexts, self.text
        facts = [group_fact(gtexts[c]) for c in cs.tolist()]
        names = [v for v, _lk, _kd in facts]
        for c, v in zip(cs.tolist(), names):
            text[c] = v
        self.like[cs] = [lk for _v, lk, _kd in facts]
        self.kind[cs] = [kd for _v, _lk, kd in facts]
        self.empty[cs] = [not v for v in names]
        self.bwd[cs] = [A.is_backward(v) for v in names]
        self.done[cs] = True

    def operator_family(self) -> np.ndarray:
        """Per group: its ranges are operator ranges (a name, not a source-line marker)."""
        return ~self.empty & (self.kind != 1)


class Collector:
    """The plan's NVTX pass gives each block's host ranges (push/pop, not step markers, not library
    domains) to :meth:`add` instead of keeping them; :meth:`finish` makes the attributor."""

    def __init__(self, trace, g_step: np.ndarray, lib: np.ndarray, has_domains: bool) -> None:
        self.trace = trace
        self.facts = _GroupFacts(trace.nvtx_groups)
        self.g_step, self.lib, self.has_domains = g_step, lib, has_domains
        self.seen = np.zeros(len(trace.nvtx_groups), dtype=bool)
        self.stack_labels: list[str] = []
        self.mods: list = []
        self.frames: list = []
        self.bkeys: list = []
        self.n_ops = 0
        tg = np.asarray(trace.threads["global_tid"], dtype=np.int64)
        self.thread_pid = tg >> S.PID_SHIFT
        self.tg = tg

    def add(self, thread, start, end, grp, seq, flags, stacks: dict) -> None:
        grp = np.asarray(grp, dtype=np.int64)
        if not len(grp):
            return
        f = self.facts
        f.ensure(grp)
        self.seen[grp] = True
        for text in stacks.values():  # row order, as the whole-capture build codes them
            lab = stack_frame_label(text)
            if lab is not None:
                self.stack_labels.append(lab)
        fam_op = f.operator_family()[grp]
        self.n_ops += int(fam_op.sum())
        fam_mod = fam_op & ~(f.like[grp] | ((flags & FLAG_DECORATED) != 0))
        fam_fr = (f.kind[grp] == 1) & ~f.empty[grp]
        thread = np.asarray(thread)
        for mask, out in ((fam_mod, self.mods), (fam_fr, self.frames)):
            if mask.any():
                out.append((thread[mask].astype(np.int64), np.asarray(start)[mask].astype(np.int64),
                            np.asarray(end)[mask].astype(np.int64), grp[mask]))
        b = fam_op & f.bwd[grp] & (np.asarray(seq) >= 0)
        if b.any():
            th = thread[b].astype(np.int64)
            pid = self.thread_pid[th] if len(self.thread_pid) else np.zeros(len(th), np.int64)
            self.bkeys.append((pid, np.asarray(seq)[b].astype(np.int64)))

    def finish(self, bounds: np.ndarray, calls) -> "SlicedAttributor | None":
        f = self.facts
        used = np.flatnonzero(self.seen)
        if not len(used) and calls is None:
            return None
        names = Names()
        g_code = np.full(len(self.seen), NONE, dtype=np.int64)
        texts = [f.text[c] for c in used.tolist()]
        names.extend_codes(texts)  # in group order: as many Names.code calls would code them
        g_code[used] = np.fromiter(map(names.index_of, texts), dtype=np.int64, count=len(texts))
        n_group_names = len(names)
        for lab in self.stack_labels:
            names.code(lab)
        # backward nodes' names, in code order (as Attributor codes them)
        fam_op_g = f.operator_family()
        for c in np.unique(g_code[used[fam_op_g[used] & f.bwd[used]]]).tolist():
            names.code(A.backward_node(names[c]))
        # the main threads and their marker's code, coded last (as the whole-capture build codes it)
        main_of, via_code = main_threads_of(self.tg, names)
        # which names are backward nodes: a group's name has its group's fact
        is_bwd = np.zeros(len(names), dtype=bool)
        is_bwd[g_code[used]] = f.bwd[used]
        for c in range(n_group_names, len(names)):
            is_bwd[c] = A.is_backward(names[c])

        def forest(parts):
            if not parts:
                z = np.zeros(0, np.int64)
                return Forest(z, z, z, z)
            cat = [np.concatenate([p[k] for p in parts]) for k in range(4)]
            return Forest(cat[0], cat[1], cat[2], g_code[cat[3]])

        mods, frames = forest(self.mods), forest(self.frames)
        self.mods = self.frames = []
        if not (self.n_ops or len(mods) or len(frames)) and calls is None:
            return None
        attr = SlicedAttributor(self, names, g_code, fam_op_g, mods, frames, is_bwd)
        attr.main_of, attr.via_code = main_of, via_code
        attr.bounds = np.asarray(bounds if bounds is not None else [], dtype=np.int64)
        # issue 47: the operator view's sums per (name, input shapes) too, when ranges carry shapes
        from .shapes import ShapeTotals
        attr.shape_totals = ShapeTotals.of(self.trace)
        if calls is not None:
            set_call_frames_of(attr, self.trace, calls)
        if self.bkeys:
            pid = np.concatenate([k[0] for k in self.bkeys])
            seq = np.concatenate([k[1] for k in self.bkeys])
            self.bkeys = []
            key = np.unique(np.stack([pid, seq], axis=1), axis=0)  # pid-major, sorted
            attr.fwd = FwdMap(key[:, 0].copy(), key[:, 1].copy())
            attr.find_forward(bounds)
        return attr


class SlicedAttributor:
    """What attribution keeps over the whole capture when the operator ranges are read per slice:
    names, the module and frame families, the forward operators of backward nodes, the backtraced
    CUDA calls, and the operator view's totals per name."""

    def __init__(self, col: Collector, names: Names, g_code: np.ndarray, fam_op_g: np.ndarray,
                 mods: A.Forest, frames: A.Forest, is_bwd_name: np.ndarray | None = None) -> None:
        self.trace = col.trace
        self.table = col.trace.store.get("nvtx")
        self.g_step, self.lib, self.has_domains = col.g_step, col.lib, col.has_domains
        self.thread_pid = col.thread_pid
        if is_bwd_name is None:
            is_bwd_name = np.array([A.is_backward(x) for x in names], dtype=bool) if len(names) else np.zeros(0, bool)
        self.is_bwd_name = is_bwd_name
        self.source = "nvtx" if col.n_ops else None
        self.names = names
        self.g_code, self.fam_op_g = g_code, fam_op_g
        #: per text group: its ranges are operator ranges (not a step marker, an operator name)
        self.op_g = fam_op_g & (g_code >= 0) & ~col.g_step
        self.mods, self.frames = mods, frames
        self.op_frame = np.zeros(0, dtype=np.int64)
        #: the plan's slice boundaries (set-up first calls are looked up a slice's span at a time)
        self.bounds = np.zeros(0, dtype=np.int64)
        self._calls: dict = {}
        self.fwd = FwdMap(np.zeros(0, np.int64), np.zeros(0, np.int64))
        nn = len(names)
        self.totals = {k: np.zeros(nn, dtype=np.float64) for k in ("self_gpu", "gpu", "cpu", "self_cpu", "kernels")}
        self.totals["calls"] = np.zeros(nn, dtype=np.int64)
        # calls not inside a call of the same name (issue 47: the per-call times' divisor)
        self.totals["outer_calls"] = np.zeros(nn, dtype=np.int64)
        #: ranges still open at the end of the slice holding their start: NVTX row -> [name, end, children ns, ns]
        self.open: dict[int, list] = {}
        self.none_gpu_ns = self.none_ops = self.total_gpu_ns = 0
        self.sites_all = SiteSums()
        self.pairs = SiteSums()

    # ---- building a slice's forest ---------------------------------------------------------
    def _operator_rows(self, d: dict, grp: np.ndarray) -> np.ndarray:
        """Which rows of an NVTX block are operator ranges: push/pop ranges that end no earlier
        than they start, of an operator group (not a step marker), outside library domains."""
        keep = (d["end_ns"] >= d["start_ns"]) & np.isin(d["event_type"], S.NVTX_PUSHPOP_TYPES) & self.op_g[grp]
        if self.has_domains:
            keep &= ~self.lib[d["domain"]]
        return keep

    def ranges(self, lo: int, hi: int) -> tuple:
        """The operator ranges with ``start < hi`` and ``end > lo``: their forest, the aligned NVTX
        rows (forest order), seq values (input order) and own stack frames (input order, or None)."""
        parts = []
        t = self.table
        for b in (t.blocks_where(start_hi=hi, end_gt=lo) if t is not None else ()):
            # each block's rows filtered before they are joined: one copy of the kept columns
            d = t.read_block(b, _COLS)
            s, e = d["start_ns"], d["end_ns"]
            grp = d["text_group"]
            m = np.flatnonzero((s < hi) & (e > lo) & self._operator_rows(d, grp))
            if len(m):
                parts.append((d["thread"][m], s[m], e[m], self.g_code[grp[m]], d["seq"][m], d["pos"][m],
                              d["call_flags"][m]))
        if not parts:
            z = np.zeros(0, np.int64)
            return Forest(z, z, z, z), z, z, None
        cat = [np.concatenate([p[k] for p in parts]) if len(parts) > 1 else parts[0][k] for k in range(7)]
        th, s, e, name = cat[0].astype(np.int64), cat[1].astype(np.int64), cat[2].astype(np.int64), cat[3]
        seq, pos, flags = cat[4].astype(np.int64), cat[5], cat[6]
        own = None
        st = np.flatnonzero((flags & FLAG_STACK) != 0)
        if len(st):  # operators with their own call stack in the text (rare outside Kineto)
            own = np.full(len(s), NONE, dtype=np.int64)
            texts = self.table.gather(pos[st], ["text"])["text"]
            texts = texts.to_pylist() if hasattr(texts, "to_pylist") else list(texts)
            for i, text in zip(st.tolist(), texts):
                lab = stack_frame_label(str(text))
                if lab is not None:
                    own[i] = self.names.code(lab)
        ops = Forest(th, s, e, name)
        return ops, pos[ops.order], seq, own

    def local(self, lo: int, hi: int, keep_bw_range: bool = False) -> tuple[Attributor, np.ndarray, np.ndarray]:
        """The attributor of the ranges with ``start < hi`` and ``end > lo``, their NVTX rows and seq
        values (both in forest order)."""
        ops, pos, seq, own = self.ranges(lo, hi)
        attr = Attributor(self.source, self.names, ops, self.mods, self.frames, seq, self.thread_pid, own,
                          fwd_map=self.fwd, accumulators=False, is_bwd_name=self.is_bwd_name,
                          keep_bw_range=keep_bw_range, main_of=self.main_of, via_code=self.via_code)
        attr._calls = self._calls
        seq = seq[ops.order] if len(ops) else seq
        # what a slice no longer needs (two slices' forests are alive at once): the input order,
        # and the per-range codes no range has (its lookups answer NONE without them)
        x = attr._lookups()
        for k in ("op_frame", "bwd", "fwd", "fwd_mod", "fwd_frame"):
            if x[k] is None:
                setattr(attr, k, None)
        ops.order = None
        return attr, pos, seq

    def find_forward(self, bounds: np.ndarray) -> None:
        """Each backward key's forward operator: the first (outermost) range with its (process,
        seq) that is not a backward node and not inside one, found slice by slice (a range where
        its start is; its ancestors overlap it), the earliest slice first."""
        fm = self.fwd
        edges = [NEG, *np.asarray(bounds, dtype=np.int64).tolist(), POS]
        for c0, c1 in zip(edges[:-1], edges[1:]):
            if fm.found.all():
                break
            attr, _pos, seq = self.local(c0 - 1, c1, keep_bw_range=True)
            ops = attr.ops
            n = len(ops)
            if not n:
                continue
            br = attr.bw_range  # each range's backward node (found by the attributor)
            pid = self.thread_pid[ops.thread] if len(self.thread_pid) else np.zeros(n, np.int64)
            cand = np.flatnonzero((seq >= 0) & ~self.is_bwd_name[ops.name] & (br < 0) & (ops.start >= c0)
                                  & (ops.start < c1))
            if not len(cand):
                continue
            k = fm.index(pid[cand], seq[cand])
            ok = k >= 0
            cand, k = cand[ok], k[ok]
            ok = ~fm.found[k]
            cand, k = cand[ok], k[ok]
            if not len(cand):
                continue
            # the first of each key: by start, then forest order (cand is in forest order; stable)
            o = np.lexsort((ops.start[cand], k))
            cand, k = cand[o], k[o]
            first = np.ones(len(k), dtype=bool)
            first[1:] = k[1:] != k[:-1]
            fr, k = cand[first], k[first]
            fm.name[k] = ops.name[fr]
            fm.mod[k] = _name_at(self.mods, self.mods.innermost(ops.thread[fr], ops.start[fr]))
            ff = _name_at(self.frames, self.frames.innermost(ops.thread[fr], ops.start[fr]))
            fm.frame[k] = np.where(ff >= 0, ff, attr.op_frame[fr]) if attr.op_frame is not None else ff
            fm.found[k] = True

    set_call_frames = Attributor.set_call_frames

    def for_slice(self, c0: int, c1: int, t_lo: int, t_hi: int) -> "SliceView":
        return SliceView(self, c0, c1, t_lo, t_hi)

    # ---- the whole capture --------------------------------------------------------------------
    def op_totals(self) -> dict:
        return self.totals

    def first_calls(self, th: np.ndarray, s: np.ndarray, e: np.ndarray, share: float) -> tuple | None:
        """:meth:`Attributor.first_calls`, the calls' ranges read around them, a slice's span at a
        time; the earliest start per (thread, name) from the ranges that start before them."""
        edges = self.bounds
        part = np.searchsorted(edges, s, side="right")
        covered: dict[int, list] = {}  # NVTX row -> [covered ns, thread, start, end, name]
        for p in np.unique(part).tolist():
            m = np.flatnonzero(part == p)
            attr, pos, _seq = self.local(int(s[m].min()) - 1, int(s[m].max()) + 1)
            r = attr.ops.innermost(th[m], s[m])
            ok = r >= 0
            for ri, d in zip(r[ok].tolist(), (e - s)[m][ok].tolist()):
                got = covered.get(int(pos[ri]))
                if got is None:
                    ops = attr.ops
                    covered[int(pos[ri])] = [d, int(ops.thread[ri]), int(ops.start[ri]), int(ops.end[ri]),
                                             int(ops.name[ri]), int(pos[ri])]
                else:
                    got[0] += d
        # in forest order (thread, start, longest first, table order), as the whole-capture build
        keep = sorted((v for v in covered.values() if v[0] >= share * max(v[3] - v[2], 1)),
                      key=lambda v: (v[1], v[2], -v[3], v[5]))
        if not keep:
            return None
        c_th, c_s, c_e, c_name = (np.array([v[i] for v in keep], dtype=np.int64) for i in (1, 2, 3, 4))
        # the earliest start per (thread, name) among the ranges with a candidate's name that start
        # no later than the last candidate
        names = np.unique(c_name)
        first = None
        for blk in self.table.blocks_where(start_hi=int(c_s.max()) + 1):
            d = self.table.read_block(blk, ["start_ns", "end_ns", "event_type", "thread", "domain", "text_group"])
            grp = d["text_group"].astype(np.int64)
            code = self.g_code[grp]
            ok = np.isin(code, names) & self._operator_rows(d, grp)
            if ok.any():
                first = merge_first_starts(first, first_starts(d["thread"][ok], code[ok], d["start_ns"][ok]))
        if first is not None:
            sel = c_s <= first_start_of(first, c_th, c_name)
            c_th, c_s, c_e, c_name = c_th[sel], c_s[sel], c_e[sel], c_name[sel]
        return c_th, c_s, c_e, c_name


class SliceView:
    """What one slice asks: the operator forest of the ranges around ``[c0, c1)`` and its
    launches (``t_lo``..``t_hi``), read once; its operations and ranges added to the totals."""

    def __init__(self, owner: SlicedAttributor, c0: int, c1: int, t_lo: int, t_hi: int) -> None:
        self.owner = owner
        self.c0, self.c1 = c0, c1
        # answers are exact for lo < t < hi; every range starting in [c0, c1) is read
        self.lo = min(c0 - 1, t_lo - 1)
        self.hi = max(c1, t_hi + 1)
        self.attr, self.pos, _seq = owner.local(self.lo, self.hi)
        self._nested = None
        #: parts computed ahead by :meth:`prepare`, added by :meth:`add_ops` and :meth:`count_ranges`
        self._pending_ops: dict | None = None
        self._pending_ranges: dict | None = None

    def nested(self) -> np.ndarray:
        if self._nested is None:
            self._nested = self.attr.ops.nested_in_same_name()
        return self._nested

    def sites(self, thread, t, valid=None, enclosing: bool = False) -> np.ndarray:
        return self.sites_and_ranges(thread, t, valid, enclosing)[0]

    def sites_and_ranges(self, thread, t, valid=None, enclosing: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`Attributor.sites_and_ranges`; a query outside the slice's span gets its site
        from a forest read for those queries (its range index is -1: only the slice's own
        launches, always inside, are added to the operator view)."""
        thread = np.asarray(thread, dtype=np.int64)
        t = np.asarray(t, dtype=np.int64)
        ok = thread >= 0
        if valid is not None:
            ok &= np.asarray(valid, dtype=bool)
        out_ = ok & ((t <= self.lo) | (t >= self.hi))
        if not out_.any():
            return self.attr.sites_and_ranges(thread, t, ok, enclosing)
        sites, ranges = self.attr.sites_and_ranges(thread, t, ok & ~out_, enclosing)
        m = np.flatnonzero(out_)
        extra = self.owner.local(int(t[m].min()) - 1, int(t[m].max()) + 1)
        sites[m] = extra[0].sites(thread[m], t[m], enclosing=enclosing)
        return sites, ranges

    def prepare(self, op_range: np.ndarray, sites: np.ndarray, dur: np.ndarray, label: np.ndarray,
                index: tuple | None = None) -> None:
        """What :meth:`add_ops` and :meth:`count_ranges` will add, computed ahead (on the worker
        thread that prepares the slice: they read only the slice)."""
        self._pending_ops = self._ops_part(op_range, sites, dur, label, index)
        self._pending_ranges = self._ranges_part()

    def _ops_part(self, op_range, sites, dur, label, index) -> dict:
        nn = len(self.owner.totals["calls"])
        dur = np.asarray(dur, dtype=np.int64)
        has = op_range >= 0
        part: dict = {"total": int(dur.sum()), "none_ns": int(dur[~has].sum()), "none_ops": int((~has).sum())}
        if has.any():
            ops = self.attr.ops
            r, d = op_range[has], dur[has]
            nm = ops.name[r]
            part["self_gpu"] = _per_name(nm, nn, d)
            part["kernels"] = _per_name(nm, nn)
            # each range's GPU time with its descendants', in this slice (the slices' parts add up),
            # once per name along a chain (the outermost range of a name)
            sub = ops.subtree_sum(np.bincount(r, weights=d, minlength=len(ops)))
            top = np.flatnonzero(~self.nested() & (sub > 0))
            part["gpu"] = _per_name(ops.name[top], nn, sub[top])
            if getattr(self.owner, "shape_totals", None) is not None:  # issue 47: per (name, shapes)
                from .shapes import slice_ops_part
                part["by_shape"] = slice_ops_part(self.owner.shape_totals, ops, self.pos, r, d, sub, top)
        part["sites"] = site_counts(*(index if index is not None else site_index(sites)), dur)
        part["pairs"] = site_counts(*site_index(site_rows(sites[:, 0], label)), dur)
        return part

    def add_ops(self, op_range: np.ndarray, sites: np.ndarray, dur: np.ndarray, label: np.ndarray,
                index: tuple | None = None) -> None:
        part, self._pending_ops = self._pending_ops, None
        if part is None:
            part = self._ops_part(op_range, sites, dur, label, index)
        o = self.owner
        for k in ("self_gpu", "kernels", "gpu"):
            if k in part:
                _add_to(o.totals[k], part[k])
        for k, v in part.get("by_shape", {}).items():  # issue 47
            o.shape_totals.add(k, v)
        o.total_gpu_ns += part["total"]
        o.none_gpu_ns += part["none_ns"]
        o.none_ops += part["none_ops"]
        if len(op_range):
            o.sites_all.add(*part["sites"])
            o.pairs.add(*part["pairs"])

    def _ranges_part(self) -> dict:
        """The ranges that start in ``[c0, c1)``: calls, CPU time, and self CPU time of those whose
        children are all in this slice; the others (open past ``c1``) and the time of children
        whose parent is open, for :meth:`count_ranges`."""
        ops = self.attr.ops
        c0, c1 = self.c0, self.c1
        nn = len(self.owner.totals["calls"])
        m = np.flatnonzero((ops.start >= c0) & (ops.start < c1)) if len(ops) else np.zeros(0, np.int64)
        part: dict = {"opens": [], "later": None}
        if not len(m):
            return part
        name = ops.name[m]
        dur = (ops.end - ops.start)[m]
        top = ~self.nested()[m]
        part["calls"] = _per_name(name, nn)
        part["cpu"] = _per_name(name[top], nn, dur[top])
        part["outer_calls"] = _per_name(name[top], nn)
        final = np.zeros(len(ops), dtype=bool)
        final[m] = (ops.end[m] < c1) | (c1 >= POS)
        opn = m[~final[m]]  # open past the slice: its children may come later
        part["opens"] = list(zip(self.pos[opn].tolist(), ops.name[opn].tolist(), ops.end[opn].tolist(),
                                 (ops.end - ops.start)[opn].tolist()))
        par = ops.parent[m]
        hp = np.flatnonzero(par >= 0)
        fin_par = final[par[hp]]
        here, later = hp[fin_par], hp[~fin_par]
        child = np.bincount(par[here], weights=dur[here], minlength=len(ops)) if len(here) else \
            np.zeros(len(ops), dtype=np.float64)
        if len(later):
            up, inv = np.unique(self.pos[par[later]], return_inverse=True)
            part["later"] = (up.tolist(), np.bincount(inv, weights=dur[later]).tolist())
        f = m[final[m]]
        if len(f):
            self_ns = np.maximum((ops.end - ops.start)[f] - child[f].astype(np.int64), 0)
            part["self_cpu"] = _per_name(ops.name[f], nn, self_ns)
        if getattr(self.owner, "shape_totals", None) is not None:  # issue 47: per (name, shapes)
            from .shapes import slice_ranges_part
            part["by_shape"] = slice_ranges_part(self.owner.shape_totals, ops, self.pos, m, top, dur, f,
                                                 self_ns if len(f) else None)
        return part

    def count_ranges(self) -> None:
        """The ranges that start in ``[c0, c1)`` added to the totals; self CPU time once a range's
        children are all in (a range open past ``c1`` waits in ``owner.open``)."""
        part, self._pending_ranges = self._pending_ranges, None
        if part is None:
            part = self._ranges_part()
        o = self.owner
        tot = o.totals
        for k in ("calls", "cpu", "self_cpu", "outer_calls"):
            if k in part:
                _add_to(tot[k], part[k])
        for k, v in part.get("by_shape", {}).items():  # issue 47
            o.shape_totals.add(k, v)
        for p, nm, end, dur in part["opens"]:
            o.open[p] = [nm, end, 0, dur]
        if part["later"] is not None:
            for p, a in zip(*part["later"]):
                got = o.open.get(p)
                if got is not None:
                    got[2] += int(a)
        # ranges opened earlier that end in this slice: every child is in
        c1 = self.c1
        done = [p for p, v in o.open.items() if v[1] < c1 or c1 >= POS]
        for p in done:
            nm, _end, ch, dur = o.open.pop(p)
            tot["self_cpu"][nm] += max(dur - ch, 0)
            if getattr(o, "shape_totals", None) is not None:  # issue 47
                o.shape_totals.add_one("self_cpu", nm, p, max(dur - ch, 0))
