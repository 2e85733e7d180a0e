"""Rule test cases: ``<rule-id>.cases.yaml`` beside each rule, run by pytest and ``nsysdoc rules test``.

A cases file::

    rule: host-sync
    cases:
      - name: fires_on_scattered_item_syncs
        scenario: sync_storm            # a named scenario (nsysdoc.testing.scenarios)
        args: {steps: 3}
        expect: {fires: true, severity: critical}
      - name: quiet_with_one_loss_item_per_step
        capture:                        # or an inline capture, played through the fixture builder
          processes:
            - pid: 1
              do:
                - repeat: 5
                  do:
                    - range: "ProfilerStep#{i}"
                      do:
                        - launch: {name: gemm_kernel, us: 2000}
                        - item: {}
        params: {min_idle_pct: 5}       # parameter overrides for this case
        expect: {fires: false}

``expect`` keys: ``fires`` (bool), ``status`` (fired / passed / skipped / disabled / broken), ``severity``,
``message_contains``, ``impact_ms_min``, ``impact_ms_max``, ``impact_ms_per_step_min``,
``impact_ms_per_step_max``. Inline actions are the methods of
:class:`nsysdoc.testing.Thread` (``launch``, ``nccl``, ``memcpy``, ``memset``, ``cpu``, ``os_call``,
``item``, ``sync_stream``, ``sync_device``, ``sync_event``, ``wait_event``, ``at``, ``mark``) with
their keyword arguments, plus ``range`` (with ``do``) and ``repeat`` (with ``do``; ``{i}`` in range
texts is the repeat index). An inline capture may also give ``gpu: {name, sm_count,
compute_capability}`` (the GPU every device is; default an H100: 132 SMs, 9.0) and ``format: kineto``
(play it as a PyTorch Profiler trace instead of an nsys export).

Limits (one-line refusal, exit 2): an inline capture plays at most :data:`MAX_ACTIONS` actions in
all (each ``repeat`` multiplies its body; a ``range`` counts as one) and nests ``repeat`` at most
:data:`MAX_REPEAT_DEPTH` deep (``range``/``repeat`` together at most :data:`MAX_NESTING`); a
``repeat`` count is a whole number >= 0. They are checked before anything is built, so a cases
file cannot ask for a billion launches.
"""
from __future__ import annotations

import inspect
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import RuleError
from ..severity import SEVERITIES
from ..rules.evaluate import RuleSet, evaluate
from ..rules.spec import load_yaml, validate

#: the most actions an inline capture plays (repeats multiplied out)
MAX_ACTIONS = 1_000_000
#: the deepest ``repeat`` inside ``repeat``; and ``range``/``repeat`` nesting of any kind
MAX_REPEAT_DEPTH = 8
MAX_NESTING = 64
ACTIONS = ("launch", "nccl", "memcpy", "memset", "cpu", "os_call", "item", "sync_stream", "sync_device",
           "sync_event", "wait_event", "at", "mark", "api", "malloc", "free")
EXPECT_KEYS = {"fires": {"type": "boolean"}, "status": {"enum": ["fired", "passed", "skipped", "disabled", "broken"]},
               "severity": {"enum": list(SEVERITIES)}, "message_contains": {"type": "string"},
               "impact_ms_min": {"type": "number"}, "impact_ms_max": {"type": "number"},
               "impact_ms_per_step_min": {"type": "number"}, "impact_ms_per_step_max": {"type": "number"}}
CASES_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["rule", "cases"],
    "properties": {
        "rule": {"type": "string"},
        "cases": {"type": "array", "minItems": 1, "items": {
            "type": "object", "additionalProperties": False, "required": ["name", "expect"],
            "properties": {
                "name": {"type": "string", "pattern": r"^[a-z0-9_]+$"},
                "scenario": {"type": "string"}, "args": {"type": "object"},
                "capture": {"type": "object"}, "params": {"type": "object"},
                "step_marker": {"type": "string"},
                "expect": {"type": "object", "additionalProperties": False, "minProperties": 1,
                           "properties": EXPECT_KEYS},
            }}},
    },
}


@dataclass
class Case:
    rule: str
    name: str
    path: Path
    line: int
    scenario: str | None = None
    args: dict = field(default_factory=dict)
    capture: dict | None = None
    params: dict = field(default_factory=dict)
    step_marker: str | None = None
    expect: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.rule}::{self.name}"


