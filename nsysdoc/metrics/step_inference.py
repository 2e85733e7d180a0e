"""Steps inferred from repeating GPU work, for captures without step markers (glossary "Inferred steps").

A training loop launches the same sequence of GPU operations every iteration. On the thread of a
process that launches most of its GPU operations (its **launch thread**), each operation is a
token (a kernel's short name, a copy's direction, or a memset), in launch order. The sequence is
**periodic with period P** when the token at position i equals the token at i + P for at least
``MIN_AGREEMENT`` of the positions (its **agreement**). Periods tried: the median distance between
successive occurrences (and between every second occurrence) of each token that occurs at least
``MIN_REPEATS`` times; the smallest that agrees, and that no other period beats by more than
``AGREEMENT_SLACK`` unless that one is about a multiple of it, wins (:func:`find_period`). A period
needs at least ``MIN_PERIOD_OPS`` operations of at least two kinds, and ``MIN_REPEATS``
repetitions covering ``MIN_COVERAGE`` of the thread's operations.

The step boundary is an **anchor**: a token that occurs once per period (its successive
occurrences exactly P apart for ``ANCHOR_REGULAR`` of them); of several, the one with the longest
median host gap before its launch (the end of the previous launch call to the start of its own):
a loop's longest recurring host pause (input, logging, optimizer bookkeeping) is where one
iteration ends and the next begins. A step starts at the start of an anchor's launch call and
lasts until the next one's (the host pause before an anchor closes the step before it); the
iteration after the last anchor counts when it holds at least ``LAST_STEP_SHARE`` of the median
step's operations, and lasts until the end of its last launch call (a capture that stops
mid-iteration leaves a partial one out).

The repeating unit may be a model layer rather than a whole training step when the capture holds
only part of one step: :func:`unit_kind` says "training step" when the period contains an
optimizer or backward kernel, "repeating unit" otherwise, and the report says which.
"""
from __future__ import annotations

import re

import numpy as np

MIN_PERIOD_OPS = 4
MIN_REPEATS = 3
MIN_AGREEMENT = 0.8
AGREEMENT_SLACK = 0.05
MIN_COVERAGE = 0.5
ANCHOR_REGULAR = 0.8
LAST_STEP_SHARE = 0.9
MAX_CANDIDATES = 64
#: An anchor whose median host pause is this many times the thread's median pause between launches
#: follows a once-per-iteration pause (input, logging, optimizer bookkeeping)
PAUSE_RATIO = 4.0
#: Units tile the GPU work only when no unit (but a cold first one) is longer than this many
#: median units ...
MAX_UNIT_RATIO = 3.0
#: ... and the GPU work launched inside the units is at least this share of the process's (the
#: GPU work before its first kernel -- an upload of weights or inputs -- left out)
MIN_GPU_SHARE = 0.8
#: One training step: the optimizer kernels all lie in the last this-share of the launches ...
ONE_STEP_OPTIMIZER_TAIL = 0.4
#: ... of a launch thread of at most this many operations (a longer one that does not repeat is
#: not checked: the check reads every operation's kernel name) ...
ONE_STEP_MAX_OPS = 500_000
#: ... with at most this many launches (or this share of them) after the last optimizer kernel
#: (a zero_grad memset, loss.item(); not a next step's forward)
ONE_STEP_AFTER_MIN = 5
ONE_STEP_AFTER_PCT = 2.0
#: The last unit's operations may be at most this many median units' (its length is not checked:
#: it runs to the end of the GPU work queued ahead of the host)
LAST_UNIT_OPS_RATIO = 1.5
#: operations of one launch thread read to find the period (the rest are only counted)
SAMPLE_OPS = 2_000_000

OPTIMIZER_KERNEL = re.compile(r"adam|sgd|lamb|lion|adagrad|rmsprop|optimi[sz]er|multi_tensor_apply|fused_.*step",
                              re.IGNORECASE)
