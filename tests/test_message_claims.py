"""Every sentence of every message agrees with the numbers beside it (issue 28, items 4 and 8).

Over every fixture scenario (``nsysdoc.testing.scenarios.SCENARIOS``), every capture of the
built-in rules' ``*.cases.yaml`` (with the case's parameters and step marker) and every real capture
in ../shared/traces (skipped when absent), each finding's message is parsed for the claims its rule's
``message:`` template makes (rules/<id>.yaml), and each claim is checked against the finding's own
numbers: its impact, its evidence table, the window, the devices. Then the page as a whole: the
verdict ranks like the findings list, its second line names no other bound than its headline, a
finding with no measurable cost says so (or is folded away), no paragraph is repeated three times,
and the markdown and terminal summaries never print "n/a".

The expectations come from the templates and the glossary, not from what the tool prints today.
"""
from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
import yaml

from . import conftest as _conftest

ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES: Path = _conftest.SHARED_TRACES
RULE_FILES = {p.stem: yaml.safe_load(p.read_text()) for p in sorted((ROOT / "rules").glob("*.yaml"))
              if not p.name.endswith(".cases.yaml")}

SEV = {"info": 0, "warning": 1, "critical": 2}
#: the by-impact policy (docs/rules.md, "Severity"): critical from 15 % of the window, warning from 3 %
CRITICAL_FROM, WARNING_FROM = 15.0, 3.0
#: a finding whose cost rounds to nothing must say so in plain words (or not be listed at all)
NO_COST = re.compile(r"no measurable (cost|time|impact|loss)|costs? (nothing|no time)|nothing to (gain|recover)|"
                     r"would (save|recover) nothing|no (GPU )?time (is )?lost|did not cost|does not cost|"
                     r"cost(s)? less than|too small to (matter|measure)", re.I)
#: the bounds a verdict's second line may name, by headline (kernel-efficiency rules are compute-bound,
#: copies transfer-bound, exposed NCCL communication-bound; idle-time rules name no bound)
BOUND_WORDS = {"compute": re.compile(r"\bcompute-bound\b", re.I), "communication": re.compile(r"\bcommunication-bound\b", re.I),
               "transfer": re.compile(r"\btransfer-bound\b", re.I)}
ALLOWED_BOUND = {"fp32-gemm": {"compute"}, "dominant-kernel": {"compute"}, "tiny-kernels": {"compute"},
                 "pseudo-busy": {"compute"}, "transfer-bound": {"transfer"}, "pageable-memcpy": {"transfer"},
                 "d2h-transfer": {"transfer"}, "nccl-exposed": {"communication"}}

NUM = r"(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
UNIT_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3, "min": 6e4}
TIME = NUM + r"\s?(ns|us|µs|ms|s|min)(?![\w/])"
TIME_RE = re.compile(r"(?<![\w.])" + TIME)


# ------------------------------------------------------------------------------------------------
# numbers as printed
# ------------------------------------------------------------------------------------------------

class Printed:
    """A number as printed: its value and the half-unit of its last digit (its rounding)."""

    def __init__(self, text: str, unit: str | None = None) -> None:
        self.text = text + (f" {unit}" if unit else "")
        t = text.replace(",", "")
        dec = len(t.split(".")[1]) if "." in t else 0
        scale = UNIT_MS[unit] if unit else 1.0
        self.value = float(t) * scale
        self.half = 0.5 * 10 ** -dec * scale

    def agrees(self, x, slack: float = 1e-4) -> bool:
        if x is None:
            return False
        if abs(self.value - x) <= self.half + slack + abs(x) * 1e-9:
            return True
        # a share just under 100 is cut, not rounded up (nsysdoc.rules.text._not_up_to_100):
        # 99.995 prints "99"
        return 99 <= x < 100 and self.value <= x < self.value + 2 * self.half + slack

    def __repr__(self) -> str:
        return repr(self.text)

    def __str__(self) -> str:
        return self.text


def _time(m: re.Match, i: int) -> Printed:
    return Printed(m.group(i), m.group(i + 1))


def _rows(f: dict) -> list[dict]:
    ev = f.get("evidence") or {}
    cols = ev.get("columns") or []
    return [dict(zip(cols, r)) for r in ev.get("rows") or []]


def _limit(rule: str) -> int | None:
    return ((RULE_FILES.get(rule) or {}).get("evidence") or {}).get("limit")


def _window_ms(r: dict) -> float | None:
    return ((r.get("capture") or {}).get("window") or {}).get("duration_ms")


def _span_ms(r: dict) -> float | None:
    return ((r.get("capture") or {}).get("span") or {}).get("duration_ms")