@dataclass
class CaseResult:
    case: Case
    ok: bool
    detail: str
    status: dict | None = None
    finding: dict | None = None


def load_cases(path: Path) -> list[Case]:
    data, lines = load_yaml(path)
    errs = validate(data, CASES_SCHEMA)
    if errs:
        kp, msg = errs[0]
        line = lines.get(kp) or lines.get(kp[:2]) or lines.get(kp[:1]) or 1
        raise RuleError(f"{path}:{line}: {'.'.join(map(str, kp)) or '(top)'}: {msg}")
    out = []
    for i, c in enumerate(data["cases"]):
        if ("scenario" in c) == ("capture" in c):
            raise RuleError(f"{path}:{lines.get(('cases', i), 1)}: cases.{i}: give exactly one of 'scenario' or 'capture'")
        out.append(Case(rule=data["rule"], name=c["name"], path=path, line=lines.get(("cases", i), 1),
                        scenario=c.get("scenario"), args=c.get("args") or {}, capture=c.get("capture"),
                        params=c.get("params") or {}, step_marker=c.get("step_marker"), expect=c["expect"]))
    from collections import Counter

    dup = {n for n, k in Counter(c.name for c in out).items() if k > 1}
    if dup:
        raise RuleError(f"{path}: duplicate case name(s): {', '.join(sorted(dup))}")
    return out


@dataclass
class FolderCheck:
    """What ``nsysdoc rules check`` finds in one folder (:func:`check_folder`)."""

    folder: Path
    rules: list
    case_count: int
    #: rules of the folder that no cases file tests
    untested: list = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        return [f"{r.path}: no test cases for {r.id} (add {r.id}.cases.yaml)" for r in self.untested]


def check_folder(folder: Path, known_ids=()) -> FolderCheck:
    """Validate a rules folder without running anything: every rule file, every cases file, and
    that each case names a rule of the folder or of ``known_ids`` (the built-in ids). Each file
    is read once, so the time is linear in the number of rules and cases. Raises RuleError (one
    line) on the first problem."""
    from ..rules.evaluate import load_dir

    folder = Path(folder)
    rules = load_dir(folder, str(folder))
    ids = {r.id for r in rules} | set(known_ids)
    tested: set[str] = set()
    n = 0
    for f in find_case_files(folder):
        for c in load_cases(f):
            if c.rule not in ids:
                raise RuleError(f"{f}:{c.line}: cases for unknown rule {_short(c.rule)}")
            tested.add(c.rule)
            n += 1
    return FolderCheck(folder, rules, n, [r for r in rules if r.id not in tested])


def find_case_files(folder: Path) -> list[Path]:
    from ..rules.evaluate import check_inside

    files = sorted(list(Path(folder).glob("*.cases.yaml")) + list(Path(folder).glob("*.cases.yml")))
    for f in files:
        check_inside(folder, f)  # a symlink out of the folder is refused, never read
    return files


# --- inline captures -----------------------------------------------------------------------------
def build_capture(spec: dict, where: str):
    """Play an inline capture description through the fixture builder."""
    from . import Capture

    opts = {k: spec[k] for k in ("variant", "gpu_metrics_hz") if k in spec}
    if "trace" in spec:
        opts["trace"] = tuple(spec["trace"])
    if spec.get("format", "nsys") not in ("nsys", "kineto"):
        raise RuleError(f"{where}.format: nsys or kineto")
    gpu = spec.get("gpu")  # {name, sm_count, compute_capability: "8.6"}: TARGET_INFO_GPU of every device
    if gpu is not None:
        if not isinstance(gpu, dict) or set(gpu) - {"name", "sm_count", "compute_capability"}:
            raise RuleError(f"{where}.gpu: a mapping of name, sm_count and compute_capability (e.g. \"8.6\")")
        try:
            if "sm_count" in gpu:
                opts["sm_count"] = None if gpu["sm_count"] is None else int(gpu["sm_count"])
            if "compute_capability" in gpu:
                major, _, minor = str(gpu["compute_capability"]).partition(".")
                opts["compute_capability"] = (int(major), int(minor or 0))
        except ValueError:
            raise RuleError(f"{where}.gpu: sm_count is a number and compute_capability major.minor") from None
    procs = spec.get("processes") or []
    if not isinstance(procs, list) or not all(isinstance(p, dict) for p in procs):
        raise RuleError(f"{where}.processes: a list of mappings (pid, name, device, do, threads)")
    total = 0
    for pi, p in enumerate(procs):
        threads = p.get("threads") or []
        if not isinstance(threads, list) or not all(isinstance(th, dict) for th in threads):
            raise RuleError(f"{where}.processes[{pi}].threads: a list of mappings (tid, do)")
        for th in [p, *threads]:
            total += _count(th.get("do") or [], f"{where}.processes[{pi}]", 0, 0)
            if total > MAX_ACTIONS:
                raise RuleError(f"{where}.processes[{pi}]: the capture would play more than {MAX_ACTIONS:,} actions "
                                "(repeats multiplied out); a rule case needs a few hundred")
    cap = Capture(**opts)
    if gpu is not None and "name" in gpu:
        cap.gpu_names = {0: str(gpu["name"])}
    for pi, p in enumerate(spec.get("processes") or []):
        proc = cap.process(pid=int(p.get("pid", 1000 + pi)), name=str(p.get("name", "python")),
                           device=int(p.get("device", 0)))
        threads = [{"tid": None, "do": p.get("do") or []}] + list(p.get("threads") or [])
        for th in threads:
            t = proc.thread(tid=th.get("tid"))
            _run(t, th.get("do") or [], f"{where}.processes[{pi}]", {})
    return cap


