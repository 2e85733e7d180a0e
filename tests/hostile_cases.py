"""Hostile inputs for nsysdoc: a deterministic case generator shared by the pytest family
(``tests/test_hostile_inputs.py``) and the sweep (``benchmarks/hostile_sweep.py``).

A :class:`Case` says how to build its input files in an empty folder (``build(tmp) -> Setup``),
what to run (``Setup.argv``: the arguments after ``python -m nsysdoc``) and what is expected
(``Case.expect`` plus an optional ``Setup.check`` for numbers and new contracts). Every case runs
nsysdoc as a subprocess:

* with a wall-clock timeout (a hang is a failure; the whole process group is killed);
* with a finite address-space cap (``RLIMIT_AS``, :data:`MEM_CAP_BYTES`, default 3 GiB; a normal
  report needs well under 1 GiB of virtual memory, pyarrow included). The cap is set by a tiny
  exec launcher (``python -c <set rlimit; execv>``) rather than ``preexec_fn``, because the cases
  run from a thread pool and ``preexec_fn`` is not fork-safe with threads; the effect is the same;
* with an isolated ``NSYSDOC_CACHE_DIR`` and no other ``NSYSDOC_*`` variable (no ``NSYSDOC_DEBUG``);
* with every input file (capture, its ``-wal``/``-journal`` sidecars, rule files, config) hashed
  (sha256) before and after: any change is a failure.

Generic expectations (``Case.expect``):

``refusal``   exit 2; stderr is exactly one ``nsysdoc: error:`` line, optionally followed by one
              ``nsysdoc: hint:`` line; no traceback, no "internal error".
``report``    exit 0 or 1; no traceback / "internal error"; the output file parses; ``check``.
``finish``    finishes within the timeout without a traceback / "internal error" (any exit code).
``either``    a clean refusal or a report (random damage: both are acceptable answers).
``success``   exit 0 (the ``cache`` sub-commands).

Issue item numbers (1-13) are recorded per case (``Case.item``; 0 = control case that must pass
today and proves the harness and the baseline captures are sound). Issue 30's cases carry
``Case.item = 30`` and names ``h30_*`` (their blocks are at the end of the case definitions).
"""
from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import os
import random
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the sweep imports this file from benchmarks/
    sys.path.insert(0, str(ROOT))

#: Address-space cap of every nsysdoc subprocess (override: NSYSDOC_HOSTILE_MEM_GB).
MEM_CAP_BYTES = int(float(os.environ.get("NSYSDOC_HOSTILE_MEM_GB", "3")) * (1 << 30))
DEFAULT_TIMEOUT = 30.0
#: "fast" contracts (alias bombs, never-ending expressions, huge format specs)
FAST_SECONDS = 10.0
#: peak RSS allowed where the contract says "bounded memory"
BOUNDED_RSS_MB = 1024.0

REFUSAL, REPORT, FINISH, EITHER, SUCCESS = "refusal", "report", "finish", "either", "success"

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
NVTX = "NVTX_EVENTS"
SECRET_MARK = "SECRETHASH"
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1

_LAUNCHER = (  # set the cap, run nsysdoc as a child, report its own peak RSS (a direct exec would
    # inherit the parent's RSS high-water mark through vfork), pass its exit status on
    "import os,resource,signal,sys\n"
    "cap=int(sys.argv[1])\n"
    "resource.setrlimit(resource.RLIMIT_AS,(cap,cap))\n"
    "pid=os.fork()\n"
    "if pid==0:\n"
    "    os.execv(sys.argv[3],sys.argv[3:])\n"
    "_,st,ru=os.wait4(pid,0)\n"
    "open(sys.argv[2],'w').write(str(ru.ru_maxrss))\n"
    "code=os.waitstatus_to_exitcode(st)\n"
    "if code<0:\n"
    "    signal.signal(-code,signal.SIG_DFL)\n"
    "    os.kill(os.getpid(),-code)\n"
    "sys.exit(code)\n"
)


class HarnessError(Exception):
    """The test itself went wrong (damage did not land, a baseline report failed ...)."""


class Skip(Exception):
    """This case cannot run here (reason in the message)."""


# ---------------------------------------------------------------------------------------------
# running nsysdoc
# ---------------------------------------------------------------------------------------------
@dataclass
class Run:
    argv: list[str]
    rc: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    max_rss_mb: float | None

    def describe(self) -> str:
        tail = "\n".join(self.stderr.strip().splitlines()[-12:])
        return (f"argv: {' '.join(self.argv)}\nexit: {self.rc}  time: {self.seconds:.1f}s  "
                f"peak RSS: {self.max_rss_mb or 0:.0f} MB  timed out: {self.timed_out}\n"
                f"stderr (tail):\n{tail[:3000]}")