def _setup_base_ms(r: dict) -> float | None:
    """What one-time-setup's share is of (glossary, issue 28): the GPU span plus the set-up before
    the first GPU operation."""
    span = _span_ms(r)
    if span is None:
        return None
    return span + (((r.get("metrics") or {}).get("values") or {}).get("setup_before_ms") or 0.0)


def _devices_with_work(r: dict) -> list[dict]:
    return [d for d in r.get("devices") or [] if d.get("busy_pct")]


def _too_little_work(r: dict) -> bool:
    return (r.get("verdict") or {}).get("status") in ("too-little-work", "no-gpu")


# ------------------------------------------------------------------------------------------------
# claims of every message
# ------------------------------------------------------------------------------------------------

def generic_claims(r: dict, f: dict, bad) -> None:
    rule, msg, sev = f["rule"], f.get("message") or "", f.get("severity")
    spec = RULE_FILES.get(rule) or {}
    window, span = _window_ms(r), _span_ms(r)
    imp_ms, imp_pct = f.get("impact_ms"), f.get("impact_pct")
    over = window
    capture_ms = ((r.get("capture") or {}).get("framing") or {}).get("capture_ms")
    if f.get("impact_of") == "capture":  # measured over the whole capture (scope: capture, issue 46)
        over = capture_ms
    elif spec.get("impact_pct") or str(f.get("impact_of") or "").startswith("GPU span"):
        over = _setup_base_ms(r) if rule == "one-time-setup" else span

    # the share beside the cost: impact_pct = impact_ms / window (one-time set-up: / GPU span)
    if imp_ms is not None and imp_pct is not None and over:
        if abs(imp_ms / over * 100 - imp_pct) > 0.01:
            bad(f"impact_pct {imp_pct} but impact_ms {imp_ms} / {over} ms = {imp_ms / over * 100:.4f} %")

    # "X (P% of the window)": a message may print several shares of the window (the time a kind of
    # kernel ran, then what fixing it saves); one of them is the finding's impact_pct, a time
    # beside it is its impact_ms, and every time printed beside a share is that share of the window
    ms = list(re.finditer(r"(?:" + TIME + r",? \(?)?" + NUM + r"% of the window", msg))
    if ms and rule not in ("capture-quality", "no-gpu-activity"):
        printed = [Printed(m.group(3)) for m in ms]
        if imp_pct is not None and imp_pct > 0 and not any(p.agrees(imp_pct) for p in printed):
            bad(f"prints {', '.join(str(p) for p in printed)}% of the window, none is its impact_pct {imp_pct}")
        for m, p in zip(ms, printed):
            if not m.group(1):
                continue
            t = _time(m, 1)
            if p.agrees(imp_pct) and imp_ms is not None and not t.agrees(imp_ms):
                bad(f"prints {t} ({p}% of the window) as its cost, its impact_ms is {imp_ms}")
            if window and abs(t.value / window * 100 - p.value) > t.half / window * 100 + p.half + 1e-6:
                bad(f"prints {t} as {p}% of the window, but {t} / {window} ms = {t.value / window * 100:.2f} %")

    # no time in a message exceeds the window it is measured in (or the GPU span for set-up); the
    # template's own words ("less than 1 ms each time") are not measurements
    literal = {m.group(0) for m in TIME_RE.finditer(re.sub(r"\{[^}]*\}", "#", str(spec.get("message") or "")))}
    bound = max(x for x in (window or 0, span or 0)) if (window or span) else None
    if bound and rule == "one-time-setup":  # it also counts the set-up before the first GPU operation
        bound = max(bound, _setup_base_ms(r) or 0)
    if f.get("impact_of") == "capture" and capture_ms:  # times of the whole capture
        bound = max(bound or 0, capture_ms)
    if bound and rule not in ("capture-quality", "no-gpu-activity"):
        for m in TIME_RE.finditer(msg):
            if m.group(0) in literal:
                continue
            t = _time(m, 1)
            if t.value - t.half > bound * 1.0001 + 1e-6:
                bad(f"prints a time of {t}, longer than the {bound} ms window/span it describes")

    # a share of a whole is at most 100 %
    for m in re.finditer(NUM + r"% (?:of the window|of all kernel time|of kernel time|of communication|of it|are shorter"
                         r"|of the \S+ between)", msg):
        if Printed(m.group(1)).value > 100 + 1e-9:
            bad(f"prints a share of {m.group(1)}%")

    # severity agrees with the number beside it (by-impact policy, capped by max_severity)
    if spec.get("severity") == "by-impact" and imp_pct is not None and sev in SEV:
        by_pct = "critical" if imp_pct >= CRITICAL_FROM else "warning" if imp_pct >= WARNING_FROM else "info"
        values = (r.get("metrics") or {}).get("values") or {}
        # scope: capture rules are judged whatever the GPU work; on a sliver of GPU work (issue 46)
        # only the capture's own findings and set-up keep their severity
        # too little GPU work to judge: info, except host rules on a window of 500 ms or more with kernels
        unjudged = (r.get("capture") or {}).get("enough_gpu_work") is False and not (
            spec.get("scope") == "host" and values.get("kernel_count") and (window or 0) >= 500)
        want = by_pct if spec.get("scope") == "capture" else "info" if (
            _too_little_work(r) or unjudged or (values.get("gpu_work_sliver") and spec.get("category") != "capture"
                                                and spec.get("phase") != "framing")) else by_pct
        cap = spec.get("max_severity")
        if cap and SEV[want] > SEV[cap]:
            want = cap
        if sev != want:
            bad(f"severity {sev} with impact_pct {imp_pct} (by-impact policy: {want})")

    # a finding with no measurable cost is not a warning and says so, or is not listed
    if imp_ms is not None and round(imp_ms, 3) == 0:
        if SEV.get(sev, 0) > 0:
            bad(f"at {sev} with an impact of {imp_ms} ms")
        if not NO_COST.search(msg):
            bad(f"impact {imp_ms} ms (printed 0.000 ms), yet the message does not say it costs nothing "
                f"measurable and the finding is not folded away: {msg[:160]!r}")