def _count(actions, where: str, repeats: int, depth: int) -> int:
    """How many actions ``actions`` plays (repeats multiplied out); refuses a bad ``repeat``,
    nesting past the limits, or more than :data:`MAX_ACTIONS` (stops counting there)."""
    if not isinstance(actions, list):
        raise RuleError(f"{where}.do: a list of actions")
    if depth > MAX_NESTING:
        raise RuleError(f"{where}: range/repeat nested more than {MAX_NESTING} deep")
    n = 0
    for ai, act in enumerate(actions):
        here = f"{where}.do[{ai}]"
        if isinstance(act, dict) and "repeat" in act:
            k = act["repeat"]
            if not isinstance(k, int) or isinstance(k, bool) or k < 0:
                raise RuleError(f"{here}.repeat: a whole number >= 0, got {str(k)[:40]}")
            if repeats + 1 > MAX_REPEAT_DEPTH:
                raise RuleError(f"{here}: repeat nested more than {MAX_REPEAT_DEPTH} deep")
            body = _count(act.get("do") or [], here, repeats + 1, depth + 1)
            n += k * body
        elif isinstance(act, dict) and "range" in act:
            n += 1 + _count(act.get("do") or [], here, repeats, depth + 1)
        else:
            n += 1
        if n > MAX_ACTIONS:
            raise RuleError(f"{here}: the capture would play more than {MAX_ACTIONS:,} actions "
                            "(repeats multiplied out); a rule case needs a few hundred")
    return n


def _run(t, actions: list, where: str, ctx: dict) -> None:
    for ai, act in enumerate(actions):
        here = f"{where}.do[{ai}]"
        if not isinstance(act, dict) or not act:
            raise RuleError(f"{here}: an action is a mapping such as {{launch: {{name: k, us: 10}}}}")
        if "repeat" in act:  # a whole number, within the limits: checked by _count first
            for i in range(act["repeat"]):
                _run(t, act.get("do") or [], here, {**ctx, "i": i})
            continue
        if "range" in act:
            text = str(act["range"]).replace("{i}", str(ctx.get("i", 0)))
            with t.range(text, domain=act.get("domain")):
                _run(t, act.get("do") or [], here, ctx)
            continue
        if len(act) != 1:
            raise RuleError(f"{here}: one action per item, got {sorted(act)}")
        (name, kwargs), = act.items()
        if name not in ACTIONS:
            import difflib

            close = difflib.get_close_matches(name, ACTIONS, n=1)
            raise RuleError(f"{here}: unknown action {name!r}" + (f"; did you mean {close[0]!r}?" if close else ""))
        kwargs = kwargs or {}
        if not isinstance(kwargs, dict):
            raise RuleError(f"{here}: {name} takes a mapping of arguments")
        method = getattr(t, name)
        params = inspect.signature(method).parameters
        bad = [k for k in kwargs if k not in params]
        if bad:
            raise RuleError(f"{here}: {name} has no argument {bad[0]!r} (arguments: {', '.join(params)})")
        method(**kwargs)