BACKWARD_KERNEL = re.compile(r"backward|bwd|_grad|dgrad|wgrad", re.IGNORECASE)


def _repeated(tokens: np.ndarray):
    """``(token, positions)`` (ascending) of every token that occurs at least ``MIN_REPEATS`` times."""
    order = np.argsort(tokens, kind="stable")
    tok = tokens[order]
    starts = np.flatnonzero(np.concatenate(([True], tok[1:] != tok[:-1])))
    ends = np.append(starts[1:], len(tok))
    for s, e in zip(starts.tolist(), ends.tolist()):
        if e - s >= MIN_REPEATS:
            yield int(tok[s]), order[s:e]


def _candidates(tokens: np.ndarray) -> list[int]:
    """Period candidates: per token seen ``MIN_REPEATS`` times, the median distance between its
    successive occurrences and between every second one; the most supported first."""
    m = len(tokens)
    support: dict[int, int] = {}
    for _tok, pos in _repeated(tokens):
        for step in (1, 2):
            if len(pos) <= step:
                continue
            p = int(np.median(pos[step:] - pos[:-step]))
            if MIN_PERIOD_OPS <= p <= m // MIN_REPEATS:
                support[p] = support.get(p, 0) + len(pos)
    ranked = sorted(support, key=lambda p: (-support[p], p))[:MAX_CANDIDATES]
    return sorted(ranked)


def agreement(tokens: np.ndarray, period: int) -> float:
    """Share of positions i whose token equals the token at i + ``period``."""
    if period <= 0 or period >= len(tokens):
        return 0.0
    return float(np.mean(tokens[:-period] == tokens[period:]))


def _near_multiple(q: int, p: int) -> bool:
    """``q`` is about k periods ``p`` (one inserted or missing operation per period allowed)."""
    k = max(1, round(q / p))
    return abs(q - k * p) <= k