def rule_claims(r: dict, f: dict, bad) -> None:
    rule, msg, sev = f["rule"], " ".join((f.get("message") or "").split()), f.get("severity")
    rows = _rows(f)
    window = _window_ms(r)
    limit = _limit(rule)
    complete = limit is None or len(rows) < limit     # the evidence table lists every row
    ndev = max(1, len(_devices_with_work(r)))

    if rule == "launch-bound":
        if "less than 1 ms each time" in msg:
            for row in rows:
                d, lm = row.get("duration_ms"), row.get("launch_ms")
                if (d is not None and d >= 1.0) or (lm is not None and lm >= 1.0):
                    bad(f"says 'the host needed less than 1 ms each time', but its evidence lists a {d} ms gap "
                        f"({lm} ms of it launch time) on device {row.get('device')} at {row.get('start_ns')}")
        m = re.search(r"in " + NUM + r" short gaps", msg)
        if m and int(m.group(1).replace(",", "")) < len(rows):
            bad(f"counts {m.group(1)} gaps but its evidence lists {len(rows)}")
        m = re.search(r"The gaps last " + TIME + r" on average while the median kernel runs " + TIME + r" \(" + NUM + r"x", msg)
        if m:
            g, k, x = _time(m, 1), _time(m, 3), Printed(m.group(5))
            lo = (g.value - g.half) / (k.value + k.half) if k.value + k.half else 0
            hi = (g.value + g.half) / max(k.value - k.half, 1e-12)
            if not (lo - x.half <= x.value <= hi + x.half):
                bad(f"prints ratio {x}x for gaps of {g} over kernels of {k} ({g.value / k.value:.2f}x)")
            if "above 2-3x the CPU sets the pace" in msg and x.value < 2 and SEV.get(sev, 0) >= 1:
                bad(f"at {sev}, but its own ratio {x}x is below the '2-3x' from which it says the CPU sets the "
                    f"pace: the sentence contradicts the severity")

    elif rule == "host-bound":
        m = re.search(r"waited " + TIME + r" .*?in " + NUM + r" gaps where it needed 1 ms or more", msg)
        for row in rows:
            if (row.get("host_ms") or 0) > 0 and (row.get("duration_ms") or 0) < 1.0:
                bad(f"says each gap needed 1 ms or more, but its evidence lists a {row.get('duration_ms')} ms gap")
        mm = re.search(r"at most " + TIME + r" of such CPU time in one gap, median " + TIME, msg)
        if mm:
            mx, md = _time(mm, 1), _time(mm, 3)
            if md.value - md.half > mx.value + mx.half:
                bad(f"median {md} above its maximum {mx}")
            hosts = [row.get("host_ms") for row in rows if row.get("host_ms") is not None]
            if hosts and not mx.agrees(max(hosts)):
                bad(f"says at most {mx} of CPU time in one gap; its evidence's largest host_ms is {max(hosts)}")
            if m:
                total, n = _time(m, 1), int(m.group(3).replace(",", ""))
                if mx.value - mx.half > total.value + total.half:
                    bad(f"one gap holds {mx}, more than the {total} in all")
                if total.value - total.half > n * (mx.value + mx.half) * ndev + 1e-6:
                    bad(f"{total} in {n} gaps of at most {mx} each is impossible")

    elif rule == "host-sync":
        m = re.search(r"cost " + TIME + r" of GPU idle time .*?: " + NUM + r" blocking sync calls", msg)
        if m:
            cost, n = _time(m, 1), int(m.group(3).replace(",", ""))
            if rows and complete and n != sum(int(x.get("count") or 0) for x in rows):
                bad(f"counts {n} blocking sync calls, its evidence {sum(int(x.get('count') or 0) for x in rows)}")
            blocked = sum(x.get("total_ms") or 0 for x in rows)
            if rows and complete and cost.value - cost.half > blocked + 1e-3:
                bad(f"charges {cost} of GPU idle to syncs although it says it counts at most the time the host was "
                    f"blocked, and the sync calls block {blocked:.4f} ms in all")

    elif rule == "allocation-churn":
        m = re.search(r"idle " + TIME + r" .*?\(" + NUM + r" allocation calls taking " + TIME + r" in the window\)", msg)
        if m:
            idle, n, calls = _time(m, 1), int(m.group(3).replace(",", "")), _time(m, 4)
            if rows and complete and n != sum(int(x.get("count") or 0) for x in rows):
                bad(f"counts {n} allocation calls, its evidence {sum(int(x.get('count') or 0) for x in rows)}")
            if idle.value - idle.half > (calls.value + calls.half) * ndev:
                bad(f"GPU idle {idle} while allocating, longer than the {calls} the allocation calls took")

    elif rule == "one-time-setup":
        # "kept the GPU idle T: S between the first and the last GPU operation (SPAN) and B before the
        # first one, P% of the two together"
        # (", plus G while the memory allocator grew (...)" when allocator growth is part of it)
        m = re.search(r"idle " + TIME + r": " + TIME + r" between the first and the last GPU operation \(" + TIME
                      + r"\) and " + TIME + r" before the first one(?:, plus " + TIME
                      + r" while the memory allocator grew \(.*?growth, not churn\))?, " + NUM + r"% of the two together", msg)
        if not m:
            bad("message does not state its share of the GPU span and the set-up before it")
        else:
            t, in_span, s, before, p = _time(m, 1), _time(m, 3), _time(m, 5), _time(m, 7), Printed(m.group(11))
            # the allocator's growth, when printed, is the third part of the set-up
            growth = _time(m, 9) if m.group(9) is not None else Printed("0")
            span = _span_ms(r)
            if span is not None and not s.agrees(span):
                bad(f"prints a GPU span of {s}, capture.span is {span} ms")
            if f.get("impact_ms") is not None and not t.agrees(f["impact_ms"]):
                bad(f"prints {t} of set-up, impact_ms {f['impact_ms']}")
            if abs(in_span.value + before.value + growth.value - t.value) > \
                    in_span.half + before.half + growth.half + t.half + 1e-6:
                bad(f"prints {in_span} + {before} + {growth} of set-up, which is not {t}")
            if f.get("impact_pct") is not None and not p.agrees(f["impact_pct"]):
                bad(f"prints {p}% of the span and the set-up before it, impact_pct {f['impact_pct']}")
            # the largest set-up event's own length ("in all": the GPU may have run during part of it,
            # so it can exceed the idle time; it is the evidence table's first row)
            top = re.search(r"The largest set-up event is (.+?) \(" + TIME + r" in all\)\.", msg)
            if re.search(r"The largest part is", msg):
                bad("calls an event 'the largest part' of the set-up idle time, which it may exceed")
            if top:
                part = _time(top, 2)
                if rows and not part.agrees(rows[0].get("total_ms"), slack=1e-3):
                    bad(f"largest part {part}, its evidence's first row {rows[0].get('name')} {rows[0].get('total_ms')} ms")

    elif rule == "transfer-bound":
        m = re.search(r"For " + NUM + r"% of the window \(" + TIME + r" per GPU\).*?kernels compute " + NUM + r"% of it\. "
                      r"Most copy time is (\S+?)(?: \((\w+) host memory\))?: " + NUM + r" copies, .*? at " + NUM + r" GB/s",
                      msg)
        if m:
            comp = Printed(m.group(4))
            devs = _devices_with_work(r)
            if devs:
                mean = sum(d.get("compute_pct") or 0 for d in devs) / len(devs)
                if not comp.agrees(mean, slack=0.01):
                    bad(f"says kernels compute {comp}% of the window; devices[] say {mean:.4f} %")
            if rows:
                top = max(rows, key=lambda x: x.get("time_ms") or 0)
                if m.group(5) != top.get("kind") or (m.group(6) or "") != (top.get("host_memory") or ""):
                    bad(f"says most copy time is {m.group(5)} ({m.group(6)}), its evidence's largest row is "
                        f"{top.get('kind')} ({top.get('host_memory')})")
                n = int(m.group(7).replace(",", ""))
                if abs(n * ndev - (top.get("count") or 0)) > ndev:
                    bad(f"{n} copies per GPU on {ndev} GPU(s), its evidence row counts {top.get('count')}")
                if not Printed(m.group(8)).agrees(top.get("gbps"), slack=0.01):
                    bad(f"prints {m.group(8)} GB/s, its evidence row says {top.get('gbps')}")

    elif rule == "nccl-exposed":
        m = re.search(r"ran " + TIME + r" per GPU, of which " + TIME + r" with no compute running \(" + NUM +
                      r"% of the window; " + NUM + r"% of communication was overlapped\)", msg)
        if m:
            c, e, o = _time(m, 1), _time(m, 3), Printed(m.group(6))
            if e.value - e.half > c.value + c.half:
                bad(f"exposed {e} is more than the {c} of communication")
            comm = (r.get("metrics") or {}).get("communication") or {}
            cm, em = comm.get("comm_ms"), comm.get("exposed_comm_ms")
            if cm and em is not None and not o.agrees((cm - em) / cm * 100, slack=0.01):
                bad(f"says {o}% overlapped; ({cm} - {em}) / {cm} = {(cm - em) / cm * 100:.2f} %")
            if cm is not None and not c.agrees(cm):
                bad(f"prints {c} of communication per GPU, metrics.communication.comm_ms {cm}")
            if rows:
                means = sum(x.get("exposed_comm_ms") or 0 for x in rows) / len(rows)
                if complete and not e.agrees(means, slack=1e-3):
                    bad(f"prints {e} exposed per GPU, its per-device evidence averages {means:.4f} ms")

    elif rule == "pageable-memcpy":
        m = re.search(NUM + r" copies moved", msg)
        pag = [x for x in rows if x.get("host_memory") == "pageable"]
        if m and pag and complete:
            n = int(m.group(1).replace(",", ""))
            if n != sum(int(x.get("count") or 0) for x in pag):
                bad(f"counts {n} pageable copies, its evidence {sum(int(x.get('count') or 0) for x in pag)}")

    elif rule == "fp32-gemm":
        m = re.search(r"take " + TIME + r" per GPU, " + NUM + r"% of all kernel time", msg)
        if m and rows and complete:
            s = Printed(m.group(3))
            tot = sum(x.get("share_of_kernel_time_pct") or 0 for x in rows)
            if abs(s.value - tot) > s.half + 0.01:
                bad(f"says {s}% of kernel time, its evidence rows sum to {tot:.4f} %")

    elif rule == "tiny-kernels":
        m = re.search(NUM + r" kernels ran with a mean of " + TIME + r" \(median " + TIME + r"\); " + NUM + r"% are shorter", msg)
        if m and r.get("summary", {}).get("kernel_count") is not None:
            if int(m.group(1).replace(",", "")) != r["summary"]["kernel_count"]:
                bad(f"counts {m.group(1)} kernels, summary.kernel_count {r['summary']['kernel_count']}")
        e = re.search(r"estimated " + NUM + r" x " + NUM + r" us(?: x " + NUM + r"% for the time the GPU is busy)?", msg)
        if e and f.get("impact_ms") is not None:
            est = int(e.group(1).replace(",", "")) * float(e.group(2)) / 1000
            slack = 1e-3 + est * 1e-3
            if e.group(3):  # x the printed busy share (one decimal: half a unit of slack)
                est, slack = est * float(e.group(3)) / 100, slack + est * 0.0005
            if abs(est - f["impact_ms"]) > slack:
                bad(f"estimates {e.group(1)} x {e.group(2)} us = {est:.3f} ms, but its impact is {f['impact_ms']} ms")

    elif rule == "dominant-kernel":
        m = re.search(r"One kernel takes " + NUM + r"% of all kernel time: .*?\(" + NUM + r" launches, " + TIME + r" each", msg)
        if m and rows:
            top = rows[0]
            if not Printed(m.group(1)).agrees(top.get("share_of_kernel_time_pct"), slack=0.01):
                bad(f"says {m.group(1)}% of kernel time, its evidence's top row {top.get('share_of_kernel_time_pct')}")
            if int(m.group(2).replace(",", "")) != top.get("count"):
                bad(f"says {m.group(2)} launches, its evidence's top row {top.get('count')}")
            if not _time(m, 3).agrees((top.get("mean_us") or 0) / 1000, slack=1e-3):
                bad(f"says {_time(m, 3)} each, its evidence's top row mean {top.get('mean_us')} us")

    elif rule == "data-starvation":
        m = re.search(r"median of " + TIME + r" of GPU idle \(" + NUM + r"% of the step\)", msg)
        st = (r.get("summary") or {}).get("step_time_ms_median")
        if m and st is not None and _time(m, 1).value - _time(m, 1).half > st * 1.0001:
            bad(f"a step starts with {_time(m, 1)} of idle, longer than the median step ({st} ms)")

    elif rule == "d2h-transfer":
        m = re.search(r"taking " + TIME + r" per step \(" + NUM + r" copies, " + TIME + r" per GPU in all\)", msg)
        if m and _time(m, 1).value - _time(m, 1).half > _time(m, 4).value + _time(m, 4).half:
            bad(f"{_time(m, 1)} per step is more than the {_time(m, 4)} in all")

    elif rule in ("capture-quality", "no-gpu-activity"):
        m = re.search(NUM + r" kernel\(s\) and " + NUM + r" copy/memset operation\(s\), " + TIME +
                      r" of GPU time in a " + TIME + r" window", msg)
        if m:
            gpu, win = _time(m, 3), _time(m, 5)
            if gpu.value - gpu.half > win.value + win.half:
                bad(f"{gpu} of GPU time in a {win} window")
            if window and not win.agrees(window, slack=window * 0.005):
                bad(f"prints a {win} window, capture.window is {window} ms")
            kc = (r.get("summary") or {}).get("kernel_count")
            if kc is not None and int(m.group(1).replace(",", "")) != kc:
                bad(f"counts {m.group(1)} kernels, summary.kernel_count {kc}")