# --- scenarios under the action cap -----------------------------------------------------------------
#: what an inline capture's actions do, counted the same way in a scenario: the thread methods
#: that record something (``range`` is ``push``), each call one action
_COUNTED = (*ACTIONS, "push", "op", "frame", "module", "native", "start_end_range")
#: a capture that cannot be counted as it plays (a scenario that makes its capture elsewhere) is
#: checked afterwards: at most this many recorded rows per allowed action
_ROWS_PER_ACTION = 3


class _TooManyActions(BaseException):  # not caught by a scenario's own ``except Exception``
    pass


def _counting_capture_class():
    """A :class:`nsysdoc.testing.Capture` whose threads count their actions and stop the play at
    more than :data:`MAX_ACTIONS` (read when the capture is made), before memory runs out."""
    from .builder import Capture

    class CountingCapture(Capture):
        def __post_init__(self) -> None:
            super().__post_init__()
            self._actions_left = MAX_ACTIONS

        def process(self, *args, **kwargs):
            proc = super().process(*args, **kwargs)
            make_thread = proc.thread
            cap = self

            def thread(*targs, **tkwargs):
                t = make_thread(*targs, **tkwargs)
                for name in _COUNTED:
                    method = getattr(t, name, None)
                    if callable(method):
                        setattr(t, name, _counted(cap, method))
                return t

            proc.thread = thread
            return proc

    return CountingCapture


def _counted(cap, method):
    def call(*args, **kwargs):
        cap._actions_left -= 1
        if cap._actions_left < 0:
            raise _TooManyActions
        return method(*args, **kwargs)

    return call


def _rows(cap) -> int:
    return sum(len(getattr(cap, k, ())) for k in ("_runtime", "_gpu", "_sync", "_nvtx", "_osrt", "_pyframes"))


def play_scenario(name: str, args: dict, where: str):
    """The named scenario's capture with ``args``, held to the inline captures' cap: unknown or
    missing arguments, values it cannot use (text for a number, a time too large to store) and
    more than :data:`MAX_ACTIONS` actions are refused in one line naming ``where``."""
    import types

    from .scenarios import SCENARIOS

    if name not in SCENARIOS:
        import difflib

        close = difflib.get_close_matches(name, list(SCENARIOS), n=1)
        raise RuleError(f"{where}: unknown scenario {_short(name)}" + (f"; did you mean {close[0]!r}?" if close else ""))
    fn = SCENARIOS[name]
    sig = inspect.signature(fn)
    bad = [k for k in args if k not in sig.parameters]
    if bad:
        import difflib

        close = difflib.get_close_matches(str(bad[0]), list(sig.parameters), n=1)
        raise RuleError(f"{where}: args: scenario {name} has no argument {_short(bad[0])}"
                        + (f"; did you mean {close[0]!r}?" if close else "")
                        + f" (arguments: {', '.join(sig.parameters) or 'none'})")
    # the scenario's own code, with its ``Capture`` counting: the cap holds while it plays
    counting = _counting_capture_class()
    play = types.FunctionType(fn.__code__, {**fn.__globals__, "Capture": counting}, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    play.__kwdefaults__ = fn.__kwdefaults__
    try:
        cap = play(**args)
    except _TooManyActions:
        cap = None
    except (TypeError, ValueError, OverflowError, ArithmeticError, RecursionError, MemoryError) as exc:
        raise RuleError(f"{where}: args: scenario {name} cannot use these arguments ({_problem(exc)})") from None
    if cap is None or (not isinstance(cap, counting) and _rows(cap) > _ROWS_PER_ACTION * MAX_ACTIONS):
        raise RuleError(f"{where}: args: scenario {name} would play more than {MAX_ACTIONS:,} actions with these "
                        "arguments (the cap of an inline capture); a rule case needs a few hundred")
    return cap


def _short(value, n: int = 40) -> str:
    r = repr(value)
    return r if len(r) <= n else r[: n - 3] + "..."


def _problem(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:120]}"


# --- running ---------------------------------------------------------------------------------------
#: what building, writing or analysing a case's capture raises on values no capture can hold (a
#: time beyond 64 bits, text where a number goes): the case is refused in one line, never a traceback
_BUILD_ERRORS = (TypeError, ValueError, OverflowError, ArithmeticError, KeyError, IndexError, RecursionError)