def find_period(tokens: np.ndarray) -> tuple[int, float] | None:
    """``(period, agreement)`` of a token sequence (see the module docstring), or None.

    The smallest candidate period whose agreement reaches ``MIN_AGREEMENT`` and that no other
    candidate beats by more than ``AGREEMENT_SLACK`` unless that one is about a multiple of it
    (an operation logged every few steps lowers a period's agreement, not its multiples');
    then its smallest divisor that agrees as well (within the slack) is the period: a loop of
    fewer than ``MIN_PERIOD_OPS`` operations, or of one kind of operation, is no step."""
    tokens = np.asarray(tokens)
    if len(tokens) < MIN_PERIOD_OPS * MIN_REPEATS:
        return None
    scored = {p: agreement(tokens, p) for p in _candidates(tokens)}
    for p in sorted(scored):
        a = scored[p]
        if a < MIN_AGREEMENT:
            continue
        if any(b > a + AGREEMENT_SLACK and not _near_multiple(q, p) for q, b in scored.items()):
            continue
        for d in range(1, p // 2 + 1):
            if p % d == 0:
                ad = agreement(tokens, d)
                if ad >= a - AGREEMENT_SLACK:
                    if d < MIN_PERIOD_OPS:
                        return None
                    p, a = d, ad
                    break
        if len(np.unique(tokens[:p])) < 2:
            return None
        return p, a
    return None


def _pause_candidates(gap_before_ns: np.ndarray, m: int) -> list[int]:
    """Periods suggested by the long host pauses: the median distance between successive launches
    that follow a pause of ``PAUSE_RATIO`` times the median pause or more (3 of them at least)."""
    gap = np.asarray(gap_before_ns, dtype=np.float64)
    if len(gap) < 2:
        return []
    med = float(np.median(gap[1:]))
    pos = np.flatnonzero(gap > PAUSE_RATIO * max(med, 1.0))
    pos = pos[pos > 0]
    if len(pos) < MIN_REPEATS:
        return []
    p = int(np.median(np.diff(pos)))
    return [p] if MIN_PERIOD_OPS <= p <= m // MIN_REPEATS else []


def iteration_anchor(tokens: np.ndarray, gap_before_ns: np.ndarray, period: int,
                     iteration_tokens: np.ndarray, groups: list | None = None) -> tuple[int, float] | None:
    """``(token, median host pause ns)`` of a token that occurs once per ``period`` (as in
    :func:`pick_anchor`) and marks an iteration: an input copy or optimizer kernel (a token in
    ``iteration_tokens``), or one whose median host pause before it is ``PAUSE_RATIO`` times the
    thread's median pause or more. Of several, the one after the longest pause. None when no
    token marks an iteration at this period. ``groups``: :func:`repeated_groups` of the tokens,
    when the caller has them (the grouping sorts every token)."""
    gap = np.asarray(gap_before_ns, dtype=np.float64)
    med = float(np.median(gap[1:])) if len(gap) > 1 else 0.0
    marks = set(np.asarray(iteration_tokens).tolist())
    best = None
    for tok, pos in (groups if groups is not None else _repeated(np.asarray(tokens))):
        if np.mean(np.diff(pos) == period) < ANCHOR_REGULAR:
            continue
        g = float(np.median(gap[pos]))
        if tok not in marks and not g >= PAUSE_RATIO * max(med, 1.0):
            continue
        key = (g, -int(pos[0]))
        if best is None or key > best[0]:
            best = (key, tok, g)
    return (best[1], best[2]) if best else None


def repeated_groups(tokens: np.ndarray) -> list:
    """``[(token, positions)]`` of the tokens seen ``MIN_REPEATS`` times, computed once."""
    return list(_repeated(np.asarray(tokens)))


def iteration_period(tokens: np.ndarray, gap_before_ns: np.ndarray, base: tuple[int, float] | None,
                     iteration_tokens: np.ndarray, groups: list | None = None) -> tuple[int, float] | None:
    """The period of whole iterations: the smallest period, from ``base`` (:func:`find_period`;
    None when none was found, for instance because the layer is shorter than ``MIN_PERIOD_OPS``)
    up, that agrees on ``MIN_AGREEMENT`` of the positions and has an iteration anchor
    (:func:`iteration_anchor`): a longer period that holds the once-per-iteration host pause, the
    input copy or the optimizer wins over its divisors (layers). ``base`` when none has one."""
    tokens = np.asarray(tokens)
    groups = groups if groups is not None else repeated_groups(tokens)
    p0 = base[0] if base is not None else MIN_PERIOD_OPS - 1
    if base is not None and iteration_anchor(tokens, gap_before_ns, p0, iteration_tokens, groups) is not None:
        return base
    cands = sorted({q for q in _candidates(tokens) + _pause_candidates(gap_before_ns, len(tokens)) if q > p0})
    for q in cands:
        a = agreement(tokens, q)
        if a >= MIN_AGREEMENT and len(np.unique(tokens[:q])) >= 2 \
                and iteration_anchor(tokens, gap_before_ns, q, iteration_tokens, groups) is not None:
            return q, a
    return base


def tiles(unit_ns: np.ndarray, gpu_in_ns: int, gpu_total_ns: int, unit_ops: np.ndarray | None = None) \
        -> tuple[bool, str | None]:
    """Whether units of these lengths tile the GPU work: no unit but the last longer than
    ``MAX_UNIT_RATIO`` median units (the first may be: a cold first iteration, dropped by the
    caller; the last runs to the end of the GPU work the host queued ahead, so its *operations*
    are checked instead: at most ``LAST_UNIT_OPS_RATIO`` median units' worth), and the GPU work
    launched inside them at least ``MIN_GPU_SHARE`` of all. ``(ok, why not)``."""
    u = np.asarray(unit_ns, dtype=np.float64)
    if not len(u):
        return False, "no unit"
    med = float(np.median(u))
    body = u[:-1] if len(u) > 1 else u
    if med <= 0 or float(body.max()) > MAX_UNIT_RATIO * med:
        i = int(np.argmax(body))
        return False, (f"one unit lasts {u[i] / 1e6:,.1f} ms, more than {MAX_UNIT_RATIO:g}x the median unit "
                       f"({med / 1e6:,.2f} ms), so the repeating units do not tile the GPU work")
    if unit_ops is not None and len(unit_ops) > 1:
        ops = np.asarray(unit_ops, dtype=np.float64)
        mo = float(np.median(ops))
        if ops[-1] > LAST_UNIT_OPS_RATIO * mo:
            return False, (f"the last unit holds {int(ops[-1]):,} operations, more than {LAST_UNIT_OPS_RATIO:g}x "
                           f"the median unit ({mo:,.0f}), so the repeating units do not tile the GPU work")
    if gpu_total_ns > 0 and gpu_in_ns < MIN_GPU_SHARE * gpu_total_ns:
        return False, (f"the repeating units hold {gpu_in_ns / gpu_total_ns * 100:.0f}% of the GPU time (at least "
                       f"{MIN_GPU_SHARE * 100:.0f}% needed)")
    return True, None


def one_step(is_optimizer: np.ndarray, is_backward: np.ndarray) -> bool:
    """A launch sequence that is one training step: optimizer kernels that all come in its last
    ``ONE_STEP_OPTIMIZER_TAIL`` share, after a backward kernel, with at most ``ONE_STEP_AFTER``
    launches after the last of them (forward, backward, optimizer once; not the start of a next
    step)."""
    opt = np.flatnonzero(np.asarray(is_optimizer, dtype=bool))
    bwd = np.flatnonzero(np.asarray(is_backward, dtype=bool))
    m = len(is_optimizer)
    return bool(len(opt) and len(bwd) and m and opt[0] >= (1 - ONE_STEP_OPTIMIZER_TAIL) * m and bwd[0] < opt[0]
                and m - 1 - opt[-1] <= max(ONE_STEP_AFTER_MIN, ONE_STEP_AFTER_PCT / 100 * m))


def pick_anchor(tokens: np.ndarray, gap_before_ns: np.ndarray, period: int,
                groups: list | None = None) -> tuple[int, float] | None:
    """``(anchor token, its median host gap before, ns)``: of the tokens that occur once per
    period, the one after the longest median host pause (ties: the earliest first occurrence)."""
    best = None
    for tok, pos in (groups if groups is not None else _repeated(np.asarray(tokens))):
        if np.mean(np.diff(pos) == period) < ANCHOR_REGULAR:
            continue
        gap = float(np.median(gap_before_ns[pos]))
        key = (gap, -int(pos[0]))
        if best is None or key > best[0]:
            best = (key, tok, gap)
    return (best[1], best[2]) if best else None


def step_ranges(anchor_start_ns: np.ndarray, ops_in: np.ndarray,
                last_end_in_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inferred step ranges ``(start_ns, range_end_ns)`` from the anchors' launch starts (sorted),
    the launch thread's operations launched from each anchor to the next (the last: to the end),
    and the end of the last launch call in each of those stretches."""
    start = np.asarray(anchor_start_ns, dtype=np.int64)
    if len(start) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    full = ops_in[:-1]
    keep_last = len(full) > 0 and ops_in[-1] >= LAST_STEP_SHARE * float(np.median(full))
    end = np.append(start[1:], max(int(last_end_in_ns[-1]), int(start[-1])))
    if not keep_last:
        start, end = start[:-1], end[:-1]
    return start, end.astype(np.int64)


def unit_kind(period_names: list[str]) -> str:
    """"training step" when the repeating unit runs an optimizer or backward kernel, else
    "repeating unit" (perhaps a model layer: the capture may hold part of one step)."""
    if any(OPTIMIZER_KERNEL.search(n) or BACKWARD_KERNEL.search(n) for n in period_names):
        return "training step"
    return "repeating unit"