# ------------------------------------------------------------------------------------------------
# subjects: fixture scenarios, rule-case captures, real captures
# ------------------------------------------------------------------------------------------------

def _scenario_subjects() -> dict[str, tuple]:
    from nsysdoc.testing.scenarios import SCENARIOS

    return {f"scenario:{name}": ("scenario", name, {}, None, {}) for name in sorted(SCENARIOS)}


def _case_subjects() -> dict[str, tuple]:
    from nsysdoc.testing.rule_cases import find_case_files, load_cases
    from nsysdoc.rules.evaluate import builtin_rules_dir

    out, seen = {}, set()
    for f in find_case_files(builtin_rules_dir()):
        for c in load_cases(f):
            if c.scenario and not c.args and not c.params and not c.step_marker:
                continue            # the same capture and rules as the bare scenario
            key = repr((c.scenario, sorted(c.args.items()), c.capture, c.step_marker,
                        (c.rule, sorted(c.params.items())) if c.params else None))
            if key in seen:
                continue
            seen.add(key)
            out[f"case:{c.id}"] = ("case", c, None, None, None)
    return out


def _trace_subjects() -> dict[str, tuple]:
    if not SHARED_TRACES.is_dir():
        return {}
    files = sorted(p for p in SHARED_TRACES.rglob("*") if p.is_file() and p.name.endswith((".sqlite", ".json.gz")))
    return {f"trace:{p.relative_to(SHARED_TRACES)}": ("trace", p, None, None, None) for p in files}