def run_case(case: Case, rs: RuleSet, workdir: Path | None = None) -> CaseResult:
    from ..analysis import analyze
    from ..errors import NsysdocError
    from ..trace import load_trace

    where = f"{case.path}:{case.line}"
    if case.scenario is not None:
        cap = play_scenario(case.scenario, case.args, where)
    else:
        try:
            cap = build_capture(case.capture, f"{where}: capture")
        except _BUILD_ERRORS as exc:
            raise RuleError(f"{where}: capture: cannot play it ({_problem(exc)})") from None
    rule = rs.by_id(case.rule)
    for p in case.params:
        if p not in rule.params:
            raise RuleError(f"{where}: rule {case.rule!r} has no parameter {_short(p)}")
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        try:
            if case.capture is not None and case.capture.get("format") == "kineto":
                path = cap.write_kineto(Path(tmp) / "case.pt.trace.json")
            else:
                path = cap.write(Path(tmp) / "case.sqlite")
        except _BUILD_ERRORS as exc:
            raise RuleError(f"{where}: the case's capture cannot be written ({_problem(exc)}); check its times "
                            "and sizes") from None
        try:
            result = analyze(load_trace(path, cache=False), step_pattern=case.step_marker).to_dict()
        except NsysdocError as exc:
            raise RuleError(f"{where}: {exc.message}", exc.hint) from None
        except _BUILD_ERRORS as exc:
            raise RuleError(f"{where}: the case's capture cannot be analysed ({_problem(exc)}); check its times "
                            "and sizes") from None
    one = RuleSet(rules=[rule], param_values={rule.id: {**rs.param_values.get(rule.id, {}), **case.params}})
    findings, statuses = evaluate(one, result)
    status = statuses[0]
    finding = findings[0] if findings else None
    problems = []
    exp = case.expect
    if "fires" in exp and (status["status"] == "fired") != exp["fires"]:
        problems.append(f"expected it to {'fire' if exp['fires'] else 'stay quiet'}, got {status['status']}"
                        + (f" ({status['reason']})" if status.get("reason") else ""))
    if "status" in exp and status["status"] != exp["status"]:
        problems.append(f"expected status {exp['status']}, got {status['status']}"
                        + (f" ({status['reason']})" if status.get("reason") else ""))
    if finding is not None:
        if "severity" in exp and finding["severity"] != exp["severity"]:
            problems.append(f"expected severity {exp['severity']}, got {finding['severity']}")
        if "message_contains" in exp and exp["message_contains"] not in finding["message"]:
            problems.append(f"message lacks {exp['message_contains']!r}: {finding['message']}")
        imp = finding["impact_ms"]
        if "impact_ms_min" in exp and (imp is None or imp < exp["impact_ms_min"]):
            problems.append(f"impact_ms {imp} < {exp['impact_ms_min']}")
        if "impact_ms_max" in exp and (imp is None or imp > exp["impact_ms_max"]):
            problems.append(f"impact_ms {imp} > {exp['impact_ms_max']}")
        per = finding.get("impact_ms_per_step")
        if "impact_ms_per_step_min" in exp and (per is None or per < exp["impact_ms_per_step_min"]):
            problems.append(f"impact_ms_per_step {per} < {exp['impact_ms_per_step_min']}")
        if "impact_ms_per_step_max" in exp and (per is None or per > exp["impact_ms_per_step_max"]):
            problems.append(f"impact_ms_per_step {per} > {exp['impact_ms_per_step_max']}")
    elif any(k in exp for k in ("severity", "message_contains", "impact_ms_min", "impact_ms_max",
                                "impact_ms_per_step_min", "impact_ms_per_step_max")):
        problems.append("expected a finding to check, got none")
    return CaseResult(case, not problems, "; ".join(problems) or "ok", status, finding)


def run_folder(folder: Path, rs: RuleSet) -> list[CaseResult]:
    """Run every cases file in ``folder`` against ``rs`` (which must contain the rules)."""
    results = []
    files = find_case_files(folder)
    if not files:
        raise RuleError(f"{folder}: no *.cases.yaml files")
    for f in files:
        for case in load_cases(f):
            results.append(run_case(case, rs))
    return results


__all__ = ["Case", "CaseResult", "FolderCheck", "check_folder", "load_cases", "find_case_files", "run_case",
           "run_folder", "build_capture", "play_scenario"]