def sandbox_env(cache_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without any NSYSDOC_* variable, plus an isolated cache folder and
    this checkout on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSYSDOC_")}
    env["NSYSDOC_CACHE_DIR"] = str(cache_dir)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


def _peak_rss_kb_of_children(pid: int) -> int | None:
    """VmHWM of the launcher's child (nsysdoc) just before it is killed at the timeout."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        best = None
        for k in kids:
            for ln in Path(f"/proc/{k}/status").read_text().splitlines():
                if ln.startswith("VmHWM:"):
                    best = max(best or 0, int(ln.split()[1]))
        return best
    except (OSError, ValueError):
        return None


def run_nsysdoc(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float = DEFAULT_TIMEOUT,
                wrap: list[str] | None = None) -> Run:
    """``python -m nsysdoc ARGS`` under the memory cap, with a timeout; peak RSS via wait4."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", prefix="nsysdoc-rss-") as rss:
        os.chmod(rss.name, 0o666)  # writable after dropping privileges
        cmd = [*(wrap or []), sys.executable, "-c", _LAUNCHER, str(MEM_CAP_BYTES), rss.name, sys.executable, "-m",
               "nsysdoc", *map(str, args)]
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)
        timed_out, delay, hwm_kb = False, 0.005, None
        while True:
            pid, status = os.waitpid(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > timeout:
                timed_out = True
                hwm_kb = _peak_rss_kb_of_children(proc.pid)
                try:
                    os.killpg(proc.pid, 9)
                except ProcessLookupError:
                    pass
                pid, status = os.waitpid(proc.pid, 0)
                break
            time.sleep(delay)
            delay = min(delay * 1.5, 0.05)
        seconds = time.monotonic() - t0
        rc = os.waitstatus_to_exitcode(status)
        proc.returncode = rc  # reaped by wait4: keep Popen from waiting again
        try:  # children that outlived the main process (e.g. a stuck background thread's helper)
            os.killpg(proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
        text = rss.read().strip()
    max_rss = int(text) / 1024.0 if text.isdigit() else (hwm_kb / 1024.0 if hwm_kb else None)
    return Run(argv=list(map(str, args)), rc=None if timed_out else rc, stdout=stdout, stderr=stderr,
               seconds=seconds, timed_out=timed_out, max_rss_mb=max_rss)


# ---------------------------------------------------------------------------------------------
# captures (deterministic, built once per process, copied into each case folder)
# ---------------------------------------------------------------------------------------------
def _healthy():
    from nsysdoc.testing.scenarios import healthy_training

    return healthy_training(steps=3)  # kernels, copies, sync, NVTX steps, OS runtime, GPU_METRICS


KNOWN_KERNELS = 4 * 5  # _known(): 4 steps x 5 kernels, nothing else on the GPU


def _known():
    """Kernels only (no copies, no memsets): 4 steps x 5 kernels of 1.5..7.5 ms, one sync per step,
    plus a non-step NVTX range "data_loading" per step."""
    from nsysdoc.testing.builder import Capture

    cap = Capture()
    t = cap.process(pid=4600).thread()
    for i in range(4):
        with t.range(f"ProfilerStep#{i}"):
            with t.range("data_loading"):
                t.cpu(us=30)
            for k in range(5):
                t.cpu(us=20)
                t.launch(f"known_kernel_{k}", us=1500 * (k + 1))  # 90 ms of kernels: enough to judge
            t.sync_stream()
    return cap


REDOS_TEXT = "a" * 5000 + "!"


def _redos_nvtx():
    from nsysdoc.testing.builder import Capture

    cap = Capture()
    t = cap.process(pid=4700).thread()
    for i in range(3):
        with t.range(f"ProfilerStep#{i}"):
            with t.range(REDOS_TEXT):
                t.launch("gemm_kernel", us=500)
            t.sync_stream()
    return cap


BIDI_KERNEL = "evil_\u202etxt.exe_\u200bkernel"
BIDI_RANGE = "load_\u202egnp.batch\u200b"


def _bidi():
    from nsysdoc.testing.builder import Capture

    cap = Capture()
    t = cap.process(pid=4800).thread()
    for i in range(30):  # 60 ms of kernels: judgeable, so the verdict names the top kernel
        with t.range(f"ProfilerStep#{i}"):
            with t.range(BIDI_RANGE):
                t.cpu(us=50)
            t.launch(BIDI_KERNEL, us=2000)  # the dominant kernel: named in every summary
            t.launch("small_kernel", us=20)
            t.sync_stream()
    return cap


LONG_NAME = "void kernel_" + "X" * (1 << 20) + "(float*)"


def _long_name():
    from nsysdoc.testing.builder import Capture

    cap = Capture()
    t = cap.process(pid=4900).thread()
    for i in range(3):
        with t.range(f"ProfilerStep#{i}"):
            t.launch(LONG_NAME, us=1000)
            t.launch("short_kernel", us=50)
            t.sync_stream()
    return cap


BIG_STEPS = 100_000


def _big_steps():
    """100,000 ProfilerStep#N ranges with one 2 us kernel each (builder: ~2 s, ~16 MB)."""
    from nsysdoc.testing.builder import Capture

    cap = Capture()
    t = cap.process(pid=5000).thread()
    for i in range(BIG_STEPS):
        with t.range(f"ProfilerStep#{i}"):
            t.cpu(us=5)
            t.launch("tiny_kernel", us=2)
    return cap


def _lru(steps: int):
    def build():
        from nsysdoc.testing.scenarios import launch_bound_small_kernels

        return launch_bound_small_kernels(steps=steps, kernels=3000)  # ~0.5 MB of cache each
    return build


FIXTURES: dict[str, Callable[[], Any]] = {
    "healthy": _healthy, "known": _known, "redos_nvtx": _redos_nvtx, "bidi": _bidi, "long_name": _long_name,
    "big_steps": _big_steps, "lru_a": _lru(3), "lru_b": _lru(4), "lru_c": _lru(5),
}
_FIXTURE_DIR: Path | None = None
_FIXTURE_LOCK = threading.Lock()
_FIXTURE_LOCKS: dict[str, threading.Lock] = {}


def fixture_path(name: str) -> Path:
    """The fixture capture ``name`` (built on first use, once per process; never handed to nsysdoc
    directly: cases copy it)."""
    global _FIXTURE_DIR
    with _FIXTURE_LOCK:
        if _FIXTURE_DIR is None:
            _FIXTURE_DIR = Path(tempfile.mkdtemp(prefix="nsysdoc-hostile-fixtures-"))
            import atexit

            atexit.register(shutil.rmtree, _FIXTURE_DIR, True)
        lock = _FIXTURE_LOCKS.setdefault(name, threading.Lock())
    with lock:
        path = _FIXTURE_DIR / f"{name}.sqlite"
        if not path.exists():
            tmp = _FIXTURE_DIR / f".{name}.tmp.sqlite"
            FIXTURES[name]().write(tmp)
            os.replace(tmp, path)
        return path


def capture(name: str, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(fixture_path(name), dest)
    return dest


# ---------------------------------------------------------------------------------------------
# damaging captures (sqlite3; every helper checks that its damage landed)
# ---------------------------------------------------------------------------------------------
def _connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(str(path), isolation_level=None)
    con.text_factory = bytes  # never choke on the bytes we write ourselves
    return con


def execute(path: Path, sql: str, params: tuple = (), expect_rows: int | None = None) -> int:
    con = _connect(path)
    try:
        cur = con.execute(sql, params)
        n = cur.rowcount
    finally:
        con.close()
    if expect_rows is not None and n != expect_rows:
        raise HarnessError(f"damage did not land: {sql!r} changed {n} rows, expected {expect_rows}")
    return n


def query(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    con = _connect(path)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def count(path: Path, table: str = KERNEL) -> int:
    return query(path, f'SELECT COUNT(*) FROM "{table}"')[0][0]


def kernel_rowids(path: Path) -> list[int]:
    return [r[0] for r in query(path, f"SELECT rowid FROM {KERNEL} ORDER BY start, rowid")]


def rebuild_table(path: Path, table: str, edit: Callable[[str], str], columns: list[str] | None = None) -> None:
    """Re-create ``table`` with its CREATE statement passed through ``edit`` (e.g. drop a NOT NULL
    or a column) and copy the rows over (only ``columns``, when given)."""
    con = _connect(path)
    try:
        sql = con.execute("SELECT sql FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone()[0]
        sql = sql.decode() if isinstance(sql, bytes) else sql
        new_sql = edit(sql)
        if new_sql == sql:
            raise HarnessError(f"rebuild_table({table}): the edit changed nothing")
        tmp = f"{table}__hostile"
        con.execute("BEGIN")
        con.execute(re.sub(r"CREATE TABLE\s+\"?%s\"?" % re.escape(table), f'CREATE TABLE "{tmp}"', new_sql, count=1))
        cols = ", ".join(f'"{c}"' for c in columns) if columns else "*"
        con.execute(f'INSERT INTO "{tmp}" SELECT {cols} FROM "{table}"')
        con.execute(f'DROP TABLE "{table}"')
        con.execute(f'ALTER TABLE "{tmp}" RENAME TO "{table}"')
        con.execute("COMMIT")
        con.execute("VACUUM")
    finally:
        con.close()


def relax_not_null(path: Path, table: str, column: str) -> None:
    def edit(sql: str) -> str:
        return re.sub(r'("%s"\s+INTEGER)\s+NOT NULL(\s+PRIMARY KEY)?' % re.escape(column), r"\1", sql)
    rebuild_table(path, table, edit)


def drop_column(path: Path, table: str, column: str) -> None:
    con = _connect(path)
    try:
        cols = [r[1].decode() if isinstance(r[1], bytes) else r[1]
                for r in con.execute(f'PRAGMA table_info("{table}")')]
    finally:
        con.close()
    keep = [c for c in cols if c != column]

    def edit(sql: str) -> str:
        return re.sub(r'\s*"%s"[^,\n]*,' % re.escape(column), "", sql, count=1)
    rebuild_table(path, table, edit, keep)
    if column in [r[1] for r in query(path, f'PRAGMA table_info("{table}")')]:
        raise HarnessError(f"column {column} still in {table}")


# ---------------------------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------------------------
@dataclass
class Setup:
    argv: list[str]
    cwd: Path
    inputs: list[Path]                   # hashed before/after; folders: every file in them
    output: Path | None = None           # the report file to parse (by suffix)
    env: dict[str, str] = field(default_factory=dict)
    check: Callable[["Ctx"], list[str]] | None = None
    wrap: list[str] = field(default_factory=list)
    cleanup: Callable[[], None] | None = None


@dataclass
class Case:
    name: str
    item: int                            # issue item (1-13); 0 = control
    expect: str
    build: Callable[["Ctx"], Setup]
    doc: str = ""
    timeout: float = DEFAULT_TIMEOUT
    max_seconds: float | None = None
    max_rss_mb: float | None = None
    slow: bool = False
    new: bool = False                    # exercises functionality the issue asks for (NEW contract)


@dataclass
class Ctx:
    """What a case's build and check see: its folder, cache, and helpers to run nsysdoc."""

    case: Case
    tmp: Path
    run: Run | None = None
    setup: Setup | None = None
    text: str | None = None
    data: Any = None

    @property
    def cache(self) -> Path:
        return self.tmp / "cache"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return sandbox_env(self.cache, {**(self.setup.env if self.setup else {}), **(extra or {})})

    def nsysdoc(self, *args, cwd: Path | None = None, extra_env: dict[str, str] | None = None,
                timeout: float = 120.0) -> Run:
        return run_nsysdoc(list(args), cwd=cwd or self.tmp, env=self.env(extra_env), timeout=timeout)

    def prime(self, *args, extra_env: dict[str, str] | None = None) -> dict:
        """A preparatory run that must succeed (fills the cache ...)."""
        self._primes = getattr(self, "_primes", 0) + 1
        out = self.tmp / "prime" / f"prime{self._primes}.json"
        r = self.nsysdoc(*args, "-f", "json", "-o", out, extra_env=extra_env)
        if r.rc not in (0, 1) or not out.exists():
            raise HarnessError(f"preparatory run failed:\n{r.describe()}")
        return json.loads(out.read_text())

    def reference(self, capture_path: Path, *extra: str) -> dict:
        """``report --no-cache -f json`` of a capture (in its own cache folder); must succeed."""
        ref_dir = Path(tempfile.mkdtemp(prefix="ref-", dir=self.tmp))
        out = ref_dir / "ref.json"
        r = run_nsysdoc(["report", capture_path, "--no-cache", "-f", "json", "-o", out, *extra], cwd=ref_dir,
                        env=sandbox_env(ref_dir / "cache"), timeout=120)
        if r.rc not in (0, 1) or not out.exists():
            raise HarnessError(f"reference report of {capture_path} failed:\n{r.describe()}")
        return json.loads(out.read_text())


def _report(ctx: Ctx, cap: Path, *extra, fmt: str = "json", inputs: list[Path] | None = None,
            check=None, env=None) -> Setup:
    out = ctx.tmp / "out" / f"report.{fmt}"
    return Setup(argv=["report", str(cap), "-f", fmt, "-o", str(out), *map(str, extra)], cwd=ctx.tmp,
                 inputs=[cap, *(inputs or [])], output=out, check=check, env=env or {})


# -- checks ------------------------------------------------------------------------------------
def key_numbers(d: dict) -> dict:
    vals = d.get("metrics", {}).get("values", {})
    return {
        "summary.gpu_busy_pct": d["summary"].get("gpu_busy_pct"),
        "summary.kernel_count": d["summary"].get("kernel_count"),
        "metrics.kernels.count": d.get("metrics", {}).get("kernels", {}).get("count"),
        "values.compute_pct": vals.get("compute_pct"),
        "capture.device_count": d["capture"].get("device_count"),
        "capture.window.duration_ms": d["capture"]["window"].get("duration_ms"),
        "capture.gpu_activity": d["capture"].get("gpu_activity"),
    }


def compare_numbers(got: dict, want: dict, what: str = "reference") -> list[str]:
    problems = []
    a, b = key_numbers(got), key_numbers(want)
    for k in b:
        x, y = a[k], b[k]
        same = x == y or (isinstance(x, (int, float)) and isinstance(y, (int, float))
                          and not isinstance(x, bool) and abs(x - y) <= 1e-3 * max(1.0, abs(y)))
        if not same:
            problems.append(f"{k} = {x!r}, the {what} says {y!r}")
    return problems


def _table_is(table: Any, hint: str) -> bool:
    return hint.upper() in str(table).upper()


def dropped_problems(d: dict, hint: str, n: int | None) -> list[str]:
    """NEW contract: capture.dropped_rows = [{"table", "reason", "rows"}], bad rows counted there and
    mentioned in capture.warnings. ``n`` None: only the shape is checked."""
    dr = d.get("capture", {}).get("dropped_rows")
    if not isinstance(dr, list):
        return [f"capture.dropped_rows missing (got {dr!r}); NEW contract: a list of {{table, reason, rows}}"]
    problems = []
    for e in dr:
        if not (isinstance(e, dict) and {"table", "reason", "rows"} <= set(e) and isinstance(e["rows"], int)
                and e["reason"]):
            problems.append(f"malformed capture.dropped_rows entry {e!r}")
    if n is None:
        return problems
    got = sum(e.get("rows", 0) for e in dr if isinstance(e, dict) and _table_is(e.get("table"), hint)
              and isinstance(e.get("rows"), int))
    if got != n:
        problems.append(f"capture.dropped_rows counts {got} {hint} row(s), expected {n}: {dr!r}")
    if n:
        warnings = " ".join(map(str, d["capture"].get("warnings", []))).lower()
        if "row" not in warnings and "drop" not in warnings:
            problems.append(f"capture.warnings does not mention the dropped rows: {d['capture'].get('warnings')!r}")
    return problems


def check_dropped(hint: str, n: int | None):
    def check(ctx: Ctx) -> list[str]:
        return dropped_problems(ctx.data, hint, n)
    return check


def _builtin_rules_unaffected(ctx: Ctx, capture_path: Path) -> list[str]:
    ref = ctx.reference(capture_path)
    got_status = {r["rule"]: r["status"] for r in ctx.data.get("rules", []) if r.get("source") == "builtin"}
    want_status = {r["rule"]: r["status"] for r in ref.get("rules", [])}
    problems = []
    if got_status != want_status:
        problems.append(f"built-in rule statuses differ from a run without the team rule: {got_status} vs {want_status}")
    got_f = sorted(f["rule"] for f in ctx.data.get("findings", []) if f.get("source") == "builtin")
    want_f = sorted(f["rule"] for f in ref.get("findings", []))
    if got_f != want_f:
        problems.append(f"built-in findings {got_f}, expected {want_f}")
    return problems


def check_broken_rule(rule_id: str, finishing_ok: bool = False):
    """NEW contract: a rule whose evaluation would never end is reported ``broken`` with a reason;
    the built-in rules still run. With ``finishing_ok`` (a regex that RE2 answers in linear time)
    a correct ``passed``/``fired`` within the time limit is as good as ``broken``."""
    def check(ctx: Ctx) -> list[str]:
        mine = [r for r in ctx.data.get("rules", []) if r.get("rule") == rule_id]
        problems = []
        if not mine:
            problems.append(f"no status entry for rule {rule_id!r} in the report's 'rules' list")
        elif finishing_ok and mine[0].get("status") in ("passed", "fired"):
            pass
        elif mine[0].get("status") != "broken" or not mine[0].get("reason"):
            problems.append(f"rule {rule_id!r} status is {mine[0].get('status')!r} (reason {mine[0].get('reason')!r}); "
                            "NEW contract: 'broken' with a reason")
        return problems + _builtin_rules_unaffected(ctx, ctx.setup.inputs[0])
    return check


def check_equals_reference(ref_path: Path, hint: str | None = None, n: int | None = None):
    def check(ctx: Ctx) -> list[str]:
        problems = compare_numbers(ctx.data, ctx.reference(ref_path), "same capture with the bad rows deleted")
        if hint is not None:
            problems += dropped_problems(ctx.data, hint, n)
        return problems
    return check


def check_fresh_numbers(cap: Path):
    """The report equals a fresh --no-cache report of the capture's current content."""
    def check(ctx: Ctx) -> list[str]:
        return compare_numbers(ctx.data, ctx.reference(cap), "fresh --no-cache report")
    return check


def check_kernel_count(expected: int):
    def check(ctx: Ctx) -> list[str]:
        got = ctx.data["summary"].get("kernel_count")
        return [] if got == expected else [f"summary.kernel_count = {got}, sqlite3 reads {expected} committed kernel rows"]
    return check


def check_stderr_names_file_line(fname: str):
    def check(ctx: Ctx) -> list[str]:
        first = ctx.run.stderr.strip().splitlines()[:1]
        if ctx.run.rc == 2 and not _internal(ctx.run.stderr) and not (first and re.search(re.escape(fname) + r":\d+", first[0])):
            return [f"the error line does not name {fname}:LINE: {first}"]
        return []
    return check


def check_no_secret(ctx: Ctx) -> list[str]:
    if SECRET_MARK in ctx.run.stderr or SECRET_MARK in ctx.run.stdout:
        return ["the secret file's content was printed"]
    return []


# ---------------------------------------------------------------------------------------------
# case builders
# ---------------------------------------------------------------------------------------------
CASES: list[Case] = []


def case(name: str, item: int, expect: str, **kw):
    def deco(fn: Callable[[Ctx], Setup]) -> Callable[[Ctx], Setup]:
        kw.setdefault("doc", (fn.__doc__ or "").strip())
        CASES.append(Case(name=f"i{item:02d}_{name}", item=item, expect=expect, build=fn, **kw))
        return fn
    return deco


# -- 0: controls (must pass today; they prove the baseline and the harness) --------------------
@case("control_clean_report", 0, REPORT)
def _(ctx: Ctx) -> Setup:
    """A clean capture reports under the memory cap; kernel count equals sqlite3's."""
    cap = capture("known", ctx.tmp / "run.sqlite")
    kernels = check_kernel_count(count(cap))

    def check(c: Ctx) -> list[str]:
        busy = c.data["summary"]["gpu_busy_pct"]
        return kernels(c) + ([] if busy else [f"gpu_busy_pct {busy!r}: the known capture must be judgeable"])
    return _report(ctx, cap, check=check)


@case("control_team_rule", 0, REPORT)
def _(ctx: Ctx) -> Setup:
    """A benign team rule loads, fires, and the built-in rules are unaffected."""
    cap = capture("known", ctx.tmp / "run.sqlite")
    rules = _team_rule(ctx, "kernel_count > 0")

    def check(c: Ctx) -> list[str]:
        st = [r for r in c.data["rules"] if r["rule"] == "team-probe"]
        p = [] if st and st[0]["status"] == "fired" else [f"team rule status {st}"]
        return p + _builtin_rules_unaffected(c, cap)
    return _report(ctx, cap, "--rules", rules, inputs=[rules], check=check)


@case("control_rules_check", 0, FINISH)
def _(ctx: Ctx) -> Setup:
    """``rules check`` accepts a benign team rule (exit 0)."""
    rules = _team_rule(ctx, "kernel_count > 0")

    def check(c: Ctx) -> list[str]:
        return [] if c.run.rc == 0 else [f"exit {c.run.rc}"]
    return Setup(argv=["rules", "check", str(rules)], cwd=ctx.tmp, inputs=[rules], check=check)


@case("control_config", 0, REPORT)
def _(ctx: Ctx) -> Setup:
    """A benign auto-discovered nsysdoc.yaml is applied."""
    cap = capture("known", ctx.tmp / "run.sqlite")
    cfg = ctx.tmp / "nsysdoc.yaml"
    cfg.write_text("rules:\n  host-sync:\n    enabled: false\n")

    def check(c: Ctx) -> list[str]:
        st = [r["status"] for r in c.data["rules"] if r["rule"] == "host-sync"]
        return [] if st == ["disabled"] else [f"host-sync status {st}, config not applied"]
    return _report(ctx, cap, inputs=[cfg], check=check)


def _team_rule(ctx: Ctx, when: str, *, rule_id: str = "team-probe", message: str = "Kernels: {kernel_count}.",
               extra: str = "", folder: str = "rules") -> Path:
    d = ctx.tmp / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{rule_id}.yaml").write_text(
        f"id: {rule_id}\ntitle: Team probe\ncategory: gpu-utilization\nsummary: A team rule.\n"
        f"requires: [kernels]\n{extra}when: {json.dumps(when)}\nseverity: warning\n"
        f"message: {json.dumps(message)}\nverify: Look at it.\nfix: Fix it.\n", encoding="utf-8")
    return d


# -- 1: -o naming an input ---------------------------------------------------------------------
def _o_input(fmt: str | None, out_arg: Callable[[Ctx, Path], str]):
    def build(ctx: Ctx) -> Setup:
        cap = capture("known", ctx.tmp / "run.sqlite")
        (ctx.tmp / "sub").mkdir()
        argv = ["report", "run.sqlite", "-o", out_arg(ctx, cap)] + (["-f", fmt] if fmt else [])
        return Setup(argv=argv, cwd=ctx.tmp, inputs=[cap])
    return build


for _fmt in ("json", "html", "md", None):
    case(f"o_is_input_{_fmt or 'default'}", 1, REFUSAL,
         doc=f"report run.sqlite -o run.sqlite ({_fmt or 'default format'})")(_o_input(_fmt, lambda c, p: "run.sqlite"))
case("o_is_input_relative_spelling", 1, REFUSAL)(_o_input("json", lambda c, p: "./sub/../run.sqlite"))
case("o_is_input_absolute", 1, REFUSAL)(_o_input("json", lambda c, p: str(p)))


@case("o_is_symlink_to_input", 1, REFUSAL)
def _(ctx: Ctx) -> Setup:
    cap = capture("known", ctx.tmp / "run.sqlite")
    os.symlink("run.sqlite", ctx.tmp / "link.sqlite")
    return Setup(argv=["report", "run.sqlite", "-f", "json", "-o", "link.sqlite"], cwd=ctx.tmp, inputs=[cap])


@case("o_is_hardlink_to_input", 1, REFUSAL)
def _(ctx: Ctx) -> Setup:
    cap = capture("known", ctx.tmp / "run.sqlite")
    os.link(cap, ctx.tmp / "hard.sqlite")
    return Setup(argv=["report", "run.sqlite", "-f", "json", "-o", "hard.sqlite"], cwd=ctx.tmp, inputs=[cap])


@case("o_dir_output_name_is_second_input", 1, REFUSAL)
def _(ctx: Ctx) -> Setup:
    """report a.sqlite a.nsysdoc.json -o DIR -f json: a.sqlite's report would be DIR/a.nsysdoc.json,
    which is the second input (itself a capture)."""
    a = capture("known", ctx.tmp / "a.sqlite")
    b = capture("healthy", ctx.tmp / "a.nsysdoc.json")
    listing = sorted(p.name for p in ctx.tmp.iterdir())

    def check(c: Ctx) -> list[str]:  # refused before any work: no report written either
        new = sorted({p.name for p in c.tmp.iterdir()} - set(listing) - {"cache"})
        return [f"wrote {new} before refusing"] if new else []
    return Setup(argv=["report", "a.sqlite", "a.nsysdoc.json", "-f", "json", "-o", str(ctx.tmp)], cwd=ctx.tmp,
                 inputs=[a, b], check=check)


# -- 2: YAML alias bomb --------------------------------------------------------------------------
def alias_bomb(levels: int = 9, width: int = 9) -> str:
    names = "abcdefghijklmnopqrstuvwxyz"
    lines = [f"{names[0]}: &{names[0]} [" + ", ".join(['"lol"'] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"{names[i]}: &{names[i]} [" + ", ".join([f"*{names[i - 1]}"] * width) + "]")
    return "\n".join(lines) + "\n"


def _bomb_rule_dir(ctx: Ctx) -> Path:
    d = ctx.tmp / "rules"
    d.mkdir()
    (d / "bomb.yaml").write_text("id: bomb\n" + alias_bomb())
    return d


_BOMB = dict(timeout=15.0, max_seconds=FAST_SECONDS, max_rss_mb=BOUNDED_RSS_MB)


@case("alias_bomb_team_rule_report", 2, REFUSAL, **_BOMB)
def _(ctx: Ctx) -> Setup:
    cap = capture("known", ctx.tmp / "run.sqlite")
    rules = _bomb_rule_dir(ctx)
    return _report(ctx, cap, "--rules", rules, inputs=[rules])


@case("alias_bomb_rules_check", 2, REFUSAL, **_BOMB)
def _(ctx: Ctx) -> Setup:
    rules = _bomb_rule_dir(ctx)
    return Setup(argv=["rules", "check", str(rules)], cwd=ctx.tmp, inputs=[rules])


@case("alias_bomb_config_option", 2, REFUSAL, **_BOMB)
def _(ctx: Ctx) -> Setup:
    cap = capture("known", ctx.tmp / "run.sqlite")
    cfg = ctx.tmp / "bomb.yaml"
    cfg.write_text(alias_bomb())
    return _report(ctx, cap, "--config", cfg, inputs=[cfg])


@case("alias_bomb_autodiscovered_config", 2, REFUSAL, **_BOMB)
def _(ctx: Ctx) -> Setup:
    cap = capture("known", ctx.tmp / "run.sqlite")
    cfg = ctx.tmp / "nsysdoc.yaml"
    cfg.write_text(alias_bomb())
    return _report(ctx, cap, inputs=[cfg])


# -- 3: expressions that never finish ----------------------------------------------------------
ROUND_WHEN = "round(kernel_count, -1000000000) > 0"
REDOS_WHEN = "matches('" + "a" * 70 + "!', '(a+)+$')"
_FAST = dict(timeout=15.0, max_seconds=FAST_SECONDS)


for _label, _when in (("round_huge_ndigits", ROUND_WHEN), ("matches_redos", REDOS_WHEN)):
    def _mk_report(when: str):
        def build(ctx: Ctx) -> Setup:
            cap = capture("known", ctx.tmp / "run.sqlite")
            rules = _team_rule(ctx, when, rule_id="never-ends")
            return _report(ctx, cap, "--rules", rules, inputs=[rules],
                           check=check_broken_rule("never-ends", finishing_ok=when == REDOS_WHEN))
        return build

    def _mk_check(when: str):
        def build(ctx: Ctx) -> Setup:
            rules = _team_rule(ctx, when, rule_id="never-ends")

            def check(c: Ctx) -> list[str]:  # rejecting is fine, but then with one line naming the file
                if c.run.rc == 2:
                    lines = c.run.stderr.strip().splitlines()
                    if not (lines and lines[0].startswith("nsysdoc: error:") and "never-ends.yaml" in lines[0]
                            and len(lines) <= 2):
                        return [f"rejected, but not with one error line naming the file: {lines[:3]}"]
                return []
            return Setup(argv=["rules", "check", str(rules)], cwd=ctx.tmp, inputs=[rules], check=check)
        return build

    case(f"when_{_label}_report", 3, REPORT, new=True, **_FAST)(_mk_report(_when))
    case(f"when_{_label}_rules_check", 3, FINISH, **_FAST)(_mk_check(_when))


@case("step_marker_redos_long_nvtx_text", 3, EITHER, timeout=20.0)
def _(ctx: Ctx) -> Setup:
    """--step-marker '(a+)+$' against an NVTX range 'a'*5000+'!': refused at once, or finishes."""
    cap = capture("redos_nvtx", ctx.tmp / "run.sqlite")

    def check(c: Ctx) -> list[str]:
        slow = c.run.rc == 2 and c.run.seconds > FAST_SECONDS
        return [f"refused, but only after {c.run.seconds:.1f}s (not at once)"] if slow else []
    return _report(ctx, cap, "--step-marker", "(a+)+$", check=check)


# -- 4: tracebacks from hostile rule files / unreadable input ----------------------------------
def _rng(name: str) -> random.Random:
    return random.Random(int(hashlib.sha256(name.encode()).hexdigest()[:12], 16))


RULE_FILE_CONTENTS: dict[str, Callable[[], bytes]] = {
    "non_utf8": lambda: b"id: caf\xe9\ntitle: \xff\xfe bad bytes\ncategory: gpu-utilization\n",
    "binary": lambda: bytes(_rng("binary").getrandbits(8) for _ in range(4096)).replace(b"\x00", b"\x00\x00")[:4096]
    + b"\x00" * 64,
    "python_tag": lambda: (b"id: !!python/name:os.system team-probe\ntitle: x\ncategory: gpu-utilization\n"
                           b"when: !!python/object/apply:os.system ['true']\nseverity: warning\nmessage: m\n"
                           b"verify: v\nfix: f\n"),
    "bigint_param_default": lambda: (b"id: team-probe\ntitle: t\ncategory: gpu-utilization\nparams:\n  big:\n"
                                     b"    default: " + b"7" * 5000 + b"\n    unit: x\n    doc: d\n"
                                     b"when: kernel_count > big\nseverity: warning\nmessage: m\nverify: v\nfix: f\n"),
    "deep_nesting": lambda: (b"id: team-probe\ntitle: t\ncategory: gpu-utilization\ndocs: "
                             + b"[" * 6000 + b"]" * 6000 + b"\nwhen: kernel_count > 0\nseverity: warning\n"
                             b"message: m\nverify: v\nfix: f\n"),
    "not_chain_5000": lambda: (b"id: team-probe\ntitle: t\ncategory: gpu-utilization\nwhen: "
                               + b"not " * 5000 + b"true\nseverity: warning\nmessage: m\nverify: v\nfix: f\n"),
    "sum_3000_terms": lambda: (b"id: team-probe\ntitle: t\ncategory: gpu-utilization\nwhen: "
                               + b"+".join([b"1"] * 3000) + b" > 0\nseverity: warning\nmessage: m\nverify: v\nfix: f\n"),
}


def _hostile_rule_dir(ctx: Ctx, kind: str) -> Path:
    d = ctx.tmp / "rules"
    d.mkdir()
    if kind == "dev_zero":
        os.symlink("/dev/zero", d / "team-probe.yaml")
    else:
        (d / "team-probe.yaml").write_bytes(RULE_FILE_CONTENTS[kind]())
    return d


for _kind in (*RULE_FILE_CONTENTS, "dev_zero"):
    def _mk(kind: str, command: str):
        def build(ctx: Ctx) -> Setup:
            rules = _hostile_rule_dir(ctx, kind)
            if command == "check":
                return Setup(argv=["rules", "check", str(rules)], cwd=ctx.tmp, inputs=[rules])
            cap = capture("known", ctx.tmp / "run.sqlite")
            return _report(ctx, cap, "--rules", rules, inputs=[rules])
        return build
    _kw = dict(timeout=20.0, max_seconds=FAST_SECONDS) if _kind == "dev_zero" else {}
    case(f"rule_file_{_kind}_report", 4, REFUSAL, **_kw)(_mk(_kind, "report"))
    case(f"rule_file_{_kind}_rules_check", 4, REFUSAL, **_kw)(_mk(_kind, "check"))


_PRIV_CACHE: dict[str, Any] = {}


def unprivileged_wrap() -> list[str]:
    """A command prefix under which permission bits are enforced. Not root: nothing. Root: the
    user ``nobody`` cannot run this interpreter (and pytest folders are 0700), so the DAC
    override capabilities are dropped with ``setpriv`` instead (still uid 0, the owner of the
    files). Raises Skip when neither works."""
    if os.geteuid() != 0:
        return []
    if "wrap" not in _PRIV_CACHE:
        wrap = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
                "--bounding-set=-dac_override,-dac_read_search", "--"]
        reason = None
        if not shutil.which("setpriv"):
            reason = "running as root, setpriv not found and user nobody cannot run this interpreter"
        else:
            probe_dir = Path(tempfile.mkdtemp(prefix="nsysdoc-priv-"))
            try:
                (probe_dir / "f").write_text("x")
                os.chmod(probe_dir, 0)
                r = subprocess.run([*wrap, sys.executable, "-c", f"open({str(probe_dir / 'f')!r})"],
                                   capture_output=True, timeout=30, check=False)
                if r.returncode == 0:
                    reason = "running as root and could not drop the DAC override capabilities"
            finally:
                os.chmod(probe_dir, 0o700)
                shutil.rmtree(probe_dir, ignore_errors=True)
        _PRIV_CACHE["wrap"] = (wrap, reason)
    wrap, reason = _PRIV_CACHE["wrap"]
    if reason:
        raise Skip(reason)
    return wrap


@case("input_in_unenterable_folder", 4, REFUSAL)
def _(ctx: Ctx) -> Setup:
    """A capture inside a chmod 000 folder (as root: run with the DAC override capabilities dropped)."""
    wrap = unprivileged_wrap()
    locked = ctx.tmp / "locked"
    cap = capture("known", locked / "run.sqlite")
    os.chmod(locked, 0)
    setup = _report(ctx, cap)
    setup.wrap = wrap
    setup.cleanup = lambda: os.chmod(locked, 0o755)
    return setup


# -- 5: cache ----------------------------------------------------------------------------------
def _cache_files(ctx: Ctx, pattern: str) -> list[Path]:
    return sorted(p for p in ctx.cache.rglob(pattern) if p.is_file())


def _damage_cache_files(ctx: Ctx, pattern: str, damage: Callable[[list[Path]], None]) -> Setup:
    """Report a healthy capture once (filling the cache), ``damage`` the cache files matching
    ``pattern``, and report again: the numbers must be the fresh ones."""
    cap = capture("healthy", ctx.tmp / "run.sqlite")
    ctx.prime("report", cap)
    files = _cache_files(ctx, pattern)
    if not files:
        raise HarnessError(f"the preparatory report left no {pattern} file in the cache")
    damage(files)
    return _report(ctx, cap, check=check_fresh_numbers(cap))


def _junk(seed: str) -> Callable[[list[Path]], None]:
    """Overwrite each file with as many seeded random bytes."""
    def damage(files: list[Path]) -> None:
        rng = _rng(seed)
        for f in files:
            f.write_bytes(bytes(rng.getrandbits(8) for _ in range(f.stat().st_size)))
    return damage


def _other_columns(fmt: str) -> Callable[[list[Path]], None]:
    """Replace each file by a valid ``parquet`` or Arrow IPC (``arrow``) file with other columns."""
    def damage(files: list[Path]) -> None:
        import pyarrow as pa
        import pyarrow.ipc as ipc
        import pyarrow.parquet as pq

        t = pa.table({"wrong": [1, 2, 3], "columns": ["x", "y", "z"]})
        for f in files:
            if fmt == "parquet":
                pq.write_table(t, f)
            else:
                with ipc.new_file(str(f), t.schema) as w:
                    w.write_table(t)
    return damage


@case("cache_meta_json_emptied", 5, REPORT)
def _(ctx: Ctx) -> Setup:
    return _damage_cache_files(ctx, "*.json", lambda files: [m.write_text("{}") for m in files])


@case("cache_parquet_wrong_columns", 5, REPORT)
def _(ctx: Ctx) -> Setup:
    return _damage_cache_files(ctx, "*.parquet", _other_columns("parquet"))


@case("cache_kernels_file_wrong_columns_only", 5, REPORT)
def _(ctx: Ctx) -> Setup:
    """Only the kernel table's file (Arrow IPC) is replaced by a valid one with other columns."""
    return _damage_cache_files(ctx, "kernels.arrow", _other_columns("arrow"))


@case("cache_event_files_junk_bytes", 5, REPORT)
def _(ctx: Ctx) -> Setup:
    return _damage_cache_files(ctx, "*.arrow", _junk("junk-arrow"))


@case("cache_parquet_junk_bytes", 5, REPORT)
def _(ctx: Ctx) -> Setup:
    return _damage_cache_files(ctx, "*.parquet", _junk("junk"))


@case("cache_stale_after_same_size_same_mtime_edit", 5, REPORT)
def _(ctx: Ctx) -> Setup:
    """The capture is edited in place (kernels half as long), same size, mtime restored."""
    cap = capture("healthy", ctx.tmp / "run.sqlite")
    before = ctx.prime("report", cap)
    st = cap.stat()
    digest = sha256(cap)
    n = count(cap)
    execute(cap, f'UPDATE {KERNEL} SET "end" = start + ("end" - start) / 2', expect_rows=n)
    os.utime(cap, ns=(st.st_atime_ns, st.st_mtime_ns))
    st2 = cap.stat()
    if st2.st_size != st.st_size or st2.st_mtime_ns != st.st_mtime_ns or sha256(cap) == digest:
        raise HarnessError("in-place edit changed the size/mtime or did not change the content")
    if any(Path(str(cap) + s).exists() for s in ("-journal", "-wal")):
        raise HarnessError("the edit left a sidecar")

    def check(c: Ctx) -> list[str]:
        fresh = c.reference(cap)
        if not compare_numbers(before, fresh):
            raise HarnessError("the in-place edit did not change the report's numbers")
        return compare_numbers(c.data, fresh, "fresh --no-cache report of the current content")
    return _report(ctx, cap, check=check)


def _human_size(text: str) -> bool:
    return re.search(r"\d+(\.\d+)?\s*(B|bytes?|[kKMGT]i?B)\b", text) is not None


@case("new_cache_info_command", 5, SUCCESS, new=True)
def _(ctx: Ctx) -> Setup:
    """NEW: nsysdoc cache info prints the cache location and size, exit 0."""
    cap = capture("healthy", ctx.tmp / "run.sqlite")
    ctx.prime("report", cap)

    def check(c: Ctx) -> list[str]:
        text = c.run.stdout + c.run.stderr
        p = []
        if str(c.cache) not in text:
            p.append(f"cache location {c.cache} not printed")
        if not _human_size(text):
            p.append("no size printed")
        return p
    return Setup(argv=["cache", "info"], cwd=ctx.tmp, inputs=[cap], check=check)


@case("new_cache_clear_command", 5, SUCCESS, new=True)
def _(ctx: Ctx) -> Setup:
    """NEW: nsysdoc cache clear empties the cache, exit 0."""
    cap = capture("healthy", ctx.tmp / "run.sqlite")
    ctx.prime("report", cap)
    if not any(p.is_file() for p in ctx.cache.rglob("*")):
        raise HarnessError("the preparatory report did not fill the cache")

    def check(c: Ctx) -> list[str]:
        left = [str(p.relative_to(c.cache)) for p in c.cache.rglob("*") if p.is_file()] if c.cache.exists() else []
        return [f"cache not empty after 'cache clear': {left[:5]}"] if left else []
    return Setup(argv=["cache", "clear"], cwd=ctx.tmp, inputs=[cap], check=check)


CACHE_CAP_MB = 1


@case("new_cache_max_mb_lru", 5, REPORT, new=True)
def _(ctx: Ctx) -> Setup:
    """NEW: with NSYSDOC_CACHE_MAX_MB=1, after reporting three captures (~0.5 MB of cache each) the
    cache stays under 1 MiB."""
    env = {"NSYSDOC_CACHE_MAX_MB": str(CACHE_CAP_MB)}
    caps = [capture(n, ctx.tmp / f"{n}.sqlite") for n in ("lru_a", "lru_b", "lru_c")]
    for c in caps[:2]:
        ctx.prime("report", c, extra_env=env)

    def check(c: Ctx) -> list[str]:
        files = [p for p in c.cache.rglob("*") if p.is_file()]
        total = sum(p.stat().st_size for p in files)
        return [] if total <= CACHE_CAP_MB << 20 else [
            f"cache holds {total / 2**20:.2f} MiB in {len(files)} files, over NSYSDOC_CACHE_MAX_MB={CACHE_CAP_MB}"]
    setup = _report(ctx, caps[2], inputs=caps[:2], check=check, env=env)
    return setup


# -- 6: FIFOs and devices ----------------------------------------------------------------------
_FIFO = dict(timeout=8.0, max_seconds=5.0)


@case("fifo_as_input", 6, REFUSAL, **_FIFO)
def _(ctx: Ctx) -> Setup:
    fifo = ctx.tmp / "pipe.sqlite"
    os.mkfifo(fifo)
    return _report(ctx, fifo)


@case("fifo_as_team_rule_file", 6, REFUSAL, **_FIFO)
def _(ctx: Ctx) -> Setup:
    cap = capture("known", ctx.tmp / "run.sqlite")
    (ctx.tmp / "rules").mkdir()
    os.mkfifo(ctx.tmp / "rules" / "team-probe.yaml")
    return _report(ctx, cap, "--rules", ctx.tmp / "rules", inputs=[ctx.tmp / "rules"])


@case("fifo_as_config", 6, REFUSAL, **_FIFO)
def _(ctx: Ctx) -> Setup:
    cap = capture("known", ctx.tmp / "run.sqlite")
    os.mkfifo(ctx.tmp / "cfg.yaml")
    return _report(ctx, cap, "--config", ctx.tmp / "cfg.yaml", inputs=[ctx.tmp / "cfg.yaml"])


@case("char_device_as_input", 6, REFUSAL, **_FIFO)
def _(ctx: Ctx) -> Setup:
    return _report(ctx, Path("/dev/null"))


# -- 7: bad values in exports that open fine ---------------------------------------------------
BAD_VALUES = {"text": "garbage", "real": 0.5, "blob": b"\x00\xff"}


def _middle_kernel(cap: Path) -> int:
    ids = kernel_rowids(cap)
    return ids[len(ids) // 2]


for _col in ("start", "end", "deviceId", "streamId", "demangledName", "shortName"):
    for _vk, _val in BAD_VALUES.items():
        if _col in ("demangledName", "shortName") and _vk == "real":
            continue

        def _mk(col: str, vk: str, val: Any):
            def build(ctx: Ctx) -> Setup:
                cap = capture("healthy", ctx.tmp / "run.sqlite")
                rid = _middle_kernel(cap)
                v = val + query(cap, f'SELECT "{col}" FROM {KERNEL} WHERE rowid=?', (rid,))[0][0] \
                    if vk == "real" else val
                execute(cap, f'UPDATE {KERNEL} SET "{col}" = ? WHERE rowid = ?', (v, rid), expect_rows=1)
                if query(cap, f'SELECT typeof("{col}") FROM {KERNEL} WHERE rowid=?', (rid,))[0][0].decode() != vk:
                    raise HarnessError(f"{col} did not become {vk}")
                timing = col in ("start", "end", "deviceId", "streamId")
                # a text/real/blob time, device or stream makes the row unusable: dropped and counted;
                # an unusable *name* id may keep its row under a placeholder name (not counted here)
                return _report(ctx, cap, check=check_dropped("kernel", 1 if timing else None))
            return build
        case(f"kernel_{_col}_{_vk}", 7, REPORT, new=True)(_mk(_col, _vk, _val))

for _col in ("demangledName", "shortName"):
    for _vk, _val in (("null", None), ("negative", -5), ("over_2_31", (1 << 31) + 7)):
        def _mk(col: str, vk: str, val: Any):
            def build(ctx: Ctx) -> Setup:
                cap = capture("healthy", ctx.tmp / "run.sqlite")
                if val is None:
                    relax_not_null(cap, KERNEL, col)
                rid = _middle_kernel(cap)
                execute(cap, f'UPDATE {KERNEL} SET "{col}" = ? WHERE rowid = ?', (val, rid), expect_rows=1)
                return _report(ctx, cap, check=check_dropped("kernel", None))
            return build
        case(f"kernel_{_col}_{_vk}", 7, REPORT, new=True)(_mk(_col, _vk, _val))


@case("nvtx_start_null", 7, REPORT, new=True)
def _(ctx: Ctx) -> Setup:
    cap = capture("healthy", ctx.tmp / "run.sqlite")
    relax_not_null(cap, NVTX, "start")
    rid = query(cap, f"SELECT rowid FROM {NVTX} WHERE text LIKE 'enumerate%' ORDER BY start LIMIT 1")[0][0]
    execute(cap, f"UPDATE {NVTX} SET start = NULL WHERE rowid = ?", (rid,), expect_rows=1)
    return _report(ctx, cap, check=check_dropped("nvtx", 1))


@case("stringids_id_null", 7, REPORT, new=True)
def _(ctx: Ctx) -> Setup:
    cap = capture("healthy", ctx.tmp / "run.sqlite")
    relax_not_null(cap, "StringIds", "id")
    execute(cap, "INSERT INTO StringIds (id, value) VALUES (NULL, 'orphan string')", expect_rows=1)
    return _report(ctx, cap, check=check_dropped("", None))


@case("gpu_metrics_value_null", 7, REPORT, new=True)
def _(ctx: Ctx) -> Setup:
    cap = capture("healthy", ctx.tmp / "run.sqlite")
    if not count(cap, "GPU_METRICS"):
        raise HarnessError("the fixture has no GPU_METRICS rows")
    relax_not_null(cap, "GPU_METRICS", "value")
    execute(cap, "UPDATE GPU_METRICS SET value = NULL WHERE rowid IN (SELECT rowid FROM GPU_METRICS LIMIT 5)",
            expect_rows=5)
    return _report(ctx, cap, check=check_dropped("", None))


@case("nvtx_table_without_start_column", 7, REPORT, new=True)
def _(ctx: Ctx) -> Setup:
    cap = capture("healthy", ctx.tmp / "run.sqlite")
    drop_column(cap, NVTX, "start")
    return _report(ctx, cap, check=check_dropped("", None))


@case("kernel_start_int64_min", 7, REPORT, new=True)
def _(ctx: Ctx) -> Setup:
    cap = capture("healthy", ctx.tmp / "run.sqlite")
    execute(cap, f"UPDATE {KERNEL} SET start = ? WHERE rowid = ?", (I64_MIN, _middle_kernel(cap)), expect_rows=1)
    return _report(ctx, cap, check=check_dropped("kernel", 1))


def damage_pages(path: Path, seed: int, pages: int = 2) -> None:
    """Overwrite ``pages`` random pages (not the header page) with seeded random bytes."""
    data = bytearray(path.read_bytes())
    psize = int.from_bytes(data[16:18], "big")
    psize = 65536 if psize == 1 else psize
    n = len(data) // psize
    rng = random.Random(seed)
    for p in rng.sample(range(1, n), min(pages, n - 1)):
        data[p * psize:(p + 1) * psize] = bytes(rng.getrandbits(8) for _ in range(psize))
    path.write_bytes(bytes(data))


for _seed in (1, 2):
    def _mk(seed: int):
        def build(ctx: Ctx) -> Setup:
            """Two random pages of the capture overwritten (seeded): a clean refusal or a report."""
            cap = capture("healthy", ctx.tmp / "run.sqlite")
            damage_pages(cap, seed)
            return _report(ctx, cap)
        return build
    case(f"two_random_pages_seed{_seed}", 7, EITHER)(_mk(_seed))


# -- 8: wrong numbers --------------------------------------------------------------------------
def _variant(ctx: Ctx, damage: Callable[[Path, list[int]], list[int]], *, all_rows: bool = False) -> Setup:
    """``damage(cap, rowids) -> damaged rowids``; the reference is the same capture with those rows
    deleted."""
    cap = capture("known", ctx.tmp / "run.sqlite")
    ids = kernel_rowids(cap)
    if len(ids) != KNOWN_KERNELS:
        raise HarnessError(f"known capture has {len(ids)} kernels")
    ref = capture("known", ctx.tmp / "ref" / "run.sqlite")
    bad = damage(cap, ids)
    execute(ref, f"DELETE FROM {KERNEL} WHERE rowid IN ({','.join(map(str, bad))})", expect_rows=len(bad))
    check = check_equals_reference(ref, "kernel", len(bad))
    if all_rows:
        inner = check

        def check(c: Ctx) -> list[str]:
            p = inner(c)
            busy, kc = c.data["summary"].get("gpu_busy_pct"), c.data["summary"].get("kernel_count")
            if c.data["capture"].get("gpu_activity") and not ((busy in (None, 0)) and kc == 0):
                p.append(f"GPU busy {busy}% / {kc} kernels claimed from no valid kernel row")
            return p
    return _report(ctx, cap, check=check)


@case("wrong_A_end_int64_max", 8, REPORT, new=True)
def _(ctx: Ctx) -> Setup:
    def damage(cap: Path, ids: list[int]) -> list[int]:
        execute(cap, f'UPDATE {KERNEL} SET "end" = ? WHERE rowid = ?', (I64_MAX, ids[7]), expect_rows=1)
        return [ids[7]]
    return _variant(ctx, damage)


@case("wrong_B_start_2_62_and_minus_2_62", 8, REPORT, new=True)
def _(ctx: Ctx) -> Setup:
    def damage(cap: Path, ids: list[int]) -> list[int]:
        execute(cap, f"UPDATE {KERNEL} SET start = ? WHERE rowid = ?", (1 << 62, ids[7]), expect_rows=1)
        execute(cap, f"UPDATE {KERNEL} SET start = ? WHERE rowid = ?", (-(1 << 62), ids[13]), expect_rows=1)
        return [ids[7], ids[13]]
    return _variant(ctx, damage)


@case("wrong_C_all_kernel_starts_null", 8, REPORT, new=True)
def _(ctx: Ctx) -> Setup:
    def damage(cap: Path, ids: list[int]) -> list[int]:
        relax_not_null(cap, KERNEL, "start")
        execute(cap, f"UPDATE {KERNEL} SET start = NULL", expect_rows=len(ids))
        return kernel_rowids(cap)
    return _variant(ctx, damage, all_rows=True)


@case("wrong_D_device_null_and_65536", 8, REPORT, new=True)
def _(ctx: Ctx) -> Setup:
    def damage(cap: Path, ids: list[int]) -> list[int]:
        relax_not_null(cap, KERNEL, "deviceId")
        execute(cap, f'UPDATE {KERNEL} SET "deviceId" = NULL WHERE rowid = ?', (ids[7],), expect_rows=1)
        execute(cap, f'UPDATE {KERNEL} SET "deviceId" = 65536 WHERE rowid = ?', (ids[13],), expect_rows=1)
        return [ids[7], ids[13]]
    return _variant(ctx, damage)


@case("wrong_E_inverted_kernel", 8, REPORT, new=True)
def _(ctx: Ctx) -> Setup:
    def damage(cap: Path, ids: list[int]) -> list[int]:
        execute(cap, f'UPDATE {KERNEL} SET start = "end", "end" = start WHERE rowid = ?', (ids[7],), expect_rows=1)
        return [ids[7]]
    return _variant(ctx, damage)


@case("wal_uncheckpointed_rows", 8, REPORT, new=True)
def _(ctx: Ctx) -> Setup:
    """A -wal file with committed, un-checkpointed kernel rows: they count; db and -wal untouched."""
    work = ctx.tmp / "writer"
    src = capture("known", work / "run.sqlite")
    con = sqlite3.connect(str(src), isolation_level=None)
    try:
        if con.execute("PRAGMA journal_mode=WAL").fetchone()[0] != "wal":
            raise HarnessError("could not switch to WAL")
        con.execute("PRAGMA wal_autocheckpoint=0")
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({KERNEL})")]
        rows = [list(r) for r in con.execute(f"SELECT * FROM {KERNEL} ORDER BY start LIMIT 3")]
        for r in rows:
            r[cols.index("streamId")] = 99  # same times, another stream: inside the window
        con.execute("BEGIN")
        con.executemany(f"INSERT INTO {KERNEL} VALUES ({','.join('?' * len(cols))})", rows)
        con.execute("COMMIT")
        wal = Path(str(src) + "-wal")
        if not wal.exists() or wal.stat().st_size == 0:
            raise HarnessError("no -wal file")
        cap = ctx.tmp / "run.sqlite"
        shutil.copyfile(src, cap)
        shutil.copyfile(wal, str(cap) + "-wal")
    finally:
        con.close()
    expected = _committed_kernels(ctx, cap, ("-wal",))
    if expected != KNOWN_KERNELS + 3:
        raise HarnessError(f"the WAL copy holds {expected} kernels, expected {KNOWN_KERNELS + 3}")
    return _report(ctx, cap, check=check_kernel_count(expected))


@case("hot_rollback_journal", 8, REPORT, new=True)
def _(ctx: Ctx) -> Setup:
    """A hot -journal (a writer died mid-transaction): only the committed rows count; db and
    -journal untouched."""
    work = ctx.tmp / "writer"
    src = capture("known", work / "run.sqlite")
    con = sqlite3.connect(str(src), isolation_level=None)
    cap = ctx.tmp / "run.sqlite"
    try:
        con.execute("PRAGMA cache_size=1")  # spill the uncommitted change into the db file
        con.execute("BEGIN")
        con.execute(f"DELETE FROM {KERNEL} WHERE rowid % 2 = 0")
        con.execute("CREATE TABLE hostile_pad(x)")
        con.executemany("INSERT INTO hostile_pad VALUES (?)", [(bytes(2000),) for _ in range(200)])
        journal = Path(str(src) + "-journal")
        if not journal.exists():
            raise HarnessError("no -journal file")
        shutil.copyfile(src, cap)
        shutil.copyfile(journal, str(cap) + "-journal")
        con.execute("ROLLBACK")
    finally:
        con.close()
    imm = sqlite3.connect(f"file:{cap}?mode=ro&immutable=1", uri=True)
    try:
        torn = imm.execute(f"SELECT COUNT(*) FROM {KERNEL}").fetchone()[0]
    except sqlite3.DatabaseError:
        torn = None
    finally:
        imm.close()
    expected = _committed_kernels(ctx, cap, ("-journal",))
    if expected != KNOWN_KERNELS or torn == expected:
        raise HarnessError(f"hot journal not hot: committed {expected}, file alone {torn}")
    return _report(ctx, cap, check=check_kernel_count(expected))


def _committed_kernels(ctx: Ctx, cap: Path, sidecars: tuple[str, ...]) -> int:
    """What sqlite3 reports on a normal read-write open of a copy (db + sidecars)."""
    d = Path(tempfile.mkdtemp(prefix="rwcopy-", dir=ctx.tmp))
    shutil.copyfile(cap, d / cap.name)
    for s in sidecars:
        shutil.copyfile(str(cap) + s, str(d / cap.name) + s)
    con = sqlite3.connect(str(d / cap.name))
    try:
        return con.execute(f"SELECT COUNT(*) FROM {KERNEL}").fetchone()[0]
    finally:
        con.close()


# -- 9: non-UTF-8 text ---------------------------------------------------------------------------
def _has_replacement(d: dict, key: str) -> list[str]:
    if key == "nvtx":
        names = [r.get("text") for r in d["metrics"].get("nvtx", [])]
    else:
        k = d["metrics"]["kernels"]
        names = [r.get("name") for r in k.get("by_name", []) + k.get("by_short_name", []) + k.get("names", [])]
    if any(isinstance(n, str) and "\ufffd" in n for n in names):
        return []
    return [f"no name with U+FFFD among the {key} names: {names[:8]}"]


@case("nvtx_text_non_utf8", 9, REPORT)
def _(ctx: Ctx) -> Setup:
    cap = capture("known", ctx.tmp / "run.sqlite")
    n = execute(cap, f"UPDATE {NVTX} SET text = CAST(x'fffe41' AS TEXT) || '_loading' WHERE text = 'data_loading'")
    if n != 4:
        raise HarnessError(f"changed {n} NVTX rows")
    return _report(ctx, cap, check=lambda c: _has_replacement(c.data, "nvtx"))


@case("stringids_value_non_utf8", 9, REPORT)
def _(ctx: Ctx) -> Setup:
    cap = capture("known", ctx.tmp / "run.sqlite")
    execute(cap, f"UPDATE StringIds SET value = CAST(x'fffe41' AS TEXT) || '_kernel' WHERE id = "
                 f"(SELECT demangledName FROM {KERNEL} ORDER BY start LIMIT 1)", expect_rows=1)
    return _report(ctx, cap, check=lambda c: _has_replacement(c.data, "kernel"))


# -- 10: a rule file that is a symlink to a secret -------------------------------------------------
def _secret_dir(ctx: Ctx) -> Path:
    secret = ctx.tmp / "shadow"
    secret.write_text(f"root:$6${SECRET_MARK}xyzQ9v$Vt0p8kLmN3bC7dR2fH5jW1sA6gE4uY0iO9:19000:0:99999:7:::\n")
    d = ctx.tmp / "rules"
    d.mkdir()
    os.symlink(secret, d / "leak.yaml")
    return d


@case("rule_symlink_to_secret_report", 10, REFUSAL)
def _(ctx: Ctx) -> Setup:
    cap = capture("known", ctx.tmp / "run.sqlite")
    rules = _secret_dir(ctx)
    s = _report(ctx, cap, "--rules", rules, inputs=[rules, ctx.tmp / "shadow"])
    s.check = check_no_secret
    return s


@case("rule_symlink_to_secret_rules_check", 10, REFUSAL)
def _(ctx: Ctx) -> Setup:
    rules = _secret_dir(ctx)
    return Setup(argv=["rules", "check", str(rules)], cwd=ctx.tmp, inputs=[rules, ctx.tmp / "shadow"],
                 check=check_no_secret)


# -- 11: output size -----------------------------------------------------------------------------
#: "N more" / "99,800 more rows" (bounded repetitions: linear on multi-MB pages full of numbers)
MORE_MARKER = re.compile(r"(?<![\d,.])\d[\d,\u00a0\u202f]{0,15}\s?(?:more|others)\b", re.IGNORECASE)


def _size_check(limit_mb: float, marker: bool = False):
    def check(c: Ctx) -> list[str]:
        size = c.setup.output.stat().st_size
        p = [] if size <= limit_mb * 1e6 else [f"{c.setup.output.suffix} is {size / 1e6:.1f} MB, limit {limit_mb} MB"]
        if marker and not MORE_MARKER.search(c.text or ""):
            p.append("no visible 'N more' marker for the capped tables")
        return p
    return check


_BIG = dict(timeout=180.0, slow=True)


@case("steps_100k_json_size", 11, REPORT, **_BIG)
def _(ctx: Ctx) -> Setup:
    cap = capture("big_steps", ctx.tmp / "run.sqlite")
    return _report(ctx, cap, "--no-cache", check=_size_check(8))


@case("steps_100k_html_size", 11, REPORT, **_BIG)
def _(ctx: Ctx) -> Setup:
    cap = capture("big_steps", ctx.tmp / "run.sqlite")
    return _report(ctx, cap, "--no-cache", fmt="html", check=_size_check(5, marker=True))


for _fmt in ("json", "html"):
    def _mk(fmt: str):
        def build(ctx: Ctx) -> Setup:
            cap = capture("long_name", ctx.tmp / "run.sqlite")
            return _report(ctx, cap, fmt=fmt, check=_size_check(1.5))
        return build
    case(f"kernel_name_1mb_{_fmt}_size", 11, REPORT)(_mk(_fmt))

_FORMAT_BOMBS = {"precision": "{gpu_busy_pct:.100000000f}", "width": "{gpu_busy_pct:>2000000000}"}
for _fk, _msg in _FORMAT_BOMBS.items():
    def _mk(msg: str, command: str):
        def build(ctx: Ctx) -> Setup:
            rules = _team_rule(ctx, "kernel_count > 0", message="Busy " + msg)
            chk = check_stderr_names_file_line("team-probe.yaml")
            if command == "check":
                return Setup(argv=["rules", "check", str(rules)], cwd=ctx.tmp, inputs=[rules], check=chk)
            cap = capture("known", ctx.tmp / "run.sqlite")
            return _report(ctx, cap, "--rules", rules, inputs=[rules], check=chk)
        return build
    for _cmd in ("check", "report"):
        case(f"message_format_{_fk}_{_cmd}", 11, REFUSAL, timeout=20.0, max_seconds=FAST_SECONDS,
             max_rss_mb=BOUNDED_RSS_MB)(_mk(_msg, _cmd))


# -- 12: bidi controls ---------------------------------------------------------------------------
def _bidi_check(c: Ctx) -> list[str]:
    p = []
    for what, text in (("report file", c.text or ""), ("stdout", c.run.stdout), ("stderr", c.run.stderr)):
        if "\u202e" in text:
            p.append(f"raw U+202E in the {what}")
    if "evil" not in (c.text or "") or "evil" not in c.run.stdout:  # else the check proves nothing
        raise HarnessError("the bidi kernel name is not in the report / terminal summary at all")
    return p


for _fmt in ("html", "md"):
    def _mk(fmt: str):
        def build(ctx: Ctx) -> Setup:
            """HTML / Markdown file and the terminal summary (stdout) must not hold a raw U+202E."""
            cap = capture("bidi", ctx.tmp / "run.sqlite")
            return _report(ctx, cap, fmt=fmt, check=_bidi_check)
        return build
    case(f"bidi_names_{_fmt}_and_terminal", 12, REPORT)(_mk(_fmt))


# -- 13: cosmetic --------------------------------------------------------------------------------
@case("symlink_to_folder_with_captures", 13, REPORT)
def _(ctx: Ctx) -> Setup:
    cap = capture("known", ctx.tmp / "data" / "run.sqlite")
    os.symlink(ctx.tmp / "data", ctx.tmp / "link")
    out = ctx.tmp / "out"
    return Setup(argv=["report", "link", "-f", "json", "-o", str(out) + os.sep], cwd=ctx.tmp, inputs=[cap],
                 output=out / "run.nsysdoc.json")


@case("symlink_to_empty_folder", 13, REFUSAL)
def _(ctx: Ctx) -> Setup:
    (ctx.tmp / "empty").mkdir()
    os.symlink(ctx.tmp / "empty", ctx.tmp / "link")
    return Setup(argv=["report", "link"], cwd=ctx.tmp, inputs=[ctx.tmp / "empty"])


for _label, _second in (("same_spelling", "run.sqlite"), ("dot_slash", "./run.sqlite")):
    def _mk(second: str):
        def build(ctx: Ctx) -> Setup:
            cap = capture("known", ctx.tmp / "run.sqlite")
            out = ctx.tmp / "out"
            out.mkdir()

            def check(c: Ctx) -> list[str]:
                files = sorted(p.name for p in out.iterdir())
                return [] if files == ["run.nsysdoc.json"] else [f"the same capture twice gave {files}"]
            return Setup(argv=["report", "run.sqlite", second, "-f", "json", "-o", str(out)], cwd=ctx.tmp,
                         inputs=[cap], output=None, check=check)
        return build
    case(f"same_file_twice_{_label}", 13, REPORT)(_mk(_second))


# --- issue 30 (inputs) ---
# Kineto input limits (3), saved-report JSON for diff (4), configuration found walking up (6),
# rule test case sizes (7), symlinked rule files (10). Named h30_*, Case.item = 30. Each comment
# "before:" says what the code did before the issue-30 change.
def case30(name: str, expect: str, **kw):
    """Register an issue-30 case: name ``h30_<name>``, item 30."""
    def deco(fn: Callable[[Ctx], Setup]) -> Callable[[Ctx], Setup]:
        kw.setdefault("doc", (fn.__doc__ or "").strip())
        CASES.append(Case(name=f"h30_{name}", item=30, expect=expect, build=fn, new=True, **kw))
        return fn
    return deco


def _kineto_text() -> str:
    """The "known" capture (4 steps x 5 kernels) as Kineto trace text (built here, ~23 kB)."""
    from nsysdoc.testing.builder import Capture

    cap = Capture()
    t = cap.process(pid=4600).thread()
    for i in range(4):
        with t.range(f"ProfilerStep#{i}"):
            for k in range(5):
                t.cpu(us=20)
                t.launch(f"known_kernel_{k}", us=1500 * (k + 1))
            t.sync_stream()
    tmp = Path(tempfile.mkdtemp(prefix="nsysdoc-h30-"))
    try:
        return cap.write_kineto(tmp / "k.json").read_text()
    finally:
        shutil.rmtree(tmp, True)


def _kernel_field(text: str, k: int, key: str, value: str) -> str:
    """``text`` with ``key`` (ts or dur) of kernel ``known_kernel_{k}``'s first event set to ``value``."""
    pat = re.compile(r'("name": "known_kernel_%d".*?"%s": )[-0-9.eE]+' % (k, key))
    out, n = pat.subn(lambda m: m.group(1) + value, text, count=1)
    if n != 1:
        raise HarnessError(f"known_kernel_{k} {key} not found in the Kineto text")
    return out


@case30("kineto_out_of_range_numbers", REPORT, timeout=60)
def _(ctx: Ctx) -> Setup:
    """ts 1e999999, ts -1e999999999, ts beyond int64, a 5,000-digit integer ts and a negative dur:
    each row dropped and counted, the rest reported. Before: internal error (decimal.Overflow) on
    the exponents; the 5,000-digit integer refused the whole trace (int-from-text limit)."""
    text = _kineto_text()
    for k, key, value in ((0, "ts", "1e999999"), (1, "ts", "-1e999999999"), (2, "ts", "99999999999999999999999"),
                          (3, "ts", "9" * 5000), (4, "dur", "-1500.000")):
        text = _kernel_field(text, k, key, value)
    p = ctx.tmp / "trace.pt.trace.json"
    p.write_text(text)
    return _report(ctx, p, check=check_dropped("kernel", 5))


@case30("kineto_200mb_string_gz", REPORT, timeout=60.0, max_seconds=25.0)
def _(ctx: Ctx) -> Setup:
    """A 200 MB string argument in a kernel event (gzip: under 1 MB on disk) is read in linear time.
    Before: the value was re-decoded on each 1 MB refill (quadratic): 49 s on an idle machine, past
    this case's 25 s bound; after: ~6 s."""
    import gzip

    text = _kineto_text()
    m = re.search(r'"name": "known_kernel_0".*?"args": \{', text)
    p = ctx.tmp / "big.pt.trace.json.gz"
    with gzip.open(p, "wt", compresslevel=1) as fh:
        fh.write(text[:m.end()] + '"junk": "')
        block = "x" * (1 << 20)
        for _ in range(200):
            fh.write(block)
        fh.write('", ' + text[m.end():])
    return _report(ctx, p, check=check_kernel_count(KNOWN_KERNELS))


@case30("kineto_duplicate_trace_events", REPORT)
def _(ctx: Ctx) -> Setup:
    """Two traceEvents keys: the last one is used, as json.load (and a browser) does
    (docs/kineto.md). Before: the first was used and the second decoded whole and thrown away."""
    text = _kineto_text()
    end = text.rindex("}")
    last = ('"traceEvents": [{"ph": "X", "cat": "kernel", "name": "only_last_kernel", "pid": 0, "tid": 7, '
            '"ts": 1000000.000, "dur": 5000.000, "args": {"device": 0, "stream": 7}}]')
    p = ctx.tmp / "dup.pt.trace.json"
    p.write_text(text[:end].rstrip() + ", " + last + "\n}\n")

    def check(c: Ctx) -> list[str]:
        names = [r["name"] for r in c.data["metrics"]["kernels"]["names"]]
        return [] if names == ["only_last_kernel"] else [f"kernels {names[:6]}: not the last traceEvents list"]
    return _report(ctx, p, check=check)


# -- diff of saved reports (4) --
_SAVED_REPORT: dict[str, Any] = {}
_SAVED_LOCK = threading.Lock()


def _saved_report(ctx: Ctx) -> dict:
    """A saved report of the "known" capture (made once per process)."""
    with _SAVED_LOCK:
        if "known" not in _SAVED_REPORT:
            _SAVED_REPORT["known"] = ctx.reference(capture("known", ctx.tmp / "ref-src" / "run.sqlite"))
        return json.loads(json.dumps(_SAVED_REPORT["known"]))


def _diff_setup(ctx: Ctx, cand: Path, base: dict | None = None) -> Setup:
    b = ctx.tmp / "base.json"
    b.write_text(json.dumps(base if base is not None else _saved_report(ctx)))
    out = ctx.tmp / "out" / "diff.json"
    return Setup(argv=["diff", str(b), str(cand), "-f", "json", "-o", str(out)], cwd=ctx.tmp, inputs=[b, cand],
                 output=out)


@case30("diff_json_nested_100k", REFUSAL, max_rss_mb=BOUNDED_RSS_MB)
def _(ctx: Ctx) -> Setup:
    """A saved "report" nested 100,000 levels deep. Before: internal error (RecursionError)."""
    p = ctx.tmp / "deep.json"
    p.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    return _diff_setup(ctx, p)


@case30("diff_json_infinity_literal", REFUSAL)
def _(ctx: Ctx) -> Setup:
    """An Infinity literal (not JSON) in a field the diff does not check. Before: a diff (exit 0)."""
    d = _saved_report(ctx)
    d["metrics"]["values"]["h30_extra"] = float("inf")
    p = ctx.tmp / "inf.json"
    p.write_text(json.dumps(d))
    return _diff_setup(ctx, p)


@case30("diff_json_1e308_step_times", REFUSAL)
def _(ctx: Ctx) -> Setup:
    """Every step time 1e308 (finite, overflows in arithmetic). Before: internal error (TypeError
    formatting None after the overflow)."""
    d = _saved_report(ctx)
    for s in d["steps"]:
        s["step_time_ms"] = 1e308
    p = ctx.tmp / "huge.json"
    p.write_text(json.dumps(d))
    return _diff_setup(ctx, p)


@case30("diff_json_step_series_wrong_types", REFUSAL)
def _(ctx: Ctx) -> Setup:
    """A truncated report whose step_series holds a list and an object where numbers belong.
    Before: internal error (TypeError: unhashable type)."""
    d = _saved_report(ctx)
    d["steps_truncated"] = {"shown": 4, "total": 3}
    d["step_series"] = {"index": [0, [1], 2], "pid": [4600, {}, 4600], "step_time_ms": [1.0, 2.0, 3.0]}
    p = ctx.tmp / "series.json"
    p.write_text(json.dumps(d))
    return _diff_setup(ctx, p)


@case30("diff_json_oversized", REFUSAL, max_rss_mb=BOUNDED_RSS_MB, timeout=60)
def _(ctx: Ctx) -> Setup:
    """A 700 MB saved report (sparse: no disk space) is refused by its size, unread. Before: read
    whole (bytes + text, ~1.4 GB of memory) before json said it was not JSON."""
    p = ctx.tmp / "big.json"
    with open(p, "wb") as fh:
        fh.write(b'{"nsysdoc_version": "')
        fh.truncate(700 << 20)
    return _diff_setup(ctx, p)


# -- configuration found walking up (6) --
def _walkup(ctx: Ctx, pyproject: bytes | str, *extra: str, expect_report: bool = True) -> Setup:
    """The capture in a/b/, ``pyproject`` in a/ (found by walking up from the cwd a/b)."""
    sub = ctx.tmp / "a" / "b"
    sub.mkdir(parents=True)
    cap = capture("known", sub / "run.sqlite")
    pp = ctx.tmp / "a" / "pyproject.toml"
    pp.write_bytes(pyproject if isinstance(pyproject, bytes) else pyproject.encode())
    s = _report(ctx, cap, *extra, inputs=[pp])
    s.cwd = sub
    return s


@case30("config_walkup_pyproject_tool_not_a_table", REPORT)
def _(ctx: Ctx) -> Setup:
    """A parent's pyproject.toml with ``tool = 5`` (and the word nsysdoc in a comment) is not ours:
    ignored. Before: traceback (TypeError: argument of type 'int' is not iterable)."""
    return _walkup(ctx, "tool = 5  # not nsysdoc's\n")


@case30("config_walkup_pyproject_deep_arrays", REPORT)
def _(ctx: Ctx) -> Setup:
    """A parent's pyproject.toml with arrays nested 5,000 deep: ignored. Before: a RecursionError in
    tomllib, whose rich traceback did not even finish printing within the 30 s timeout here."""
    return _walkup(ctx, "x = " + "[" * 5000 + "]" * 5000 + "\n# nsysdoc\n")


@case30("config_walkup_pyproject_not_utf8", REPORT)
def _(ctx: Ctx) -> Setup:
    """A parent's pyproject.toml that is not UTF-8: ignored. Before: traceback (UnicodeDecodeError)."""
    return _walkup(ctx, b"\xff\xfe [tool.nsysdoc]\n")


@case30("config_explicit_pyproject_deep_arrays", REFUSAL)
def _(ctx: Ctx) -> Setup:
    """The same deep pyproject.toml given with --config is refused in one line. Before: a
    RecursionError traceback (did not finish within the 30 s timeout here)."""
    return _walkup(ctx, "x = " + "[" * 5000 + "]" * 5000 + "\n", "--config", str(ctx.tmp / "a" / "pyproject.toml"))


def _names_key(key: str):
    def check(c: Ctx) -> list[str]:
        return [] if key in c.run.stderr else [f"the error does not name {key}: {c.run.stderr.strip()[:200]}"]
    return check


@case30("config_nan_threshold_pyproject", REFUSAL)
def _(ctx: Ctx) -> Setup:
    """``[tool.nsysdoc.rules.host-sync.params] min_idle_pct = nan`` (valid TOML) is refused naming
    the key. Before: a report in which the rule could never fire."""
    s = _walkup(ctx, "[tool.nsysdoc.rules.host-sync.params]\nmin_idle_pct = nan\n")
    s.check = _names_key("rules.host-sync.params.min_idle_pct")
    return s


@case30("config_inf_threshold_yaml", REFUSAL)
def _(ctx: Ctx) -> Setup:
    """nsysdoc.yaml with ``min_idle_pct: .inf`` is refused naming the key. Before: a report."""
    cap = capture("known", ctx.tmp / "run.sqlite")
    cfg = ctx.tmp / "nsysdoc.yaml"
    cfg.write_text("rules:\n  host-sync:\n    params:\n      min_idle_pct: .inf\n")
    return _report(ctx, cap, inputs=[cfg], check=_names_key("rules.host-sync.params.min_idle_pct"))


@case30("rule_param_default_nan", REFUSAL)
def _(ctx: Ctx) -> Setup:
    """A team rule whose parameter default is .nan is refused naming the key. Before: accepted
    (``rules check`` exit 0)."""
    rules = _team_rule(ctx, "kernel_count > limit", extra="params:\n  limit: {default: .nan, doc: A limit.}\n")
    s = Setup(argv=["rules", "check", str(rules)], cwd=ctx.tmp, inputs=[rules])
    s.check = _names_key("params.limit.default")
    return s


# -- rule test case sizes (7) --
def _repeat_nest(levels: int, count: Any) -> str:
    s = "{launch: {name: k, us: 1}}"
    for _ in range(levels):
        s = "{repeat: %s, do: [%s]}" % (count, s)
    return s


def _cases_dir(ctx: Ctx, do: str) -> Path:
    d = _team_rule(ctx, "kernel_count > 0")
    (d / "team-probe.cases.yaml").write_text(
        "rule: team-probe\ncases:\n  - name: big\n    capture:\n      processes:\n        - pid: 1\n"
        f"          do: [{do}]\n    expect: {{fires: true}}\n")
    return d


_FAST = dict(timeout=20.0, max_seconds=FAST_SECONDS, max_rss_mb=BOUNDED_RSS_MB)


@case30("cases_billion_launches", REFUSAL, **_FAST)
def _(ctx: Ctx) -> Setup:
    """repeat 1000 x 1000 x 1000 launches: refused before anything is built. Before: hang (it
    started building a billion launches)."""
    d = _cases_dir(ctx, _repeat_nest(3, 1000))
    return Setup(argv=["rules", "test", str(d)], cwd=ctx.tmp, inputs=[d])


@case30("cases_repeat_nested_9_deep", REFUSAL, **_FAST)
def _(ctx: Ctx) -> Setup:
    """repeat nested 9 deep (limit 8), one launch in all. Before: accepted (exit 0)."""
    d = _cases_dir(ctx, _repeat_nest(9, 1))
    return Setup(argv=["rules", "test", str(d)], cwd=ctx.tmp, inputs=[d])


@case30("cases_repeat_not_a_number", REFUSAL, **_FAST)
def _(ctx: Ctx) -> Setup:
    """``repeat: many``. Before: traceback (ValueError from int())."""
    d = _cases_dir(ctx, _repeat_nest(1, "many"))
    return Setup(argv=["rules", "test", str(d)], cwd=ctx.tmp, inputs=[d])


# -- symlinked rule files (10) --
def _secret_link(ctx: Ctx, body: str, name: str = "leak.yaml") -> Path:
    secret = ctx.tmp / "secret.env"
    secret.write_text(body)
    d = ctx.tmp / "rules"
    d.mkdir(exist_ok=True)
    os.symlink(secret, d / name)
    return d


@case30("rule_symlink_secret_as_id", REFUSAL)
def _(ctx: Ctx) -> Setup:
    """A rule file linking to a secret that is valid YAML (``id: <secret>``). Before: the id was
    quoted in the error line (does not match the id pattern)."""
    d = _secret_link(ctx, f"id: {SECRET_MARK}a1b2c3\n")
    return Setup(argv=["rules", "check", str(d)], cwd=ctx.tmp, inputs=[d, ctx.tmp / "secret.env"],
                 check=check_no_secret)


@case30("rule_symlink_secret_as_key", REFUSAL)
def _(ctx: Ctx) -> Setup:
    """A rule file linking to ``<SECRET>_TOKEN: x`` (a .env-like file). Before: the key was quoted
    ("unknown field ...")."""
    cap = capture("known", ctx.tmp / "run.sqlite")
    d = _secret_link(ctx, f"{SECRET_MARK}_TOKEN: x\n")
    s = _report(ctx, cap, "--rules", d, inputs=[d, ctx.tmp / "secret.env"])
    s.check = check_no_secret
    return s


@case30("cases_symlink_secret", REFUSAL)
def _(ctx: Ctx) -> Setup:
    """A cases file linking out of the rules folder to ``rule: <secret>``. Before: the rule name
    was quoted ("no rule ...")."""
    d = _team_rule(ctx, "kernel_count > 0")
    _secret_link(ctx, f"rule: {SECRET_MARK}x\ncases:\n  - name: a\n    scenario: healthy_training\n"
                      "    expect: {fires: true}\n", name="team-probe.cases.yaml")
    return Setup(argv=["rules", "test", str(d)], cwd=ctx.tmp, inputs=[d, ctx.tmp / "secret.env"],
                 check=check_no_secret)


# --- issue 30 (outputs, cache, Dask, paths, Ctrl-C) ---
# Names h30_*, Case.item = 30 (appended with case30(), not case(): the i<NN>_ prefix is for items
# 1-13). Each comment says what the code before issue 30 did.
h30 = case30


def _tmpfs(folder: Path, size: str) -> Callable[[], None]:
    """Mount a tiny tmpfs on ``folder`` (a full disk on demand; needs root); returns the unmount."""
    folder.mkdir(parents=True, exist_ok=True)
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        raise Skip("a full-disk case mounts a tiny tmpfs: needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise Skip(f"cannot mount a tmpfs here: {r.stderr.strip()[:200]}")
    return lambda: subprocess.run(["umount", "-l", str(folder)], capture_output=True)


# wrappers around the launcher: standard output on /dev/full, on a pipe nobody reads, Ctrl-C
_STDOUT_FULL = "import os,sys\nfd=os.open('/dev/full',os.O_WRONLY)\nos.dup2(fd,1)\nos.execv(sys.argv[1],sys.argv[1:])\n"
_STDOUT_CLOSED = "import os,sys\nr,w=os.pipe()\nos.dup2(w,1)\nos.close(r)\nos.close(w)\nos.execv(sys.argv[1],sys.argv[1:])\n"
_CTRL_C = (  # Ctrl-C as a terminal sends it: SIGINT to nsysdoc and every process it started (not to
    # the launcher, which is harness); records how long nsysdoc took to exit after it
    "import os,signal,subprocess,sys,time\n"
    "delay,out=float(sys.argv[1]),sys.argv[2]\n"
    # a terminal's foreground job: SIGINT not ignored, even when the tests run as a background job
    # of a non-interactive shell (which starts them with SIGINT ignored, inherited by nsysdoc)
    "signal.signal(signal.SIGINT,signal.SIG_DFL)\n"
    "p=subprocess.Popen(sys.argv[3:])\n"
    "time.sleep(delay)\n"
    "def kids(pid):\n"
    "    out=[]\n"
    "    for t in os.listdir(f'/proc/{pid}/task'):\n"
    "        try: out+= [int(x) for x in open(f'/proc/{pid}/task/{t}/children').read().split()]\n"
    "        except OSError: pass\n"
    "    return out\n"
    "todo,seen=kids(p.pid),[]\n"
    "while todo:\n"
    "    q=todo.pop(); seen.append(q); todo+=kids(q)\n"
    "t0=time.monotonic()\n"
    "for q in seen:\n"
    "    try: os.kill(q,signal.SIGINT)\n"
    "    except OSError: pass\n"
    "rc=p.wait()\n"
    "open(out,'w').write(f'{time.monotonic()-t0:.3f} {len(seen)}' if seen else 'none')\n"
    "sys.exit(rc if rc>=0 else 128-rc)\n"
)


def _stderr_lines(ctx: Ctx) -> list[str]:
    return [ln for ln in ctx.run.stderr.splitlines() if ln.strip()]


def _full_disk_keeps_previous(ctx: Ctx, inputs: list[Path], name: str, what: str,
                              argv: Callable[[Path], list[str]]) -> Setup:
    """An output ``name`` on a 16 kB tmpfs that already holds a previous ``what``: the run must
    leave that file intact and no temporary file beside it."""
    small = ctx.tmp / "small"
    umount = _tmpfs(small, "16k")
    prev = small / name
    text = f"PREVIOUS {what.split()[-1].upper()}\n"
    prev.write_text(text)
    state: dict = {}

    def cleanup() -> None:
        state["files"] = sorted(p.name for p in small.iterdir())
        state["prev"] = prev.read_text() if prev.exists() else None
        umount()

    def check(c: Ctx) -> list[str]:
        p = []
        if state.get("prev") != text:
            p.append(f"the previous {what} was destroyed: now {str(state.get('prev'))[:60]!r}")
        if state.get("files") != [name]:
            p.append(f"files left in the folder: {state.get('files')}")
        return p
    return Setup(argv=argv(prev), cwd=ctx.tmp, inputs=inputs, check=check, cleanup=cleanup)


@h30("output_enospc_keeps_previous", REFUSAL)
def _(ctx: Ctx) -> Setup:
    """report -o on a full disk: one error line, the previous report intact, no temporary file left.
    Before: write_text truncated the previous report, then failed half-way (a partial file)."""
    cap = capture("known", ctx.tmp / "run.sqlite")
    return _full_disk_keeps_previous(ctx, [cap], "report.html", "report", lambda prev: [
        "report", "run.sqlite", "-f", "html", "-o", str(prev), "--no-cache"])


@h30("job_output_enospc_keeps_previous", REFUSAL)
def _(ctx: Ctx) -> Setup:
    """job -o on a full disk: one error line, the previous page intact, no temporary file left.
    Before: the previous page was truncated and a partial one left."""
    caps = [capture("known", ctx.tmp / f"rank{i}.sqlite") for i in range(2)]
    return _full_disk_keeps_previous(ctx, caps, "job.html", "job page", lambda prev: [
        "job", *map(str, caps), "-q", "-j", "1", "-o", str(prev), "--no-cache", "--no-config"])


@h30("diff_output_enospc_keeps_previous", REFUSAL)
def _(ctx: Ctx) -> Setup:
    """diff -o on a full disk: one error line, the previous diff intact, no temporary file left.
    Before: the previous diff was truncated and a partial page left."""
    caps = [capture("known", ctx.tmp / f"run{i}.sqlite") for i in range(2)]
    return _full_disk_keeps_previous(ctx, caps, "diff.html", "diff", lambda prev: [
        "diff", *map(str, caps), "-q", "-o", str(prev), "--no-cache", "--no-config"])


@h30("rank_reports_enospc_no_partial_pages", FINISH)
def _(ctx: Ctx) -> Setup:
    """job --rank-reports into a full folder: no half-written rank page is left there, and no
    traceback. Before: each rank's page was written in place and left truncated, and each rank's
    error was "internal error: OSError: [Errno 28] ... (please report this)"."""
    caps = [capture("known", ctx.tmp / f"rank{i}.sqlite") for i in range(2)]
    small = ctx.tmp / "small"
    umount = _tmpfs(small, "16k")
    state: dict = {}

    def cleanup() -> None:
        state["files"] = sorted(p.name for p in small.iterdir())
        umount()

    def check(c: Ctx) -> list[str]:
        p = [] if not state.get("files") else [f"partial rank pages left: {state.get('files')}"]
        return p + ([] if c.run.rc == 2 and _stderr_problem(c.run.stderr) is None
                    else [f"expected one error line (no rank could be written), exit {c.run.rc}: {_stderr_lines(c)[:2]}"])
    return Setup(argv=["job", *map(str, caps), "-q", "-j", "1", "-f", "json", "-o", "job.json", "--rank-reports",
                       str(small), "--no-cache", "--no-config"], cwd=ctx.tmp, inputs=caps, check=check,
                 cleanup=cleanup)


@h30("cache_disk_full", REPORT)
def _(ctx: Ctx) -> Setup:
    """The cache folder's disk is full: the report is made without the cache, one warning line.
    Before: this capture's entry failed silently (no word that no cache was written); a bigger
    one (the bundled sample) was an internal error (OSError: cannot write spilled rows: ENOSPC)."""
    cap = capture("healthy", ctx.tmp / "run.sqlite")
    full = ctx.tmp / "fullcache"
    umount = _tmpfs(full, "64k")

    def check(c: Ctx) -> list[str]:
        warn = [ln for ln in _stderr_lines(c) if ln.startswith("nsysdoc: warning:") and "cache" in ln]
        return [] if len(warn) == 1 else [f"expected one cache warning line, stderr: {_stderr_lines(c)[:4]}"]
    s = _report(ctx, cap, check=check, env={"NSYSDOC_CACHE_DIR": str(full)})
    s.cleanup = umount
    return s


@h30("cache_unwritable_warns", REPORT)
def _(ctx: Ctx) -> Setup:
    """A cache folder that cannot be created (under a regular file): report, one warning line.
    Before: the cache was skipped silently (no word that every run re-reads the capture)."""
    cap = capture("known", ctx.tmp / "run.sqlite")
    (ctx.tmp / "afile").write_text("x")

    def check(c: Ctx) -> list[str]:
        warn = [ln for ln in _stderr_lines(c) if ln.startswith("nsysdoc: warning:") and "cache" in ln]
        return [] if len(warn) == 1 else [f"expected one cache warning line, stderr: {_stderr_lines(c)[:4]}"]
    return _report(ctx, cap, check=check, env={"NSYSDOC_CACHE_DIR": str(ctx.tmp / "afile" / "cache")})


@h30("cache_clear_spares_run_in_progress", SUCCESS)
def _(ctx: Ctx) -> Setup:
    """cache clear keeps a fresh .tmp-* folder (another nsysdoc is writing an entry there) and removes
    a stale one. Before: every .tmp-* folder was removed, pulling the files from under a running report."""
    cache = ctx.tmp / "c"
    fresh, stale = cache / ".tmp-fresh1", cache / ".tmp-stale1"
    for d in (fresh, stale):
        d.mkdir(parents=True)
        (d / "kernels.arrow").write_bytes(b"x" * 100)
    old = time.time() - 3 * 3600
    os.utime(stale, (old, old))

    def check(c: Ctx) -> list[str]:
        p = [] if fresh.is_dir() and (fresh / "kernels.arrow").exists() else ["the running write's folder was removed"]
        return p + ([] if not stale.exists() else ["a stale temporary folder was kept"])
    return Setup(argv=["cache", "clear", "--cache-dir", str(cache)], cwd=ctx.tmp, inputs=[], check=check)


def _fake_server(mode: str) -> tuple[int, Callable[[], None]]:
    """A local TCP server that is not a Dask scheduler: 'random' sends random bytes (whose first 8
    read as an exabyte length), 'silent' accepts and says nothing, 'http' answers HTTP requests."""
    import socket

    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    conns: list = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                return
            conns.append(c)
            try:
                if mode == "random":
                    c.sendall(b"\xf0\xe1\xd2\xc3\xb4\xa5\x96\x27" + random.Random(30).randbytes(4088))
                elif mode == "http":
                    c.settimeout(5)
                    if c.recv(65536):
                        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi")
            except OSError:
                pass

    threading.Thread(target=serve, daemon=True, name="fake-dask").start()

    def close() -> None:
        stop.set()
        for c in [srv, *conns]:
            try:
                c.close()
            except OSError:
                pass
    return srv.getsockname()[1], close


for _mode, _before in (("random", "a MemoryError traceback: distributed read the first 8 bytes as a frame "
                                  "length and tried to allocate 2.8 EiB"),
                       ("silent", "a hang: Client waited past the case's 30 s timeout (over 120 s by hand)"),
                       ("http", "a hang: distributed waited for a handshake an HTTP server never sends")):
    def _mk(mode: str, before: str):
        def build(ctx: Ctx) -> Setup:
            try:
                import distributed  # noqa: F401
            except ImportError:
                raise Skip("dask.distributed is not installed")
            caps = [capture("known", ctx.tmp / f"rank{i}.sqlite") for i in range(2)]
            port, close = _fake_server(mode)
            return Setup(argv=["job", *map(str, caps), "--dask", f"tcp://127.0.0.1:{port}", "-f", "json", "-q",
                               "--no-config"], cwd=ctx.tmp, inputs=caps, cleanup=close)
        build.__doc__ = f"--dask at a {mode} server that is not Dask: one line within the connect timeout. Before: {before}."
        return build
    h30(f"dask_not_dask_{_mode}", REFUSAL, max_seconds=20.0)(_mk(_mode, _before))


@h30("o_trailing_slash_is_folder", REPORT)
def _(ctx: Ctx) -> Setup:
    """-o newdir/ (missing, trailing slash) is a folder: newdir/run.nsysdoc.json.
    Before: the slash was dropped and the report written to a file named newdir."""
    cap = capture("known", ctx.tmp / "run.sqlite")
    return Setup(argv=["report", "run.sqlite", "-f", "json", "-o", "newdir/"], cwd=ctx.tmp, inputs=[cap],
                 output=ctx.tmp / "newdir" / "run.nsysdoc.json")


@h30("o_dash_is_stdout", REPORT)
def _(ctx: Ctx) -> Setup:
    """-o - writes the report to standard output (no file named '-').
    Before: a file named '-' was written, standard output stayed empty."""
    cap = capture("known", ctx.tmp / "run.sqlite")

    def check(c: Ctx) -> list[str]:
        p = [] if not (ctx.tmp / "-").exists() else ["a file named '-' was written"]
        try:
            json.loads(c.run.stdout)
        except ValueError as exc:
            p.append(f"standard output is not the JSON report: {exc}: {c.run.stdout[:80]!r}")
        return p
    return Setup(argv=["report", "run.sqlite", "-f", "json", "-o", "-"], cwd=ctx.tmp, inputs=[cap], check=check)


@h30("stdout_dev_full", REFUSAL)
def _(ctx: Ctx) -> Setup:
    """report -f json -o - > /dev/full: one error line, exit 2. Before: -o - wrote a file named '-'
    (exit 0; without -o the refusal was already one line, naming the report 'None')."""
    cap = capture("known", ctx.tmp / "run.sqlite")
    return Setup(argv=["report", "run.sqlite", "-f", "json", "-q", "-o", "-"], cwd=ctx.tmp, inputs=[cap],
                 wrap=[sys.executable, "-c", _STDOUT_FULL])


@h30("stdout_closed_pipe", FINISH)
def _(ctx: Ctx) -> Setup:
    """report -f json | (a reader that closed): exits quietly with 141 (as if killed by SIGPIPE, like
    cat or grep), nothing on stderr. Before: exit 2, 'nsysdoc: error: cannot write the report None:
    Broken pipe'."""
    cap = capture("known", ctx.tmp / "run.sqlite")

    def check(c: Ctx) -> list[str]:
        p = [] if c.run.rc == 141 else [f"exit {c.run.rc}, expected 141 (standard output's reader went away)"]
        return p + ([] if not _stderr_lines(c) else [f"stderr not empty: {_stderr_lines(c)[:3]}"])
    return Setup(argv=["report", "run.sqlite", "-f", "json", "-q"], cwd=ctx.tmp, inputs=[cap], check=check,
                 wrap=[sys.executable, "-c", _STDOUT_CLOSED])


@h30("output_name_too_long", REFUSAL, max_seconds=8.0)
def _(ctx: Ctx) -> Setup:
    """-o with a 305-byte file name: refused before the capture is read (one line).
    Before: a traceback (OSError: File name too long, from Path.is_dir)."""
    cap = capture("big_steps", ctx.tmp / "run.sqlite")  # 11 s to analyse: the refusal must come first

    def check(c: Ctx) -> list[str]:
        return [] if "255" in c.run.stderr else [f"the error does not give the limit: {_stderr_lines(c)[:1]}"]
    return Setup(argv=["report", "run.sqlite", "-f", "json", "-o", "x" * 300 + ".json"], cwd=ctx.tmp, inputs=[cap],
                 check=check)


@h30("non_utf8_file_name", REPORT)
def _(ctx: Ctx) -> Setup:
    """A capture whose name is not UTF-8 (b'run\\xff.sqlite'): reported into out/ under that name.
    Before: internal error (UnicodeEncodeError quoting the SQLite URI)."""
    name = os.fsdecode(b"run\xff.sqlite")
    cap = capture("known", ctx.tmp / name)
    return Setup(argv=["report", name, "-f", "json", "-o", "out/"], cwd=ctx.tmp, inputs=[cap],
                 output=ctx.tmp / "out" / os.fsdecode(b"run\xff.nsysdoc.json"))


def _ctrl_c_check(limit_s: float):
    def check(c: Ctx) -> list[str]:
        p = [] if c.run.rc == 130 else [f"exit {c.run.rc}, expected 130"]
        lines = _stderr_lines(c)
        if lines[-1:] != ["nsysdoc: interrupted"] or len([ln for ln in lines if "interrupt" in ln.lower()]) != 1:
            p.append(f"expected one line 'nsysdoc: interrupted', stderr: {lines[-4:]}")
        took = (c.tmp / "ctrl_c.txt").read_text().split() if (c.tmp / "ctrl_c.txt").exists() else ["none"]
        if took[0] == "none":
            raise HarnessError("nsysdoc had already finished before the Ctrl-C")
        if float(took[0]) > limit_s:
            p.append(f"took {float(took[0]):.1f} s to stop after Ctrl-C, limit {limit_s:g} s")
        return p
    return check


@h30("ctrl_c_job_many_ranks", FINISH, timeout=120.0)
def _(ctx: Ctx) -> Setup:
    """Ctrl-C 5 s into a 200-rank job (-j 2): one line, exit 130, stopped within 2 s.
    Before: no message, and 27 s to stop (the process pool finished its running ranks first)."""
    ranks = ctx.tmp / "ranks"
    for i in range(200):
        capture("known", ranks / f"rank{i}.sqlite")
    return Setup(argv=["job", str(ranks), "-j", "2", "-q", "-f", "json", "-o", "job.json", "--no-config"],
                 cwd=ctx.tmp, inputs=[], check=_ctrl_c_check(2.0),
                 wrap=[sys.executable, "-c", _CTRL_C, "5", str(ctx.tmp / "ctrl_c.txt")])


@h30("ctrl_c_report", FINISH, timeout=60.0)
def _(ctx: Ctx) -> Setup:
    """Ctrl-C 3 s into a report (11 s of work): one line 'nsysdoc: interrupted', exit 130.
    Before: exit 130 without a word (Typer swallows KeyboardInterrupt)."""
    cap = capture("big_steps", ctx.tmp / "run.sqlite")
    return Setup(argv=["report", "run.sqlite", "-q", "-f", "json", "-o", "r.json", "--no-cache"], cwd=ctx.tmp,
                 inputs=[cap], check=_ctrl_c_check(2.0),
                 wrap=[sys.executable, "-c", _CTRL_C, "3", str(ctx.tmp / "ctrl_c.txt")])


# ---------------------------------------------------------------------------------------------
# random damage of a fixture capture (the sweep's --flips)
# ---------------------------------------------------------------------------------------------
def flip_cases(n: int, seed: int = 0) -> list[Case]:
    out = []
    for i in range(n):
        def build(ctx: Ctx, i: int = i) -> Setup:
            rng = random.Random(seed * 1_000_003 + i)
            cap = capture("healthy", ctx.tmp / "run.sqlite")
            data = bytearray(cap.read_bytes())
            kind = ("flip", "truncate", "page")[i % 3]
            if kind == "flip":
                for _ in range(rng.randint(1, 16)):
                    pos = rng.randrange(len(data))
                    data[pos] ^= rng.randint(1, 255)
            elif kind == "truncate":
                data = data[:rng.randrange(len(data))]
            else:
                psize = int.from_bytes(data[16:18], "big") or 4096
                p = rng.randrange(len(data) // psize)
                data[p * psize:(p + 1) * psize] = bytes(rng.getrandbits(8) for _ in range(psize))
            cap.write_bytes(bytes(data))
            return _report(ctx, cap)
        out.append(Case(name=f"flip_{seed}_{i:04d}", item=7, expect=EITHER, build=build,
                        doc="seeded random byte flips / truncation / page overwrite"))
    return out


# ---------------------------------------------------------------------------------------------
# running a case
# ---------------------------------------------------------------------------------------------
def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _state(p: Path) -> Any:
    """What a path is, without ever opening a FIFO or a device."""
    try:
        lst = os.lstat(p)
    except FileNotFoundError:
        return None
    except PermissionError:
        return "unreadable"
    if stat.S_ISLNK(lst.st_mode):
        target = os.readlink(p)
        try:
            st = os.stat(p)
        except OSError:
            return ("link", target, None)
        return ("link", target, sha256(p) if stat.S_ISREG(st.st_mode) else stat.S_IFMT(st.st_mode))
    if stat.S_ISREG(lst.st_mode):
        try:
            return ("file", lst.st_size, sha256(p))
        except PermissionError:
            return "unreadable"
    return ("special", stat.S_IFMT(lst.st_mode))


def snapshot(paths: list[Path]) -> dict[str, Any]:
    """Hash every input (folders: every entry below; files: plus their -wal/-journal sidecars)."""
    out: dict[str, Any] = {}
    for p in paths:
        p = Path(p)
        if p.is_dir() and not p.is_symlink():
            for root, dirs, files in os.walk(p):
                for name in dirs + files:
                    q = Path(root) / name
                    if not q.is_dir() or q.is_symlink():
                        out[str(q)] = _state(q)
            continue
        out[str(p)] = _state(p)
        if str(p).startswith("/dev/"):
            continue
        for side in ("-wal", "-journal"):
            out[str(p) + side] = _state(Path(str(p) + side))
    return out


def _stderr_problem(stderr: str) -> str | None:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if not lines or not lines[0].startswith("nsysdoc: error:"):
        return f"stderr does not start with one 'nsysdoc: error:' line: {lines[:3]}"
    if len(lines) > 2 or (len(lines) == 2 and not lines[1].startswith("nsysdoc: hint:")):
        return f"stderr has more than one error line (+ hint): {[ln[:160] for ln in lines[:4]]}"
    return None


def _internal(stderr: str) -> str | None:
    for ln in stderr.splitlines():
        if "internal error" in ln.lower():
            return ln.strip()[:300]
    if "Traceback" in stderr:
        errs = [ln.strip() for ln in stderr.splitlines()
                if re.match(r"[A-Za-z_][\w.]{0,80}(Error|Exception|Interrupt)\b", ln[:400])]
        tail = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        return "Traceback: " + ((errs or tail or [""])[-1][:300])
    return None


@dataclass
class Outcome:
    case: Case
    category: str = ""            # refusal | report | internal | hang | other | skipped | harness
    failures: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    run: Run | None = None
    skipped: str | None = None
    harness: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failures and not self.harness

    def explain(self) -> str:
        head = f"{self.case.name} (issue item {self.case.item}; expect {self.case.expect}): {self.case.doc}"
        parts = [head, *("  - " + f for f in self.failures)]
        if self.harness:
            parts.append("  HARNESS PROBLEM (the test, not nsysdoc): " + self.harness)
        if self.run:
            parts.append(self.run.describe())
        return "\n".join(parts)


def run_case(c: Case, tmp: Path) -> Outcome:
    tmp.mkdir(parents=True, exist_ok=True)
    ctx = Ctx(case=c, tmp=tmp)
    oc = Outcome(case=c)
    try:
        setup = c.build(ctx)
    except Skip as exc:
        oc.category, oc.skipped = "skipped", str(exc)
        return oc
    except HarnessError as exc:
        oc.category, oc.harness = "harness", f"setup: {exc}"
        return oc
    ctx.setup = setup
    try:
        before = snapshot(setup.inputs)
        run = run_nsysdoc(setup.argv, cwd=setup.cwd, env=ctx.env(), timeout=c.timeout, wrap=setup.wrap)
    finally:
        if setup.cleanup:
            setup.cleanup()
    after = snapshot(setup.inputs)
    oc.run = ctx.run = run
    f = oc.failures
    internal = _internal(run.stderr)
    clean_refusal = run.rc == 2 and not internal and _stderr_problem(run.stderr) is None
    if run.timed_out:
        oc.category = "hang"
        f.append(f"hang: still running after {c.timeout:.0f}s (killed)")
    elif internal or (run.rc is not None and run.rc < 0):
        oc.category = "internal"
        f.append(f"internal error: {internal or f'killed by signal {-run.rc}'}")
    elif clean_refusal:
        oc.category = "refusal"
    elif run.rc in (0, 1):
        oc.category = "report"
    else:
        oc.category = "other"
    oc.modified = [k for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
    if oc.modified:
        f.append(f"input modified: {', '.join(Path(m).name for m in oc.modified)}")
    if c.max_seconds and not run.timed_out and run.seconds > c.max_seconds:
        f.append(f"took {run.seconds:.1f}s, limit {c.max_seconds:.0f}s")
    if c.max_rss_mb and run.max_rss_mb and run.max_rss_mb > c.max_rss_mb:
        f.append(f"peak RSS {run.max_rss_mb:.0f} MB, limit {c.max_rss_mb:.0f} MB")
    produced = False
    if not run.timed_out and not internal:
        if c.expect == REFUSAL and not clean_refusal:
            if run.rc == 2:
                f.append(_stderr_problem(run.stderr) or "unclean refusal")
            else:
                f.append(f"exit {run.rc}, expected a refusal (exit 2)"
                         + (" and the output overwrote an input" if oc.modified else ""))
        elif c.expect == SUCCESS and run.rc != 0:
            f.append(f"exit {run.rc}, expected 0: {(run.stderr.strip().splitlines() or [''])[0][:200]}")
        elif c.expect in (REPORT, EITHER) and not clean_refusal:
            if run.rc not in (0, 1):
                first = (run.stderr.strip().splitlines() or [""])[0][:240]
                f.append(f"exit {run.rc}, expected a report (exit 0/1): {first}")
            else:
                produced = _read_output(ctx, oc)
        elif c.expect == REPORT and clean_refusal:
            first = (run.stderr.strip().splitlines() or [""])[0][:240]
            f.append(f"refused (exit 2), expected a report: {first}")
    if c.expect == REPORT:
        run_check = produced
    elif c.expect == EITHER:
        run_check = produced or clean_refusal
    else:
        run_check = not run.timed_out
    run_check = run_check and setup.check is not None
    if run_check:
        try:
            oc.wrong = list(setup.check(ctx))
        except HarnessError as exc:
            oc.harness = f"check: {exc}"
        except Exception as exc:  # a report of an unexpected shape is a failure, not a harness bug
            oc.wrong = [f"report does not have the expected shape: {type(exc).__name__}: {exc}"]
        f.extend(oc.wrong)
    return oc


def _read_output(ctx: Ctx, oc: Outcome) -> bool:
    out = ctx.setup.output
    if out is None:
        return True
    if not out.exists():
        oc.failures.append(f"no report written at {out}")
        return False
    try:
        ctx.text = out.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        oc.failures.append(f"report is not UTF-8: {exc}")
        return False
    if out.suffix == ".json":
        try:
            ctx.data = json.loads(ctx.text)
        except ValueError as exc:
            oc.failures.append(f"report JSON does not parse: {exc}")
            return False
    elif out.suffix == ".html" and "</html>" not in ctx.text.lower():
        oc.failures.append("HTML report is incomplete (no </html>)")
        return False
    elif out.suffix == ".md" and not ctx.text.strip():
        oc.failures.append("Markdown report is empty")
        return False
    return True


class Runner:
    """Runs cases concurrently (the subprocesses do the work; threads only wait)."""

    def __init__(self, cases: list[Case], base: Path, workers: int | None = None) -> None:
        self.base = Path(base)
        self.cases = {c.name: c for c in cases}
        w = workers or int(os.environ.get("NSYSDOC_HOSTILE_WORKERS", "0")) or min(4, (os.cpu_count() or 2) + 1)
        self.pool = cf.ThreadPoolExecutor(max_workers=w, thread_name_prefix="hostile")
        # slow cases first: they set the wall-clock time
        order = sorted(cases, key=lambda c: (not c.slow, -c.timeout))
        self.futures = {c.name: self.pool.submit(self._one, c) for c in order}

    def _one(self, c: Case) -> Outcome:
        try:
            return run_case(c, self.base / c.name)
        except Exception as exc:  # noqa: BLE001 - report, do not kill the pool
            import traceback

            oc = Outcome(case=c, category="harness")
            oc.harness = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
            return oc

    def outcome(self, name: str) -> Outcome:
        return self.futures[name].result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