SUBJECTS = {**_scenario_subjects(), **_case_subjects(), **_trace_subjects()}
IDS = sorted(SUBJECTS)
#: issue 49: the real traces' subjects carry the ``real`` marker
PARAMS = [pytest.param(s, marks=pytest.mark.real) if s.startswith("trace:") else s for s in IDS]
_RESULTS: dict[str, dict | None] = {}


def _rules_with(rule: str | None = None, params: dict | None = None):
    from nsysdoc.rules import load_rules
    from nsysdoc.rules.evaluate import RuleSet

    rs = load_rules()
    if rule and params:
        rs = RuleSet(rules=rs.rules, param_values={**rs.param_values, rule: {**rs.param_values.get(rule, {}), **params}})
    return rs


def result_of(sid: str) -> dict | None:
    """The full report JSON (analysis, findings of the built-in rules, verdict); None when the capture
    cannot be diagnosed at all (an empty capture: its one-line error is tested elsewhere)."""
    if sid in _RESULTS:
        return _RESULTS[sid]
    from nsysdoc.analysis import analyze
    from nsysdoc.errors import EmptyCaptureError
    from nsysdoc.rules import apply_rules
    from nsysdoc.trace import load_trace

    kind, what = SUBJECTS[sid][:2]
    if kind == "trace":
        try:
            res = _conftest.diagnose_path(what)
        except EmptyCaptureError:
            res = None
    else:
        from nsysdoc.testing.rule_cases import build_capture
        from nsysdoc.testing.scenarios import SCENARIOS

        step_marker, rule, params = None, None, None
        if kind == "scenario":
            cap = SCENARIOS[what]()
        else:
            c = what
            cap = SCENARIOS[c.scenario](**c.args) if c.scenario else build_capture(c.capture, c.id)
            step_marker, rule, params = c.step_marker, c.rule, c.params
        with tempfile.TemporaryDirectory() as tmp:
            path = cap.write(Path(tmp) / "capture.sqlite")
            res = apply_rules(analyze(load_trace(path, cache=False), step_pattern=step_marker).to_dict(),
                              _rules_with(rule, params))
    _RESULTS[sid] = res
    return res


def _get(sid: str) -> dict:
    kind, what = SUBJECTS[sid][:2]
    if kind == "trace" and not Path(what).exists():
        pytest.skip(_conftest.SHARED_SKIP)
    r = result_of(sid)
    if r is None:
        pytest.skip("not diagnosable (empty capture)")
    return r


class Failures(list):
    def __init__(self, sid: str) -> None:
        super().__init__()
        self.sid = sid

    def fail_if_any(self) -> None:
        if self:
            pytest.fail(f"{self.sid}: {len(self)} contradiction(s):\n  - " + "\n  - ".join(self), pytrace=False)


# ------------------------------------------------------------------------------------------------
# the tests
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sid", PARAMS, ids=IDS)
def test_every_message_agrees_with_its_numbers(sid):
    r = _get(sid)
    out = Failures(sid)
    for f in r.get("findings") or []:
        def bad(text, f=f):
            out.append(f"{f['rule']} ({f.get('severity')}, impact {f.get('impact_ms')} ms / {f.get('impact_pct')} %): {text}")
        generic_claims(r, f, bad)
        rule_claims(r, f, bad)
    out.fail_if_any()


def _rank_key(f: dict, judgeable: bool = True):
    """The documented order (issue 44, glossary "Severity and impact", "Findings order"): by
    severity; within a severity, when the window can be judged, steady-state findings before
    framing ones (one-time set-up); then the largest impact, unknown impact last — for a finding with
    a what-if (issue 48) and a cost per step, the impact scaled by what its fix saves per step over
    its cost per step."""
    imp = f.get("impact_ms")
    w = f.get("what_if") or {}
    if imp is not None and w.get("saved_ms_per_step") is not None and (f.get("impact_ms_per_step") or 0) > 0:
        imp = imp * max(w["saved_ms_per_step"], 0) / f["impact_ms_per_step"]
    framing = judgeable and f.get("phase") == "framing"
    return (-SEV.get(f.get("severity"), -1), 1 if framing else 0) + ((0, -imp) if imp is not None else (1, 0))


def _main(findings: list, judgeable: bool):
    """The main bottleneck the glossary ("How the verdict is chosen") names, worked out here: the
    first finding of that order at warning+, with a cost of at least 5% of what it is measured over;
    a framing finding only when nothing steady reaches warning+ (or the window cannot be judged)."""
    costly = [f for f in sorted(findings, key=lambda f: _rank_key(f, judgeable))
              if f.get("severity") in ("warning", "critical") and (f.get("impact_ms") or 0) > 0]
    # any steady-state finding at warning+ (with a cost or not); capture problems are not one
    steady = any(f.get("phase") != "framing" and f.get("category") != "capture"
                 and f.get("severity") in ("warning", "critical") for f in findings)
    for f in costly:
        if judgeable and f.get("phase") == "framing" and steady:
            continue
        if f.get("impact_pct") is not None and f["impact_pct"] < 5:
            continue
        return f
    return None


@pytest.mark.parametrize("sid", PARAMS, ids=IDS)
def test_verdict_agrees_with_the_findings(sid):
    """The verdict and the findings list rank the same way, and the verdict's second line never
    names a bound other than its headline ('Main bottleneck: nccl-exposed' then 'Compute-bound')."""
    r = _get(sid)
    out = Failures(sid)
    v = r.get("verdict") or {}
    findings = r.get("findings") or []
    # a steady state to judge: enough GPU work, in 10 GPU operations or more (glossary)
    ops = ((r.get("metrics") or {}).get("values") or {}).get("gpu_op_count")
    judgeable = (r.get("capture") or {}).get("enough_gpu_work") is not False and not (ops is not None and ops < 10)
    order = [f["rule"] for f in findings]
    ranked = [f["rule"] for f in sorted(findings, key=lambda f: _rank_key(f, judgeable))]
    if order != ranked:
        out.append(f"findings are listed {order}, by severity then impact they are {ranked}")
    main = _main([f for f in findings if f["rule"] not in ("capture-quality", "no-gpu-activity")], judgeable)
    status, head = v.get("status"), v.get("headline")
    if status == "bottleneck":
        if main is not None and v.get("rule") != main["rule"]:
            out.append(f"verdict names {v.get('rule')!r}, but the policy's main bottleneck is "
                       f"{main['rule']!r} ({main.get('impact_ms')} ms vs "
                       f"{next((f.get('impact_ms') for f in findings if f['rule'] == v.get('rule')), None)} ms)")
        if main is None:
            out.append(f"verdict names {v.get('rule')!r}, but no finding qualifies as the main bottleneck")
        top = next((f for f in findings if f["rule"] == v.get("rule")), None)
        if top is not None and v.get("impact_pct") is not None and top.get("impact_pct") is not None \
                and abs(v["impact_pct"] - top["impact_pct"]) > 1e-3:
            out.append(f"verdict impact_pct {v['impact_pct']}, its finding's {top['impact_pct']}")
        for m in re.finditer(r"\(" + NUM + r"%", v.get("sentence") or ""):
            if v.get("impact_pct") is not None and not Printed(m.group(1)).agrees(v["impact_pct"]):
                out.append(f"verdict sentence prints {m.group(1)}%, verdict impact_pct {v['impact_pct']}")
        # issue 48: "fixing it would take the median step from A to B" prints the finding's what-if
        m = re.search(r"from " + TIME + r" to " + TIME, v.get("sentence") or "")
        w = (top or {}).get("what_if") or {}
        if m and w:
            a_ms = float(m.group(1).replace(",", "")) * UNIT_MS[m.group(2)]
            b_ms = float(m.group(3).replace(",", "")) * UNIT_MS[m.group(4)]
            if not (Printed(m.group(1), m.group(2)).agrees(w["step_ms_before"])
                    and Printed(m.group(3), m.group(4)).agrees(w["step_ms_after"])):
                out.append(f"verdict says the median step goes from {a_ms} to {b_ms} ms, its what-if "
                           f"{w['step_ms_before']} -> {w['step_ms_after']}")
        elif w and (w.get("saved_ms_per_step") or 0) > 0:
            out.append(f"verdict's finding has a what-if ({w}) the sentence does not state")
        detail = v.get("detail") or ""
        named = {k for k, rx in BOUND_WORDS.items() if rx.search(detail)}
        wrong = named - ALLOWED_BOUND.get(head, set())
        if wrong:
            out.append(f"headline 'Main bottleneck: {head}' but the second line says "
                       f"{', '.join(sorted(w + '-bound' for w in wrong))}: {detail[:140]!r}")
    elif status == "bound":
        if main is not None:
            out.append(f"verdict 'bound' ({head}) although {main['rule']} qualifies as the main bottleneck")
    out.fail_if_any()


def _summaries(r: dict) -> tuple[str, str]:
    from nsysdoc.views.render import render_markdown, terminal_summary

    return render_markdown(r), terminal_summary(r)


@pytest.mark.parametrize("sid", PARAMS, ids=IDS)
def test_summaries_never_print_na(sid):
    """'n/a' disappears from the cards and the terminal summary (issue 28, item 8)."""
    md, term = _summaries(_get(sid))
    out = Failures(sid)
    for name, text in (("markdown", md), ("terminal", term)):
        for line in text.splitlines():
            if re.search(r"(?<![\w/])n/a(?![\w/])", line, re.I):
                out.append(f"{name} prints n/a: {line.strip()[:160]!r}")
    out.fail_if_any()


@pytest.mark.parametrize("sid", PARAMS, ids=IDS)
def test_no_cost_findings_are_not_listed_as_costs(sid):
    """A finding with no measurable cost says so plainly or is folded away: no summary line lists it
    with a cost of zero ('Host-device copies from pageable memory - 0.000 ms')."""
    md, term = _summaries(_get(sid))
    out = Failures(sid)
    zero = r"0(?:\.0+)? ms"
    for line in term.splitlines():
        if re.match(r"\s*\d+\. \[", line) and re.search(r" - " + zero + r"(/step)?\s*$", line):
            out.append(f"terminal lists a finding at zero cost: {line.strip()!r}")
    for line in md.splitlines():
        if re.match(r"\| \d+ \|", line) and re.search(r"\| " + zero + r" \|", line):
            out.append(f"markdown lists a finding at zero cost: {line.strip()[:160]!r}")
    out.fail_if_any()


@pytest.mark.parametrize("sid", PARAMS, ids=IDS)
def test_page_does_not_repeat_a_paragraph_three_times(sid):
    """'A no-GPU page does not repeat one paragraph three times': no sentence of 60 characters or
    more appears three times in the markdown page."""
    md, _ = _summaries(_get(sid))
    counts: dict[str, int] = {}
    # the verdict and the findings' messages (a finding's how-to-verify/what-to-try/where bullets are
    # its own boilerplate, not the page's paragraphs)
    for para in md.split("\n\n"):
        if para.lstrip().startswith(("- ", "|", "#")):
            continue
        for sent in re.split(r"(?<=[.;:])\s+", para.strip()):
            s = sent.strip()
            if len(s) >= 60 and not s.startswith("|"):
                counts[s] = counts.get(s, 0) + 1
    rep = {s: n for s, n in counts.items() if n >= 3}
    assert not rep, f"{sid}: repeated {max(rep.values())} times: " + "; ".join(f"{n}x {s[:100]!r}" for s, n in rep.items())


def test_subjects_cover_scenarios_cases_and_traces():
    kinds = {SUBJECTS[s][0] for s in SUBJECTS}
    assert {"scenario", "case"} <= kinds
    if SHARED_TRACES.is_dir():
        assert "trace" in kinds
