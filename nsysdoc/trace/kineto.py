"""Read a PyTorch Profiler (Kineto) Chrome-trace JSON into a :class:`~nsysdoc.trace.model.Trace`.

The only module that knows the Kineto trace format (``docs/kineto.md``). It produces exactly the
frames and columns the SQLite reader produces (:data:`nsysdoc.trace.frames.FRAME_COLUMNS`), so every
metric, rule and report above it is the same for both inputs.

How:

* **Streaming.** ``traceEvents`` is read from the file's bytes (``gzip.open`` for ``.gz``) a
  window of 8 MB at a time, never decoded to text: :mod:`msgspec` decodes the window's events into structs of
  only the fields a row needs (a ``cpu_op``'s input shapes and the like are skipped, never built),
  and :func:`_chunk` turns them into compact typed columns (:class:`array.array`) column by column.
  Any window it does not take (damage, values of unexpected types, text without event ends) goes
  to the one-event-at-a-time reader (:func:`_events_slow`, :meth:`json.JSONDecoder.raw_decode`),
  which defines the behaviour: both give the same rows. The file is never held as Python objects
  (``benchmarks/bench_kineto.py`` measures it against ``json.load``).
* **Times.** ``ts``/``dur`` are microseconds, written by Kineto as decimal text with 3 digits
  (``"5203460419.456"``) since PyTorch 2.0 and as integers before. Floats are read as their text
  and converted to integer nanoseconds exactly (no binary float in between), so nothing drifts
  and ordering is kept; other decimal forms are rounded half-even to the nanosecond.
* **Validation.** The SQLite reader's row checks (:func:`nsysdoc.trace.frames.validate`): rows no
  capture can hold are dropped and counted in ``dropped_rows``.
* **What Kineto never records** (OS runtime calls, GPU metrics; synchronization records unless the
  trace has ``cuda_sync`` events) is ``traced[...] = False`` and listed in ``Trace.not_recorded``,
  so rules needing it are skipped with the reason.
* The canonical tables are cached like an nsys export's (the same cache functions,
  :mod:`nsysdoc.trace.cache_entry`, and key, with this module's format number in the key's version).
"""
from __future__ import annotations

import codecs
import gzip
import json
import os
import re
import stat
import time
import zlib
from array import array
from itertools import compress
from decimal import ROUND_HALF_EVEN, Decimal, DecimalException
from json import JSONDecodeError
from pathlib import Path

import msgspec
import numpy as np

from .. import cache as cache_m
from ..errors import CorruptFileError, EmptyCaptureError, InputError
from ..inputs import regular_file
from . import frames as F
from . import schema as S
from .cache_entry import CACHE_FORMAT, cache_read, cache_tmp, publish
from .nvtx_text import Groups, text_facts
from .columns import Columns, factorize
from .model import StringTable, Trace

#: ``Trace.source_tool`` of traces read here.
SOURCE_TOOL = "pytorch-profiler"
#: Bump when the mapping below changes: cached tables of older versions are then rebuilt.
KINETO_FORMAT = 5
GZIP_MAGIC = b"\x1f\x8b"
#: Characters read per refill of the stream, and the most :func:`is_kineto_trace` looks at.
CHUNK_CHARS = 1 << 20
SNIFF_CHARS = 4 << 20
#: The largest single JSON value (one event, or one metadata value) accepted.
MAX_VALUE_CHARS = 256 << 20

#: What Kineto cannot record (``traced`` key -> what it is); ``cuda_sync`` only when absent.
NOT_RECORDED = {
    "osrt": "OS runtime calls (poll, futex, read, ...)",
    "gpu_metrics": "GPU metrics (SM active, tensor-core activity)",
    "cuda_sync": "CUDA synchronization records",
}

# event kinds (by ``cat``: PyTorch >= 1.13 names, and the 1.8-1.12 names)
K_KERNEL, K_MEMCPY, K_MEMSET, K_RUNTIME, K_DRIVER, K_SYNC, K_HOST, K_SPAN, K_OVERHEAD = range(9)
CATEGORIES = {
    "kernel": K_KERNEL, "Kernel": K_KERNEL,
    "gpu_memcpy": K_MEMCPY, "Memcpy": K_MEMCPY,
    "gpu_memset": K_MEMSET, "Memset": K_MEMSET,
    "cuda_runtime": K_RUNTIME, "Runtime": K_RUNTIME,
    "cuda_driver": K_DRIVER, "Driver": K_DRIVER,
    "cuda_sync": K_SYNC,
    "cpu_op": K_HOST, "Operator": K_HOST, "user_annotation": K_HOST, "python_function": K_HOST,
    "Trace": K_SPAN,
    "overhead": K_OVERHEAD,
}
#: ``domain`` of host ranges by category (user annotations are like NVTX ranges of no domain).
HOST_DOMAIN = {"cpu_op": "cpu_op", "Operator": "cpu_op", "user_annotation": "", "python_function": "python_function"}
#: canonical category name of each kind (``Trace.tables``, dropped-row labels)
TABLE_NAMES = {K_KERNEL: "kernel", K_MEMCPY: "gpu_memcpy", K_MEMSET: "gpu_memset", K_RUNTIME: "cuda_runtime",
               K_DRIVER: "cuda_driver", K_SYNC: "cuda_sync", K_HOST: "host ranges"}
#: flow categories that link a launch call to its GPU operation (PyTorch >= 1.13, and before)
FLOW_CATEGORIES = frozenset({"ac2g", "async"})

#: Kineto's memory kind names (CUPTI) -> nsys ``ENUM_CUDA_MEM_KIND`` numbering (0 = pageable).
MEM_KINDS = {"pageable": 0, "pinned": 1, "device": 2, "array": 3, "managed": 4, "device static": 5,
             "managed static": 6, "unknown": 7}
COPY_KINDS = {v: k for k, v in S.COPY_KIND_LABELS.items() if not v.startswith("UVM")}
_MEMCPY_NAME = re.compile(r"^\s*Memcpy\s+(\w+)\s*(?:\(\s*([^)]*?)\s*->\s*([^)]*?)\s*\))?", re.IGNORECASE)
_MEMSET_NAME = re.compile(r"^\s*Memset\s*\(\s*([^)]*?)\s*\)", re.IGNORECASE)
_SYNC_TYPES = (("wait event", 2), ("event sync", 1), ("stream sync", 3), ("context sync", 4), ("device sync", 4))

_WS = re.compile(r"[ \t\n\r]*")
_AFTER = re.compile(r"[ \t\n\r]*([,\]])")
_AFTER_KEY = re.compile(r"[ \t\n\r]*([,}])")
_COLON = re.compile(r"[ \t\n\r]*:[ \t\n\r]*")
_STREAM_TID = re.compile(r"^\s*stream\s+(\d+)\s*$", re.IGNORECASE)
BAD = F.BAD
_I32 = 1 << 31
_LIM = 1 << 62
#: longest number text read as a time (longer ones are out of range: the row is dropped)
_MAX_NUMBER_CHARS = 100


def _big_int(text: str):
    """``parse_int`` of the fallback decoder: an integer longer than Python's int-from-text limit
    (4300 digits) stays text, so the value is out of range (its row dropped), not a refusal."""
    return int(text) if len(text) <= 4000 else text


class NotJsonError(InputError):
    """The file is not JSON (nor gzip-compressed JSON)."""


class NotATraceError(InputError):
    """The file is JSON, but not a Chrome trace (no ``traceEvents``)."""


class TruncatedTraceError(CorruptFileError):
    """The gzip stream or the JSON ends before the trace does."""


class EmptyTraceError(EmptyCaptureError):
    """The trace holds no event nsysdoc can use."""


# --------------------------------------------------------------------------------------------
# detection
# --------------------------------------------------------------------------------------------
def _is_regular(path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _head(path, n: int = 4096) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


def _json_start(head: bytes) -> bool:
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    return text[:1] in (b"{", b"[")


def routes_here(path) -> bool:
    """Whether :func:`nsysdoc.trace.load_trace` should hand ``path`` to this loader: a regular file
    that is gzip-compressed, starts with a JSON object or array, or is named ``*.json``/``*.json.gz``
    (so that a damaged one gets this loader's refusal, not "not SQLite"). Never true for SQLite,
    for missing or non-regular paths (the nsys path's checks refuse those), and never opens a FIFO."""
    if not _is_regular(path):
        return False
    head = _head(path)
    if head.startswith(b"SQLite format 3\x00"):
        return False
    if head.startswith(GZIP_MAGIC) or _json_start(head):
        return True
    name = Path(path).name.lower()
    return name.endswith((".json", ".json.gz"))


def is_kineto_trace(path) -> bool:
    """True when ``path`` is (gzip-compressed) JSON whose top-level object has ``traceEvents``.
    Looks at the first :data:`SNIFF_CHARS` characters only (Kineto writes its few metadata keys
    first); never loads the file, never raises."""
    if not _is_regular(path):
        return False
    head = _head(path, 4)
    try:
        if head.startswith(GZIP_MAGIC):
            with gzip.open(path, "rb") as gz:
                raw = gz.read(SNIFF_CHARS)
        else:
            with open(path, "rb") as fh:
                raw = fh.read(SNIFF_CHARS)
    except (OSError, EOFError, zlib.error):
        return False
    text = raw.decode("utf-8", "ignore").removeprefix("\ufeff")
    try:
        return _top_keys_have_events(text)
    except (JSONDecodeError, ValueError, IndexError, RecursionError):
        return False


def _top_keys_have_events(text: str) -> bool:
    dec = json.JSONDecoder(parse_float=str)
    pos = _WS.match(text, 0).end()
    if text[pos:pos + 1] != "{":
        return False
    pos += 1
    while True:
        pos = _WS.match(text, pos).end()
        if text[pos:pos + 1] != '"':
            return False
        key, pos = json.decoder.scanstring(text, pos + 1)
        m = _COLON.match(text, pos)
        if m is None:
            return False
        pos = m.end()
        if key == "traceEvents":
            return text[pos:pos + 1] == "["
        _, pos = dec.raw_decode(text, pos)
        m = _AFTER_KEY.match(text, pos)
        if m is None or m.group(1) == "}":
            return False
        pos = m.end()


# --------------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------------
def _ns_slow(v) -> int:
    """Microseconds (decimal text or a number) -> integer ns, rounded half-even; BAD if not a
    finite number within +-2^62 ns."""
    if v.__class__ is int:
        x = v * 1000
    elif v.__class__ is str:
        if len(v) > _MAX_NUMBER_CHARS:
            return BAD
        try:
            d = Decimal(v.strip())
            # a huge exponent (1e999999) is out of range before any arithmetic (which would
            # overflow the decimal context, or build a million-digit integer)
            if not d.is_finite() or (d and d.adjusted() > 30):
                return BAD
            x = int((d * 1000).to_integral_value(ROUND_HALF_EVEN))
        except DecimalException:
            return BAD
    else:
        return BAD
    return x if -_LIM < x < _LIM else BAD


def us_to_ns(v) -> int:
    """A Kineto ``ts``/``dur`` value (microseconds) as integer nanoseconds, exactly: floats arrive
    as their decimal text (``parse_float=str``), and Kineto's ``"{}.{:03}"`` form is one integer
    parse. :data:`BAD` for anything that is not a number."""
    if v.__class__ is str:
        if len(v) > 4 and v[-4] == "." and len(v) < 20:
            try:
                return int(v[:-4] + v[-3:])
            except ValueError:
                return _ns_slow(v)
        return _ns_slow(v)
    if v.__class__ is int and -_LIM < v < (_LIM // 1000):
        return v * 1000
    return _ns_slow(v) if v.__class__ is int else BAD


def _small_int(v, lo: int, hi: int, default: int) -> int:
    if v.__class__ is int and lo <= v < hi:
        return v
    if v.__class__ is str:
        t = v.strip()
        if t.isdigit() and len(t) < 12 and lo <= int(t) < hi:
            return int(t)
    return default


def _stream_of(tid) -> int:
    """A GPU event's stream when ``args.stream`` is missing: its tid (``7`` or ``"stream 7"``)."""
    if tid.__class__ is int and -_I32 <= tid < _I32:
        return tid
    if tid.__class__ is str:
        m = _STREAM_TID.match(tid)
        if m and len(m.group(1)) < 10:
            return int(m.group(1))
        return _small_int(tid, -_I32, _I32, 0)
    return 0


def short_kernel_name(name: str) -> str:
    """nsys's ``shortName`` of a demangled kernel name: the function's own name, without return
    type, namespaces, template arguments and parameters (``void at::native::(anonymous
    namespace)::multi_tensor_apply_kernel<...>(...)`` -> ``multi_tensor_apply_kernel``)."""
    s = name.strip()
    out = []
    angle = 0
    i, n = 0, len(s)
    while i < n:
        ch = s[i]
        if ch == "(" and angle == 0:
            if s.startswith("(anonymous namespace)", i):
                out.append("(anonymous namespace)")
                i += len("(anonymous namespace)")
                continue
            break  # the parameter list
        if ch == "<":
            angle += 1
        elif ch == ">":
            angle = max(0, angle - 1)
        elif angle == 0:
            out.append(ch)
        i += 1
    base = "".join(out).strip()
    base = base.replace("(anonymous namespace)", "anonymous_namespace")
    base = base.split()[-1] if base.split() else ""
    short = base.split("::")[-1]
    return short or name


def _copy_kinds(name: str) -> tuple[int, int, int]:
    """(copyKind, srcKind, dstKind) from ``Memcpy HtoD (Pinned -> Device)``; nsys numbering."""
    m = _MEMCPY_NAME.match(name)
    if not m:
        return 0, -1, -1
    kind = COPY_KINDS.get(m.group(1), 0)
    src = MEM_KINDS.get((m.group(2) or "").lower(), -1)
    dst = MEM_KINDS.get((m.group(3) or "").lower(), -1)
    return kind, src, dst


def _memset_kind(name: str) -> int:
    m = _MEMSET_NAME.match(name)
    return MEM_KINDS.get(m.group(1).lower(), -1) if m else -1


def _sync_type(name: str) -> int:
    low = name.lower()
    return next((code for text, code in _SYNC_TYPES if text in low), 0)


# --------------------------------------------------------------------------------------------
# streaming parse
# --------------------------------------------------------------------------------------------
class _Acc:
    """Typed columns of every event kind, filled while the events stream by."""

    def __init__(self) -> None:
        q = lambda: array("q")  # noqa: E731
        i = lambda: array("i")  # noqa: E731
        # GPU tables: start, end, device, context, stream, correlation, name, bytes
        self.gpu = {k: {"s": q(), "e": q(), "dev": q(), "ctx": i(), "st": i(), "corr": q(), "name": i(), "bytes": q()}
                    for k in (K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC)}
        # kernels: the launch configuration's code (grid, block, registers, shared memory and the
        # estimated achieved occupancy, as distinct packed keys: schema.launch_key_sql)
        self.gpu[K_KERNEL]["launch"] = i()
        self.launch_raw: dict = {}   # args as written -> code
        self.launch_codes: dict[tuple[int, int], int] = {}  # (packed key, est. occupancy %) -> code
        self.rt = {"s": q(), "e": q(), "thr": i(), "corr": q(), "name": i(), "drv": array("b")}
        self.host = {"s": q(), "e": q(), "thr": i(), "name": i(), "dom": array("b")}
        self.flow_s = {"id": q(), "thr": i(), "ts": q()}
        self.flow_f = {"id": q(), "dev": q(), "st": i(), "ts": q()}
        self.spans: list[tuple[int, int]] = []
        self.overhead: list[tuple[int, int, str]] = []
        self.names: dict[str, int] = {}
        self.threads: dict[tuple, int] = {}
        self.proc_names: dict = {}
        self.thread_names: dict = {}
        self.kinds: set[int] = set()  # the kinds of X events seen (``tables``)
        self.events = 0
        self.ignored = 0

    def launch_code(self, a: dict) -> int:
        """The code of a kernel event's launch configuration (its ``args``)."""
        return self.launch_code5(a.get("grid"), a.get("block"), a.get("registers per thread"),
                                 a.get("shared memory"), a.get("est. achieved occupancy %"))

    def launch_code5(self, g, b, regs, smem, est) -> int:
        """:meth:`launch_code` of the five args it reads (grid, block, registers per thread,
        shared memory, est. achieved occupancy %)."""
        if g.__class__ is list and b.__class__ is list and len(g) == 3 and len(b) == 3:
            raw = (g[0], g[1], g[2], b[0], b[1], b[2], regs, smem, est)
        else:  # the rare event without both: each dimension list kept on its own
            raw = (tuple(g) if g.__class__ is list and len(g) == 3 else None,
                   tuple(b) if b.__class__ is list and len(b) == 3 else None, regs, smem, est)
        try:
            code = self.launch_raw.get(raw)
        except TypeError:  # an unhashable value (a list where a number belongs)
            raw, code = None, None
        if code is None:
            item = _launch_fields(raw)
            code = self.launch_codes.get(item)
            if code is None:
                code = self.launch_codes[item] = len(self.launch_codes)
            if raw is not None:
                self.launch_raw[raw] = code
        return code

    def name_id(self, v) -> int:
        if v.__class__ is not str:
            v = F.UNKNOWN_NAME if v is None else str(v)
        got = self.names.get(v)
        if got is None:
            got = self.names[v] = len(self.names)
        return got


def _launch_fields(raw) -> tuple[int, int]:
    """(packed launch key, est. achieved occupancy % or -1) of a kernel's args ``(grid, block,
    registers per thread, shared memory, est. achieved occupancy %)``; a value of the wrong type
    or out of range leaves its field unknown."""
    if raw is None:
        return S.LAUNCH_UNKNOWN, -1
    if len(raw) == 9:  # grid and block both lists of 3, flattened
        g, b, (r, sm, est) = raw[0:3], raw[3:6], raw[6:]
    else:
        g, b, r, sm, est = raw

    def size(dims, cap):
        if dims is None or any(v.__class__ is not int or not 1 <= v < _I32 for v in dims):
            return -1
        return min(dims[0] * dims[1] * dims[2], cap)

    blocks = size(g, S.LAUNCH_BLOCKS_CAP)
    threads = size(b, 1 << 20)
    regs = r if r.__class__ is int and 0 <= r <= 255 else -1
    smem = sm if sm.__class__ is int and 0 <= sm < _I32 else -1
    occ = int(round(est)) if est.__class__ in (int, float) and 0 <= est <= 100 else -1
    return S.pack_launch(blocks, threads, regs, smem), occ


_DOMAINS = ("", "cpu_op", "python_function")
_DOM_CODE = {d: i for i, d in enumerate(_DOMAINS)}
_DOM_OP = _DOM_CODE["cpu_op"]
#: frames of a 2021-format ``Call stack`` looked at per op (the innermost ones)
_MAX_STACK = 64


def _user_frame(stack: str) -> str | None:
    """The innermost frame of the user's code in a ``Call stack`` argument (innermost first)."""
    from ..metrics.attribution import is_user_frame

    for fr in stack.split(";", _MAX_STACK)[:_MAX_STACK]:
        fr = fr.strip()
        if fr and is_user_frame(fr):
            return fr[:1000]
    return None


_EMPTY: dict = {}


class _Stream:
    """Buffered text over the file, with helpers to decode whole JSON values across refills.

    ``fh`` is the file's bytes (``gzip.open(..., "rb")`` for ``.gz``), decoded here as
    ``io.TextIOWrapper(fh, encoding="utf-8-sig", errors="replace", newline="")`` would: the same
    text, ``more(size)`` giving what its ``read(size)`` gives. The fast path (:func:`_events`) takes
    the bytes not yet read as text (:meth:`take_bytes`) and hands back what it leaves (:meth:`give_bytes`)."""

    def __init__(self, fh, path: Path) -> None:
        self.fh = fh
        self.path = path
        self.buf = ""
        self.pos = 0
        self.offset = 0  # characters consumed before ``buf``
        self.eof = False
        self._dec = codecs.getincrementaldecoder("utf-8-sig")("replace")
        self._text = ""  # decoded, not yet in ``buf``
        self.in_trace = False  # inside traceEvents: errors are damage, not "not JSON"
        self._fast = json.JSONDecoder(parse_float=str).raw_decode
        self._slow = json.JSONDecoder(parse_float=str, parse_int=_big_int).raw_decode

    def decode(self, buf: str, pos: int):
        """``raw_decode`` (floats as their text); an integer too long for Python's int-from-text
        limit (a ValueError that is not a syntax error) is decoded again keeping it as text."""
        try:
            return self._fast(buf, pos)
        except JSONDecodeError:
            raise
        except ValueError:
            return self._slow(buf, pos)

    def more(self, grow: bool = False, size: int = CHUNK_CHARS) -> bool:
        """Read the next chunk (``size`` characters). ``grow``: the value at ``pos`` is incomplete,
        so read at least as much again as is pending: a long value is then decoded O(log n) times,
        not once per chunk (a 200 MB string re-scanned on every 1 MB refill took quadratic time)."""
        if self.eof:
            return False
        size = max(size, len(self.buf) - self.pos) if grow else size
        while len(self._text) < size:
            data = self.read_bytes(max(size - len(self._text), 1 << 16))
            self._text += self._dec.decode(data, not data)
            if not data:
                break
        chunk, self._text = (self._text[:size], self._text[size:]) if len(self._text) > size else (self._text, "")
        if not chunk:
            self.eof = True
            return False
        self.offset += self.pos
        self.buf = self.buf[self.pos:] + chunk if self.pos < len(self.buf) else chunk
        self.pos = 0
        return True

    def read_bytes(self, size: int) -> bytes:
        """Up to ``size`` bytes of the file (b"" at its end), read errors as refusals."""
        try:
            return self.fh.read(size)
        except EOFError:
            raise TruncatedTraceError(f"{self.path}: truncated gzip file: the compressed data ends before the trace does",
                                      hint="the file was cut while being written or copied; profile or copy it again") from None
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise CorruptFileError(f"{self.path}: damaged gzip file ({str(exc)[:100]})",
                                   hint="decompress it with gunzip to see how much is readable") from None
        except OSError as exc:
            raise InputError(f"{self.path}: cannot read ({exc.strerror or exc})") from None

    def take_bytes(self) -> bytes:
        """The rest of the file's text from ``pos`` as UTF-8, and the bytes not yet decoded (the
        next :meth:`read_bytes` goes on after them); ``offset`` counts the characters before them."""
        rest = self.buf[self.pos:] + self._text
        pending = self._dec.getstate()[0]
        self.offset += self.pos
        self.buf, self.pos, self._text = "", 0, ""
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")  # past the start: no BOM
        return rest.encode("utf-8") + pending if rest else pending

    def give_bytes(self, data) -> None:
        """Read the bytes ``data`` (the file's, from character ``offset`` on) as text again."""
        self._dec.reset()
        self.buf, self.pos, self._text = self._dec.decode(data), 0, ""
        self.eof = False

    def peek(self) -> str:
        """The next non-blank character ("" at the end of the file)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def value(self):
        """Decode the JSON value at the current position (refilling the buffer as needed)."""
        self.peek()
        while True:
            try:
                obj, end = self.decode(self.buf, self.pos)
            except JSONDecodeError as exc:
                if self._incomplete(exc) and self.more(grow=True):
                    continue
                self.fail(exc)
            except RecursionError:
                raise CorruptFileError(f"{self.path}: JSON nested too deeply to be a trace") from None
            if end >= len(self.buf) and not isinstance(obj, (dict, list, str)) and self.more():
                continue  # a number (or literal) at the end of the buffer may go on
            self.pos = end
            return obj

    def _incomplete(self, exc: JSONDecodeError) -> bool:
        if len(self.buf) - self.pos > MAX_VALUE_CHARS:
            raise CorruptFileError(f"{self.path}: a JSON value longer than {MAX_VALUE_CHARS >> 20} M characters: "
                                   "not a trace nsysdoc can read")
        return exc.pos >= len(self.buf) - 8 or exc.msg.startswith("Unterminated string")

    def fail(self, exc: JSONDecodeError | None = None, what: str = "", truncated: bool | None = None):
        """Raise the one-line refusal for a syntax error at the current position."""
        if truncated is None:
            truncated = self.eof and exc is not None and self._incomplete(exc)
        if truncated:
            raise TruncatedTraceError(f"{self.path}: truncated JSON: the file ends inside the trace",
                                      hint="the trace was cut while being written or copied; profile again")
        why = exc.msg if exc is not None else what
        where = self.offset + (exc.pos if exc is not None else self.pos)
        if self.in_trace:
            raise CorruptFileError(f"{self.path}: damaged trace JSON ({why} at character {where:,})")
        raise NotJsonError(f"{self.path}: not JSON ({why} at character {where:,}), so not a PyTorch "
                           "Profiler trace", hint="pass a torch.profiler trace (*.pt.trace.json[.gz]) or an nsys export")


def _open_bytes(path: Path):
    head = _head(path, 4)
    if head.startswith(GZIP_MAGIC):
        return gzip.open(path, "rb")
    return open(path, "rb")


def _parse(path: Path, progress=None) -> tuple[dict, _Acc]:
    """Stream the file: top-level metadata (every key but ``traceEvents``) and the events."""
    acc = _Acc()
    meta: dict = {}
    with _open_bytes(path) as fh:
        st = _Stream(fh, path)
        first = st.peek()
        if first == "":
            raise NotJsonError(f"{path}: file is empty, not a PyTorch Profiler trace")
        if first != "{":
            if first in '["-0123456789tfn':  # another JSON value? (decoded only to tell which refusal)
                st.value()
                if st.peek() == "":
                    raise NotATraceError(f"{path}: JSON, but not a PyTorch Profiler trace: the top level is not an "
                                         "object with traceEvents",
                                         hint="pass a torch.profiler trace (*.pt.trace.json[.gz]) or an nsys export")
            raise NotJsonError(f"{path}: not JSON, so not a PyTorch Profiler trace (*.pt.trace.json[.gz])",
                               hint="pass a torch.profiler trace or an nsys export (.sqlite, .nsys-rep)")
        st.pos += 1
        seen_events = False
        while True:
            c = st.peek()
            if c == "}":
                st.pos += 1
                break
            if c != '"':
                st.fail(what="expected a key", truncated=c == "")
            key = st.value()
            m = _COLON.match(st.buf, st.pos)
            if m is None:
                c = st.peek()
                if c == ":":
                    st.pos += 1
                else:
                    st.fail(what="expected ':'", truncated=c == "")
            else:
                st.pos = m.end()
            if key == "traceEvents":
                # a repeated key: the last one wins, as with json.load (and a browser's
                # JSON.parse, so the trace viewers show the same events): the events read so
                # far are dropped, streaming the later list (never held as Python objects)
                if st.peek() != "[":
                    raise NotATraceError(f"{path}: JSON, but traceEvents is not a list of events")
                st.pos += 1
                st.in_trace = True
                if seen_events:
                    acc = _Acc()
                _events(st, acc, progress)
                seen_events = True
            else:
                meta[key] = st.value()
            c = st.peek()
            if c == ",":
                st.pos += 1
            elif c != "}":
                st.fail(what="expected ',' or '}'", truncated=c == "")
        if not seen_events:
            raise NotATraceError(f"{path}: JSON, but not a PyTorch Profiler trace (no traceEvents)",
                                 hint="pass a torch.profiler trace (*.pt.trace.json[.gz]) or an nsys export")
    return meta, acc


def _events_slow(st: _Stream, acc: _Acc, progress=None, stop: int | None = None,  # noqa: C901
                 first: bool = True) -> bool:
    """Parse ``traceEvents`` items one at a time into ``acc`` (``st.pos`` at the first item, or the
    ']' of an empty list; ``first=False``: at an item after a ','), until the closing ']' (True),
    or until the item separator at or past character ``stop`` of the file (False). Every input
    the fast path (:func:`_events`) does not take comes here: this defines the reader's behaviour."""
    decode = st._fast  # the hot path; st.decode's fallback only on a ValueError
    ws = _WS.match
    after = _AFTER.match
    cats = CATEGORIES
    ns = us_to_ns
    name_id = acc.name_id
    launch_code = acc.launch_code
    threads = acc.threads
    gk, gm, gs, gy = (acc.gpu[k] for k in (K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC))
    gpu_tabs = {K_KERNEL: gk, K_MEMCPY: gm, K_MEMSET: gs, K_SYNC: gy}
    rt, host, fs, ff = acc.rt, acc.host, acc.flow_s, acc.flow_f
    rt_s, rt_e, rt_thr, rt_corr, rt_name, rt_drv = (rt[k].append for k in ("s", "e", "thr", "corr", "name", "drv"))
    h_s, h_e, h_thr, h_name, h_dom = (host[k].append for k in ("s", "e", "thr", "name", "dom"))
    seen_kinds = acc.kinds
    n = ignored = 0
    tick = time.monotonic() + 2.0
    # the first item may be ']' (an empty list)
    if first and st.peek() == "]":
        st.pos += 1
        return True
    ended = True
    while True:
        # ---- one item -------------------------------------------------------------------
        pos = ws(st.buf, st.pos).end()
        if pos >= len(st.buf):
            st.pos = pos
            if not st.more():
                st.fail(truncated=True)
            continue
        try:
            try:
                ev, end = decode(st.buf, pos)
            except JSONDecodeError:
                raise
            except ValueError:  # an integer of > 4300 digits: decoded again, kept as text
                ev, end = st._slow(st.buf, pos)
        except JSONDecodeError as exc:
            st.pos = pos
            if st._incomplete(exc) and st.more(grow=True):
                continue
            st.fail(exc)
        except RecursionError:
            raise CorruptFileError(f"{st.path}: JSON nested too deeply to be a trace") from None
        st.pos = end
        n += 1
        if ev.__class__ is dict:
            ph = ev.get("ph")
            if ph == "X":
                cat = ev.get("cat")
                kind = cats.get(cat) if cat.__class__ is str else None
                if kind is None:
                    ignored += 1
                else:
                    seen_kinds.add(kind)
                    s = ns(ev.get("ts"))
                    d = ns(ev.get("dur"))
                    e = s + d if s != BAD and d != BAD else BAD
                    if e != BAD and not -_LIM < e < _LIM:
                        e = BAD
                    a = ev.get("args")
                    if a.__class__ is not dict:
                        a = _EMPTY
                    if kind == K_RUNTIME or kind == K_DRIVER:
                        tkey = (ev.get("pid"), ev.get("tid"))
                        try:
                            ti = threads.get(tkey)
                        except TypeError:  # an unhashable pid/tid (a list): one thread for all such rows
                            tkey = (repr(tkey[0])[:64], repr(tkey[1])[:64])
                            ti = threads.get(tkey)
                        if ti is None:
                            ti = threads[tkey] = len(threads)
                        c = a.get("correlation")
                        if c.__class__ is not int or not 0 < c < 4294967296:
                            c = 0
                        rt_s(s)
                        rt_e(e)
                        rt_thr(ti)
                        rt_corr(c)
                        rt_name(name_id(ev.get("name")))
                        rt_drv(1 if kind == K_DRIVER else 0)
                    elif kind == K_HOST:
                        tkey = (ev.get("pid"), ev.get("tid"))
                        try:
                            ti = threads.get(tkey)
                        except TypeError:
                            tkey = (repr(tkey[0])[:64], repr(tkey[1])[:64])
                            ti = threads.get(tkey)
                        if ti is None:
                            ti = threads[tkey] = len(threads)
                        name = ev.get("name")
                        dom = _DOM_CODE[HOST_DOMAIN[cat]]
                        if dom == _DOM_OP and a:
                            # autograd's sequence number links a backward node to its forward op:
                            # kept in the text as emit_nvtx writes it ("aten::mul, seq = 12")
                            sq = a.get("Sequence number")
                            if sq.__class__ is int and 0 <= sq < _LIM and name.__class__ is str:
                                name = f"{name}, seq = {sq}"
                            # 2021 format: the op's Python stack, innermost first; its innermost
                            # frame of the user's code is kept in the text ("..., stack = f.py(3): g")
                            cs = a.get("Call stack")
                            if cs.__class__ is str and cs and name.__class__ is str:
                                fr = _user_frame(cs)
                                if fr:
                                    name = f"{name}, stack = {fr}"
                        h_s(s)
                        h_e(e)
                        h_thr(ti)
                        h_name(name_id(name))
                        h_dom(dom)
                    elif kind == K_SPAN:
                        if s != BAD and e != BAD:
                            acc.spans.append((s, e))
                    elif kind == K_OVERHEAD:
                        if s != BAD and e != BAD and len(acc.overhead) < 100_000:
                            acc.overhead.append((s, e, F.cap(str(ev.get("name") or ""))))
                    else:  # GPU rows
                        g = gpu_tabs[kind]
                        pid = ev.get("pid")
                        dev = a.get("device", pid)
                        if dev.__class__ is not int or not 0 <= dev < 65536:
                            dev = _small_int(dev, 0, 65536, BAD)
                        stream = a.get("stream")
                        if stream.__class__ is not int or not -_I32 <= stream < _I32:
                            stream = _stream_of(ev.get("tid"))
                        ctx = a.get("context", 0)
                        if ctx.__class__ is not int or not -_I32 <= ctx < _I32:
                            ctx = 0
                        c = a.get("correlation")
                        if c.__class__ is not int or not 0 < c < 4294967296:
                            c = 0
                        nb = a.get("bytes", 0)
                        if nb.__class__ is not int or not 0 <= nb < _LIM:
                            nb = 0
                        g["s"].append(s)
                        g["e"].append(e)
                        g["dev"].append(dev)
                        g["ctx"].append(ctx)
                        g["st"].append(stream)
                        g["corr"].append(c)
                        g["name"].append(name_id(ev.get("name")))
                        g["bytes"].append(nb)
                        if kind == K_KERNEL:
                            g["launch"].append(launch_code(a))
            elif (ph == "s" or ph == "f") and ev.get("cat") in FLOW_CATEGORIES:
                fid = ev.get("id")
                ts = ns(ev.get("ts"))
                if fid.__class__ is int and 0 < fid < 4294967296 and ts != BAD:
                    if ph == "s":
                        tkey = (ev.get("pid"), ev.get("tid"))
                        try:
                            ti = threads.get(tkey)
                            if ti is None:
                                ti = threads[tkey] = len(threads)
                        except TypeError:  # unhashable ids bind to no call
                            ti = None
                        if ti is not None:
                            fs["id"].append(fid)
                            fs["thr"].append(ti)
                            fs["ts"].append(ts)
                    else:
                        dev = _small_int(ev.get("pid"), 0, 65536, -1)
                        if dev >= 0:
                            ff["id"].append(fid)
                            ff["dev"].append(dev)
                            ff["st"].append(_stream_of(ev.get("tid")))
                            ff["ts"].append(ts)
            elif ph == "M":
                _metadata_event(ev, acc)
            else:
                ignored += 1
        else:
            ignored += 1
        # ---- separator ------------------------------------------------------------------
        m = after(st.buf, st.pos)
        while m is None:
            if st.buf[st.pos:].strip(" \t\r\n"):
                st.fail(what="expected ',' or ']' after an event", truncated=False)
            if not st.more():
                st.fail(truncated=True)
            m = after(st.buf, st.pos)
        st.pos = m.end()
        if m.group(1) == "]":
            break
        if stop is not None and st.offset + st.pos >= stop:
            ended = False
            break
        if progress is not None and n % 65536 == 0 and time.monotonic() > tick:
            progress(f"read {acc.events + n:,} trace events")
            tick = time.monotonic() + 2.0
    acc.events += n
    acc.ignored += ignored
    return ended


# --------------------------------------------------------------------------------------------
# fast path: many events per msgspec call, then columns at a time
# --------------------------------------------------------------------------------------------
#: bytes decoded per msgspec call (the window's last event ends at a "},": its separator)
FAST_CHARS = 8 << 20
_UNSET = msgspec.UNSET
_NO_RAW = msgspec.Raw()


class _Args(msgspec.Struct, gc=False):
    """The ``args`` an event's row needs; the rest (input shapes, strides ...) is skipped unbuilt."""
    device: object = _UNSET  # missing: the event's pid
    stream: object = None
    context: object = 0
    correlation: object = None
    bytes: object = 0
    grid: object = None
    block: object = None
    regs: object = msgspec.field(default=None, name="registers per thread")
    smem: object = msgspec.field(default=None, name="shared memory")
    occ: object = msgspec.field(default=None, name="est. achieved occupancy %")
    seq: object = msgspec.field(default=None, name="Sequence number")
    stack: object = msgspec.field(default=None, name="Call stack")
    name: object = None  # metadata events: the process or thread name


class _Ev(msgspec.Struct, gc=False):
    ph: object = None
    cat: object = None
    name: object = None
    pid: object = None
    tid: object = None
    ts: msgspec.Raw = _NO_RAW  # the text, converted exactly (:func:`_ns_many`); empty when missing
    dur: msgspec.Raw = _NO_RAW
    id: object = None
    args: _Args | None = None  # any other JSON value: the slow path's (ValidationError)


_NO_ARGS = _Args()
#: floats as their text (``float_hook=str``), as the slow path's ``parse_float=str``
_decode_events = msgspec.json.Decoder(list[_Ev], float_hook=str).decode
_decode_value = msgspec.json.Decoder(float_hook=str).decode
_F_START, _F_END, _META, _IGNORED = 9, 10, 11, -1
#: (ph, cat) -> kind of the row an event makes
_KIND = {("X", c): k for c, k in CATEGORIES.items()} | {("s", c): _F_START for c in FLOW_CATEGORIES} \
    | {("f", c): _F_END for c in FLOW_CATEGORIES} | {("M", None): _META}
#: ``_KIND`` of the "X" events, by ``cat`` alone (one string look-up, not a tuple's)
_X_KIND = {c: k for (ph, c), k in _KIND.items() if ph == "X"}
_HOST_DOM = {c: _DOM_CODE[d] for c, d in HOST_DOMAIN.items()}
_NAMED = (K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC, K_RUNTIME, K_DRIVER, K_HOST)
_THREADED = (K_RUNTIME, K_DRIVER, K_HOST)


def _ns_many(vals: list) -> np.ndarray:
    """:func:`us_to_ns` of each value, given as its JSON text (:class:`msgspec.Raw`; empty when
    missing). Vectorised when every text is in Kineto's form, ``[0-9]{1,15}.[0-9]{3}``
    (microseconds with 3 decimals: the digits without the dot are the ns), or every one is an
    integer of at most 15 digits: one join, a check of what is left without the digits, the dot
    positions, one C parse. Any other text is decoded as the slow path decodes it and converted
    by :func:`us_to_ns` itself."""
    n = len(vals)
    if not n:
        return np.zeros(0, dtype=np.int64)
    b = b",".join(vals)
    rest = b.translate(None, b"0123456789")
    if rest.strip(b".,") == b"":
        c = np.frombuffer(b, dtype=np.uint8)
        ends = np.append(np.flatnonzero(c == 44), len(b))
        starts = np.concatenate(([0], ends[:-1] + 1))
        if rest == b".," * (n - 1) + b".":
            dots = np.flatnonzero(c == 46)
            whole = dots - starts  # digits before each dot
            if np.all(ends - dots == 4) and np.all(whole >= 1) and np.all(whole <= 15):
                out = np.fromstring(b.replace(b".", b""), dtype=np.int64, sep=",")
                if len(out) == n:
                    return out
        elif rest == b"," * (n - 1):
            if np.all(ends - starts >= 1) and np.all(ends - starts <= 15):
                out = np.fromstring(b, dtype=np.int64, sep=",")
                if len(out) == n:
                    return out * 1000
    return np.fromiter((us_to_ns(_decode_value(v)) if len(v) else BAD for v in vals), dtype=np.int64, count=n)


def _ints(vals: list, lo: int, hi: int, other) -> np.ndarray:
    """Each value when it is an int in [lo, hi), else ``other(i)`` (int64)."""
    n = len(vals)
    if set(map(type, vals)) <= {int}:
        try:
            a = np.fromiter(vals, dtype=np.int64, count=n)
        except OverflowError:
            a = None
        if a is not None:
            bad = np.flatnonzero((a < lo) | (a >= hi))
            for i in bad.tolist():
                a[i] = other(i)
            return a
    return np.fromiter((v if v.__class__ is int and lo <= v < hi else other(i) for i, v in enumerate(vals)),
                       dtype=np.int64, count=n)


def _numbered(ids: dict, keys: list) -> np.ndarray:
    """Each key's number in ``ids``, new keys numbered in order as they first come (the slow
    path's ``ids.get(k)``/``ids[k] = len(ids)``). TypeError on an unhashable key."""
    got = list(map(ids.get, keys))
    if None in got:
        for i in [i for i, v in enumerate(got) if v is None]:
            k = keys[i]
            v = ids.get(k)
            if v is None:
                v = ids[k] = len(ids)
            got[i] = v
    return np.fromiter(got, dtype=np.int64, count=len(got))


def _thread_numbers(threads: dict, evs: list) -> np.ndarray:
    """:func:`_numbered` of the events' ``(pid, tid)`` keys. When every pid and tid is an int
    (of 64 bits), the pairs are factorised as numbers (first appearance first) and only the
    distinct pairs are looked up: a tuple per event cost twice as much (its allocation, and the
    garbage collections those allocations set off)."""
    pids = [e.pid for e in evs]
    tids = [e.tid for e in evs]
    if set(map(type, pids)) <= {int} and set(map(type, tids)) <= {int}:
        try:
            p = np.fromiter(pids, dtype=np.int64, count=len(pids))
            t = np.fromiter(tids, dtype=np.int64, count=len(tids))
        except OverflowError:
            p = None
        if p is not None:
            pc, pu = factorize(p)
            tc, tu = factorize(t)
            nt = len(tu)
            codes, pairs = factorize(pc * nt + tc)
            pl, tl = pu.tolist(), tu.tolist()
            nums = []
            for c in pairs.tolist():
                key = (pl[c // nt], tl[c % nt])
                v = threads.get(key)
                if v is None:
                    v = threads[key] = len(threads)
                nums.append(v)
            return np.asarray(nums, dtype=np.int64)[codes]
    return _numbered(threads, list(zip(pids, tids)))


def _launch_codes(acc: _Acc, args: list) -> np.ndarray:
    """:meth:`_Acc.launch_code5` of each kernel's args: a configuration seen before (grid and
    block lists of 3, the usual case) is one look-up of the key launch_code5 would build."""
    known = acc.launch_raw.get
    lc = acc.launch_code5
    out = []
    add = out.append
    try:
        for a in args:
            g, b = a.grid, a.block
            if g.__class__ is list and b.__class__ is list and len(g) == 3 and len(b) == 3:
                code = known((*g, *b, a.regs, a.smem, a.occ))
                if code is not None:
                    add(code)
                    continue
            add(lc(g, b, a.regs, a.smem, a.occ))
    except TypeError:  # an unhashable value: launch_code5 gives each event's code
        out = [lc(a.grid, a.block, a.regs, a.smem, a.occ) for a in args]
    return np.fromiter(out, dtype=np.int64, count=len(out))


def _add(col: array, values: np.ndarray) -> None:
    """Append a numpy column to an :class:`array.array` of the same item size."""
    if len(values):
        col.frombytes(np.ascontiguousarray(values, dtype=np.dtype(col.typecode)).tobytes())


def _chunk(evs: list, acc: _Acc) -> None:  # noqa: C901 - one pass per column, kept together
    """Rows of a window of decoded events, as :func:`_events_slow` makes them one at a time: the
    same rows, names, threads and launch codes, in the same order. Raises on anything it does not
    expect (the window is then read again by the slow path); ``acc`` is only appended to at the
    end, and its name, thread and launch-code numbering is assigned in event order, so a window
    read again gets the same numbers."""
    n = len(evs)
    kinds = np.fromiter([_X_KIND.get(e.cat, _IGNORED) if e.ph == "X" else _KIND.get((e.ph, e.cat), _IGNORED)
                          for e in evs], dtype=np.int8, count=n)
    for i in np.flatnonzero(kinds == _IGNORED).tolist():
        if evs[i].ph == "M":  # a metadata event with a category
            kinds[i] = _META
    # ---- times of X rows and flows ------------------------------------------------------------
    is_x = (kinds >= 0) & (kinds <= K_OVERHEAD)
    xev = list(compress(evs, is_x.tolist()))
    xk = kinds[is_x]
    s = _ns_many([e.ts for e in xev])
    d = _ns_many([e.dur for e in xev])
    ok = (s != BAD) & (d != BAD)
    e_ = np.where(ok, s + np.where(ok, d, 0), BAD)
    e_[(e_ != BAD) & ~((e_ > -_LIM) & (e_ < _LIM))] = BAD
    is_flow = (kinds == _F_START) | (kinds == _F_END)
    fev = list(compress(evs, is_flow.tolist()))
    fk = kinds[is_flow]
    fid = _ints([e.id for e in fev], 1, 1 << 32, lambda i: 0)
    fts = _ns_many([e.ts for e in fev])
    fvalid = (fid != 0) & (fts != BAD)
    # ---- threads, in event order: calls, host ranges, flow starts that bind -------------------
    need = np.isin(kinds, _THREADED)
    need[np.flatnonzero(is_flow)[fvalid & (fk == _F_START)]] = True
    thr_all = _thread_numbers(acc.threads, list(compress(evs, need.tolist())))
    thr_kind = kinds[need]
    # ---- names, in event order (host ranges get their sequence number and stack frame) --------
    named = np.isin(kinds, _NAMED)
    nev = list(compress(evs, named.tolist()))
    nk = kinds[named]
    nm = [e.name for e in nev]
    host_pos = np.flatnonzero(nk == K_HOST).tolist()
    hev = list(compress(nev, (nk == K_HOST).tolist()))
    dom = np.fromiter([_HOST_DOM[e.cat] for e in hev], dtype=np.int8, count=len(hev))
    op = (dom == _DOM_OP).tolist()
    o_pos = list(compress(host_pos, op))
    if o_pos:
        o_args = [e.args for e in compress(hev, op)]
        if None in o_args:
            o_args = [_NO_ARGS if a is None else a for a in o_args]
        seqs = [a.seq for a in o_args]
        stacks = [a.stack for a in o_args]
        changed = set(map(type, seqs)) != {type(None)}
        if changed:  # autograd's sequence number, kept in the text as emit_nvtx writes it
            for i, sq in zip(o_pos, seqs):
                name = nm[i]
                if sq.__class__ is int and 0 <= sq < _LIM and name.__class__ is str:
                    nm[i] = f"{name}, seq = {sq}"
        if any(cs.__class__ is str and cs for cs in stacks):  # 2021 format: the innermost user frame
            for i, cs in zip(o_pos, stacks):
                name = nm[i]
                if cs.__class__ is str and cs and name.__class__ is str:
                    fr = _user_frame(cs)
                    if fr:
                        nm[i] = f"{name}, stack = {fr}"
    if set(map(type, nm)) - {str}:
        nm = [v if v.__class__ is str else (F.UNKNOWN_NAME if v is None else str(v)) for v in nm]
    nid = _numbered(acc.names, nm)
    # ---- GPU rows -------------------------------------------------------------------------------
    gpu_rows = {}
    for kind in (K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC):
        sel = xk == kind
        if not sel.any():
            continue
        gev = list(compress(xev, sel.tolist()))
        args = [e.args for e in gev]
        if None in args:
            args = [_NO_ARGS if a is None else a for a in args]
        dev = [a.device for a in args]
        if _UNSET in dev:
            dev = [e.pid if v is _UNSET else v for v, e in zip(dev, gev)]
        row = {"s": s[sel], "e": e_[sel],
               "dev": _ints(dev, 0, 65536, lambda i: _small_int(dev[i], 0, 65536, BAD)),
               "ctx": _ints([a.context for a in args], -_I32, _I32, lambda i: 0),
               "st": _ints([a.stream for a in args], -_I32, _I32, lambda i: _stream_of(gev[i].tid)),
               "corr": _ints([a.correlation for a in args], 1, 1 << 32, lambda i: 0),
               "name": nid[nk == kind],
               "bytes": _ints([a.bytes for a in args], 0, _LIM, lambda i: 0)}
        if kind == K_KERNEL:
            row["launch"] = _launch_codes(acc, args)
        gpu_rows[kind] = row
    # ---- calls and host ranges ----------------------------------------------------------------
    rsel = (xk == K_RUNTIME) | (xk == K_DRIVER)
    rt_row = None
    if rsel.any():
        rev = list(compress(xev, rsel.tolist()))
        nsel = (nk == K_RUNTIME) | (nk == K_DRIVER)
        rt_row = {"s": s[rsel], "e": e_[rsel], "thr": thr_all[(thr_kind == K_RUNTIME) | (thr_kind == K_DRIVER)],
                  "corr": _ints([(e.args or _NO_ARGS).correlation for e in rev], 1, 1 << 32, lambda i: 0),
                  "name": nid[nsel], "drv": (xk[rsel] == K_DRIVER).astype(np.int8)}
    hsel = xk == K_HOST
    host_row = None
    if hsel.any():
        host_row = {"s": s[hsel], "e": e_[hsel], "thr": thr_all[thr_kind == K_HOST], "name": nid[nk == K_HOST],
                    "dom": dom}
    # ---- flows ----------------------------------------------------------------------------------
    fs_sel = fvalid & (fk == _F_START)
    fs_row = {"id": fid[fs_sel], "thr": thr_all[thr_kind == _F_START], "ts": fts[fs_sel]}
    fe = fvalid & (fk == _F_END)
    fe_ev = list(compress(fev, fe.tolist()))
    fdev = _ints([e.pid for e in fe_ev], 0, 65536, lambda i: _small_int(fe_ev[i].pid, 0, 65536, -1))
    fst = _ints([e.tid for e in fe_ev], -_I32, _I32, lambda i: _stream_of(fe_ev[i].tid))
    bind = fdev >= 0
    fe_row = {"id": fid[fe][bind], "dev": fdev[bind], "st": fst[bind], "ts": fts[fe][bind]}
    # ---- commit -----------------------------------------------------------------------------------
    acc.kinds.update(np.unique(xk).tolist())
    for kind, row in gpu_rows.items():
        for k, v in row.items():
            _add(acc.gpu[kind][k], v)
    for table, row in ((acc.rt, rt_row), (acc.host, host_row), (acc.flow_s, fs_row), (acc.flow_f, fe_row)):
        if row is not None:
            for k, v in row.items():
                _add(table[k], v)
    for i in np.flatnonzero(xk == K_SPAN).tolist():
        if s[i] != BAD and e_[i] != BAD:
            acc.spans.append((int(s[i]), int(e_[i])))
    for i in np.flatnonzero(xk == K_OVERHEAD).tolist():
        if s[i] != BAD and e_[i] != BAD and len(acc.overhead) < 100_000:
            acc.overhead.append((int(s[i]), int(e_[i]), F.cap(str(xev[i].name or ""))))
    for e in compress(evs, (kinds == _META).tolist()):
        if e.args is not None:
            _metadata_event({"name": e.name, "pid": e.pid, "tid": e.tid, "args": {"name": e.args.name}}, acc)
    acc.events += n
    acc.ignored += int((kinds == _IGNORED).sum())


def _events(st: _Stream, acc: _Acc, progress=None) -> None:
    """Parse ``traceEvents`` items (the '[' is consumed) into ``acc`` until the closing ']'.

    A window of :data:`FAST_CHARS` bytes (the file's UTF-8, as :class:`_Stream` would decode it:
    read as bytes, never built as text), cut after the last ``"},"`` in it, is decoded with
    one :mod:`msgspec` call into structs of the fields a row needs (:class:`_Ev`: unknown fields,
    such as a ``cpu_op``'s input shapes, are skipped without being built) and turned into columns
    (:func:`_chunk`). A cut anywhere but between two events makes that text invalid JSON (a
    newline is never inside a string, an unbalanced bracket never decodes), and any window that
    fails to decode or holds a value :func:`_chunk` does not expect is read by the slow path
    instead, which also takes the events after the last cut and gives every refusal."""
    if st.peek() == "]":
        st.pos += 1
        return
    first = True
    tick = time.monotonic() + 2.0
    data, pos = st.take_bytes(), 0  # the file's bytes from the first event on
    while True:
        if len(data) - pos < FAST_CHARS:
            more = st.read_bytes(FAST_CHARS)
            if more:
                data, pos = data[pos:] + more, 0
        cut = data.rfind(b"},\n", pos)
        if cut < 0:
            cut = data.rfind(b"},", pos)
        if cut < 0:  # the last events, or no line breaks or object ends in a whole window
            st.give_bytes(data[pos:])
            if _events_slow(st, acc, progress, stop=st.offset + len(st.buf), first=first):
                return
            first = False
            data, pos = st.take_bytes(), 0
            continue
        doc = b"".join((b"[", memoryview(data)[pos:cut + 1], b"]"))
        if doc.isascii():
            chars = len(doc) - 1  # the window and its ','
        else:  # msgspec reads the text as the slow path sees it (U+FFFD for what is not UTF-8)
            try:
                chars = len(doc.decode("utf-8")) - 1
            except UnicodeDecodeError:
                text = doc.decode("utf-8", "replace")
                chars, doc = len(text) - 1, text.encode("utf-8")
        try:
            _chunk(_decode_events(doc), acc)
        except Exception:  # noqa: BLE001 - any surprise (RecursionError too): the slow path reads this window
            st.give_bytes(data[pos:])
            if _events_slow(st, acc, progress, stop=st.offset + chars, first=first):
                return
            data, pos = st.take_bytes(), 0
        else:
            st.offset += chars
            pos = cut + 2
        first = False
        if progress is not None and time.monotonic() > tick:
            progress(f"read {acc.events:,} trace events")
            tick = time.monotonic() + 2.0


def _metadata_event(ev: dict, acc: _Acc) -> None:
    a = ev.get("args")
    if a.__class__ is not dict:
        return
    name = ev.get("name")
    label = a.get("name")
    if not isinstance(label, str):
        return
    try:
        if name == "process_name":
            acc.proc_names[ev.get("pid")] = F.cap(label)
        elif name == "thread_name":
            acc.thread_names[(ev.get("pid"), ev.get("tid"))] = F.cap(label)
    except TypeError:  # unhashable ids
        pass


# --------------------------------------------------------------------------------------------
# building the canonical tables
# --------------------------------------------------------------------------------------------
def _np(a: array, dtype) -> np.ndarray:
    """The column as a writable numpy array of ``dtype``; the array's memory is released."""
    out = np.array(np.frombuffer(a, dtype=a.typecode), dtype=dtype) if len(a) else np.zeros(0, dtype=dtype)
    del a[:]
    return out


class _Ids:
    """OS process/thread ids as nsys's 24-bit fields: numbers (or digit strings) that fit are kept
    (a negative tid, from Kineto before it wrote absolute values, by its absolute value); any
    other value gets a stable made-up id from the top of the range (0xFFFFFF, 0xFFFFFE, ...)."""

    def __init__(self) -> None:
        self.made: dict = {}

    def __call__(self, v) -> int:
        if v.__class__ is str and v.strip().lstrip("-").isdigit() and len(v.strip()) < 12:
            v = int(v.strip())
        if v.__class__ is int and abs(v) <= S.TID_MASK:
            return abs(v)
        key = repr(v)[:64]
        if key not in self.made:
            self.made[key] = S.TID_MASK - len(self.made)
        return self.made[key]


def _sorted_by_start(d: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    s = d["start_ns"]
    if len(s) < 2 or bool(np.all(s[1:] >= s[:-1])):
        return d
    order = np.argsort(s, kind="stable")
    return {k: v[order] for k, v in d.items()}


def _frames(meta: dict, acc: _Acc, path: Path, drops: F.Drops) -> dict:
    """Every frame of :data:`nsysdoc.trace.frames.FRAME_COLUMNS`, plus the trace's metadata."""
    names = list(acc.names)
    n_names = len(names)
    # ---- time base -------------------------------------------------------------------------
    base = meta.get("baseTimeNanoseconds")
    base = base if base.__class__ is int and 0 < base < (1 << 63) else None
    shift, session_start = 0, base
    if base is None:
        if acc.spans:
            anchor = min(s for s, _ in acc.spans)
        else:  # views, not copies
            starts = [np.frombuffer(a, dtype=np.int64) for a in
                      [t["s"] for t in acc.gpu.values()] + [acc.rt["s"], acc.host["s"]] if len(a)]
            mins = [int(x[x != BAD].min()) for x in starts if (x != BAD).any()]
            del starts
            anchor = min(mins) if mins else 0
        if anchor >= 10 ** 18:  # nanoseconds since the UNIX epoch: PyTorch < 2.0 wrote absolute times
            shift, session_start = anchor, anchor

    def times(a: array) -> np.ndarray:
        x = _np(a, np.int64)
        if shift:
            x = np.where(x != BAD, x - shift, BAD)
        return x

    spans = [(s - shift, e - shift) for s, e in acc.spans]
    span_duration = (max(e for _, e in spans) - min(s for s, _ in spans)) if spans else None
    if span_duration is not None and not 0 < span_duration < F.TIME_LIMIT_NS:
        span_duration = None

    # ---- threads and processes ---------------------------------------------------------------
    ids = _Ids()
    thread_keys = list(acc.threads)
    t_pid = np.array([ids(k[0]) for k in thread_keys], dtype=np.int64)
    t_tid = np.array([ids(k[1]) for k in thread_keys], dtype=np.int64)
    t_gtid = (t_pid << S.PID_SHIFT) | t_tid
    thread_names = {}
    for (pid, tid), label in acc.thread_names.items():
        thread_names[(ids(pid) << S.PID_SHIFT) | ids(tid)] = label

    rt_thr = _np(acc.rt["thr"], np.int64)
    rt = {"start_ns": times(acc.rt["s"]), "end_ns": times(acc.rt["e"]),
          "global_tid": t_gtid[rt_thr] if len(rt_thr) else np.zeros(0, np.int64),
          "correlation_id": _np(acc.rt["corr"], np.int64), "name_id": _np(acc.rt["name"], np.int64),
          "event_class": _np(acc.rt["drv"], np.int64)}
    h_thr = _np(acc.host["thr"], np.int64)
    host = {"start_ns": times(acc.host["s"]), "end_ns": times(acc.host["e"]),
            "global_tid": t_gtid[h_thr] if len(h_thr) else np.zeros(0, np.int64),
            "name_id": _np(acc.host["name"], np.int32), "dom": _np(acc.host["dom"], np.int8)}
    del h_thr
    gpu = {}
    for kind, key in ((K_KERNEL, "kernels"), (K_MEMCPY, "memcpy"), (K_MEMSET, "memset"), (K_SYNC, "sync")):
        t = acc.gpu[kind]
        gpu[key] = {"start_ns": times(t["s"]), "end_ns": times(t["e"]), "device_id": _np(t["dev"], np.int64),
                    "context_id": _np(t["ctx"], np.int64), "stream_id": _np(t["st"], np.int64),
                    "correlation_id": _np(t["corr"], np.int64), "name_id": _np(t["name"], np.int32),
                    "bytes": _np(t["bytes"], np.int64)}
        if kind == K_KERNEL:
            gpu[key]["launch"] = _np(t["launch"], np.int32)

    # ---- launch -> GPU join: ``correlation`` args, else the ac2g flow events ---------------------
    _flow_correlations(acc, rt, rt_thr, gpu, times)
    del rt_thr

    # ---- validation (the SQLite reader's row checks) --------------------------------------
    rt = F.validate(rt, TABLE_NAMES[K_RUNTIME], span_duration, drops)
    host = F.validate(host, TABLE_NAMES[K_HOST], span_duration, drops)
    for kind, key in ((K_KERNEL, "kernels"), (K_MEMCPY, "memcpy"), (K_MEMSET, "memset"), (K_SYNC, "sync")):
        gpu[key] = F.validate(gpu[key], TABLE_NAMES[kind], span_duration, drops)
    rt = _sorted_by_start(rt)
    host = _sorted_by_start(host)
    gpu = {k: _sorted_by_start(v) for k, v in gpu.items()}

    # ---- processes: the launching process of each GPU row (by correlation), else the main one --
    rt_pkey = rt["global_tid"] & S.PROCESS_MASK
    if len(rt_pkey):
        keys, counts = np.unique(rt_pkey, return_counts=True)
        main = int(keys[np.argmax(counts)])
    elif len(host["global_tid"]):
        keys, counts = np.unique(host["global_tid"] & S.PROCESS_MASK, return_counts=True)
        main = int(keys[np.argmax(counts)])
    else:
        main = 0
    ok = rt["correlation_id"] > 0
    rc, rp = rt["correlation_id"][ok], rt_pkey[ok]
    order = np.argsort(rc, kind="stable")
    rc, rp = rc[order], rp[order]
    for d in gpu.values():
        c = d["correlation_id"]
        gp = np.full(len(c), main, dtype=np.int64)
        if len(rc) and len(c):
            pos = np.clip(np.searchsorted(rc, c), 0, len(rc) - 1)
            hit = (rc[pos] == c) & (c > 0)
            gp[hit] = rp[pos[hit]]
        d["global_pid"] = gp
    all_keys = np.unique(np.concatenate([F.unique_ints(rt_pkey)] + [F.unique_ints(d["global_pid"]) for d in gpu.values()]))
    pid_name = {}
    for pid, label in acc.proc_names.items():
        pid_name.setdefault(ids(pid) << S.PID_SHIFT, label)
    processes = Columns({"global_pid": all_keys, "pid": S.decode_pid(all_keys),
                         "name": np.array([pid_name.get(int(k), "") for k in all_keys], dtype=object)})

    # ---- devices: those that ran GPU work, named from deviceProperties ------------------------
    props = {}
    for p in meta.get("deviceProperties") or []:
        if isinstance(p, dict) and p.get("id").__class__ is int:
            props[p["id"]] = p
    dev_ids = np.unique(np.concatenate([F.unique_ints(d["device_id"]) for d in gpu.values()]))

    def prop(d, key, ok):
        v = props.get(int(d), {}).get(key)
        return v if ok(v) else None

    def limit(d, col):
        pos = lambda v: v.__class__ is int and 0 < v < _I32  # noqa: E731
        if col == "max_warps_per_sm":
            threads, warp = prop(d, "maxThreadsPerMultiprocessor", pos), prop(d, "warpSize", pos)
            return threads // warp if threads and warp else None
        src = {"regs_per_sm": "regsPerMultiprocessor", "smem_per_sm": "sharedMemPerMultiprocessor",
               "smem_per_block_optin": "sharedMemPerBlockOptin"}.get(col)
        return prop(d, src, pos) if src else None

    def cc(d):
        # AMD GPUs (ROCm: warp size 64) give their gfx version (MI300X: 9.4), no CUDA compute capability
        if prop(d, "warpSize", lambda v: v == 64) is not None:
            return None
        major = prop(d, "computeMajor", lambda v: v.__class__ is int and 0 < v < 100)
        minor = prop(d, "computeMinor", lambda v: v.__class__ is int and 0 <= v < 100)
        return float(f"{major}.{minor or 0}") if major is not None else None

    devices = Columns({
        "device": np.arange(len(dev_ids), dtype=np.int32), "host": np.zeros(len(dev_ids), dtype=np.int64),
        "device_id": dev_ids.astype(np.int64), "label": np.array([str(int(d)) for d in dev_ids], dtype=object),
        "name": np.array([F.cap(prop(d, "name", lambda v: isinstance(v, str)) or "") for d in dev_ids], dtype=object),
        "sm_count": [prop(d, "numSms", lambda v: v.__class__ is int and v > 0) for d in dev_ids],
        "compute_capability": [cc(d) for d in dev_ids],
        # per-SM limits for the occupancy calculator (maxBlocksPerSm is not recorded: from the
        # compute capability)
        **{c: [limit(d, c) for d in dev_ids] for c in S.GPU_LIMIT_COLUMNS},
    })

    # ---- names: kernel short names, copy and memset kinds ------------------------------------
    short_of: dict[int, int] = {}
    for nid in np.unique(gpu["kernels"]["name_id"]).tolist():
        short = F.cap(short_kernel_name(names[nid]))
        sid = acc.names.get(short)
        if sid is None:
            sid = acc.names[short] = len(acc.names)
            names.append(short)
        short_of[nid] = sid
    if names and max(map(len, names)) > F.MAX_STRING_CHARS:
        names = [F.cap(x) for x in names]
    strings = StringTable(np.arange(len(names), dtype=np.int64), np.array(names, dtype=object))

    out: dict = {}
    for key, d in gpu.items():
        nid = d.pop("name_id")
        nbytes = d.pop("bytes")
        d["device"] = np.searchsorted(dev_ids, d["device_id"]).astype(np.int32)
        d["proc"] = np.searchsorted(all_keys, d.pop("global_pid") & S.PROCESS_MASK).astype(np.int32)
        uniq = np.unique(nid)
        if key == "kernels":
            lut = np.array([short_of.get(int(i), int(i)) for i in uniq], dtype=np.int64)
            d["name_id"] = nid
            d["short_id"] = lut[np.searchsorted(uniq, nid)] if len(nid) else np.zeros(0, np.int64)
        elif key == "memcpy":
            kinds = np.array([_copy_kinds(names[int(i)]) for i in uniq], dtype=np.int64).reshape(-1, 3)
            pos = np.searchsorted(uniq, nid)
            d["bytes"] = nbytes
            d["copy_kind"], d["src_kind"], d["dst_kind"] = (kinds[pos, j] if len(nid) else np.zeros(0, np.int64)
                                                           for j in range(3))
            host_kind = np.full(len(nid), -1, dtype=np.int8)
            h2d, d2h = d["copy_kind"] == S.COPY_HTOD, d["copy_kind"] == S.COPY_DTOH
            host_kind[h2d] = d["src_kind"][h2d]
            host_kind[d2h] = d["dst_kind"][d2h]
            d["host_kind"] = host_kind
        elif key == "memset":
            mk = np.array([_memset_kind(names[int(i)]) for i in uniq], dtype=np.int64)
            d["bytes"] = nbytes
            d["mem_kind"] = mk[np.searchsorted(uniq, nid)] if len(nid) else np.zeros(0, np.int64)
        else:
            st = np.array([_sync_type(names[int(i)]) for i in uniq], dtype=np.int64)
            d["sync_type"] = st[np.searchsorted(uniq, nid)] if len(nid) else np.zeros(0, np.int64)
        out[key] = F.column_table(d, S.DTYPES)
    F.assign_streams(out, ["kernels", "memcpy", "memset", "sync"])

    # ---- host tables ------------------------------------------------------------------------
    tids = np.unique(np.concatenate([F.unique_ints(rt["global_tid"]), F.unique_ints(host["global_tid"])]))
    rt["api_kind"] = F.api_kind_codes(strings)(rt["name_id"]).astype(np.int8) if len(rt["name_id"]) \
        else np.zeros(0, np.int8)
    rt["proc"] = np.searchsorted(all_keys, rt["global_tid"] & S.PROCESS_MASK).astype(np.int32)
    rt["thread"] = np.searchsorted(tids, rt.pop("global_tid")).astype(np.int32)
    out["runtime"] = F.column_table(rt, S.DTYPES)
    text = strings.values[host["name_id"]] if len(host["name_id"]) else np.zeros(0, dtype=object)
    # PyTorch's per-call fields (a 2021 trace's ", stack = "), read once per distinct name
    # (names in order of first appearance: the group codes a per-row pass would give)
    inv, used = factorize(np.asarray(host["name_id"], dtype=np.int64))
    groups = Groups()
    grp, seq, flags = text_facts([v if isinstance(v, str) else "" for v in strings.values[used].tolist()], groups)
    nvtx_facts = ({"text_group": grp[inv], "seq": seq[inv], "call_flags": flags[inv]}, groups.texts)
    domain = np.array(_DOMAINS, dtype=object)[host["dom"]] if len(host["dom"]) else np.zeros(0, dtype=object)
    out["nvtx"] = Columns({
        "start_ns": host["start_ns"], "end_ns": host["end_ns"],
        "event_type": np.full(len(host["start_ns"]), S.NVTX_PUSHPOP, dtype=np.int64),
        "global_tid": host["global_tid"], "text": text, "domain": domain,
        "thread": np.searchsorted(tids, host["global_tid"]).astype(np.int32)})
    out["osrt"] = Columns({"start_ns": np.zeros(0, np.int64), "end_ns": np.zeros(0, np.int64),
                                "global_tid": np.zeros(0, np.int64), "name_id": np.zeros(0, np.int32),
                                "is_wait": np.zeros(0, dtype=bool), "thread": np.zeros(0, np.int32)})
    out["threads"] = F.threads_table(tids, {k: v for k, v in thread_names.items()})
    out["processes"] = processes
    out["devices"] = devices
    out["gpu_metrics"] = Columns({"timestamp_ns": np.zeros(0, np.int64), "device_id": np.zeros(0, np.int64),
                                  "metric": np.zeros(0, object), "value": np.zeros(0, np.float64)})
    out["diagnostics"] = Columns({"timestamp_ns": [], "severity": [], "text": []})
    ov = [(s - shift, e - shift, name) for s, e, name in acc.overhead if s <= e]
    out["overhead"] = Columns({"start_ns": np.array([o[0] for o in ov], dtype=np.int64),
                               "end_ns": np.array([o[1] for o in ov], dtype=np.int64),
                               "global_tid": np.zeros(len(ov), dtype=np.int64),
                               "name": np.array([o[2] for o in ov], dtype=object)})
    for key, cols in F.FRAME_COLUMNS.items():
        if tuple(out[key].columns) != cols:
            out[key] = out[key].select(cols)

    # ---- what was recorded --------------------------------------------------------------------
    counts = {k: len(out[k]) for k in ("kernels", "memcpy", "memset", "runtime", "sync", "nvtx")}
    traced = {k: False for k in S.TRACE_TYPES}
    traced.update({"cuda_api": counts["runtime"] > 0, "cuda_kernels": counts["kernels"] > 0,
                   "cuda_memcpy": counts["memcpy"] > 0, "cuda_memset": counts["memset"] > 0,
                   "cuda_sync": counts["sync"] > 0, "nvtx": counts["nvtx"] > 0})
    not_recorded = {k: v for k, v in NOT_RECORDED.items() if not traced[k]}
    ends = [int(out[k]["end_ns"].max()) for k in ("kernels", "memcpy", "memset", "runtime", "nvtx") if counts[k]]
    begins = [int(out[k]["start_ns"].min()) for k in ("kernels", "memcpy", "memset", "runtime", "nvtx") if counts[k]]
    duration = span_duration if span_duration is not None else (max(ends) - min(begins) if ends else None)
    # the instant trace viewers (Perfetto, chrome://tracing, TensorBoard's trace view) show as 0:
    # the profiler's span starts first (Kineto writes it at the profiler's start), else the first event
    viewer_origin = min(s for s, _ in spans) if spans else (min(begins) if begins else None)
    dist = meta.get("distributedInfo")
    distributed = None
    if isinstance(dist, dict):
        rank, world = dist.get("rank"), dist.get("world_size")
        backend = dist.get("backend")
        distributed = {"rank": _small_int(rank, 0, 1 << 24, None),
                       "world_size": _small_int(world, 1, 1 << 24, None),
                       "backend": F.cap(backend)[:64] if isinstance(backend, str) else None}
        if distributed["rank"] is None:
            distributed = None
    schema = meta.get("schemaVersion")
    info = {"schema_version": None if schema is None or isinstance(schema, (dict, list)) else str(schema)[:32],
            "duration_ns": duration, "session_start_utc_ns": session_start, "traced": traced,
            "clock": "absolute" if shift else "session",
            "viewer_origin_ns": viewer_origin,
            "not_recorded": not_recorded, "distributed": distributed,
            "tables": sorted({TABLE_NAMES[k] for k in acc.kinds if k in TABLE_NAMES})}
    items = sorted(acc.launch_codes.items(), key=lambda kv: kv[1])
    launch = F.launch_arrays([k for (k, _), _c in items], [e for (_, e), _c in items])
    return {"frames": out, "strings": strings, "info": info, "n_names": n_names, "launch": launch,
            "nvtx_facts": nvtx_facts}


def _flow_correlations(acc: _Acc, rt: dict, rt_thr: np.ndarray, gpu: dict, times) -> None:
    """Rows without a ``correlation`` arg get the id of the ``ac2g`` flow bound to them: a flow
    start on the launching call's thread at its ``ts``, a flow end on the GPU row's device and
    stream at its ``ts`` (Kineto's flow id is the correlation id)."""
    fs, ff = acc.flow_s, acc.flow_f
    need_rt = bool(len(rt["correlation_id"]) and (rt["correlation_id"] == 0).any())
    need_gpu = any(len(d["correlation_id"]) and (d["correlation_id"] == 0).any() for d in gpu.values())
    if need_rt and len(fs["id"]):
        _fill_from_flows(rt["correlation_id"], rt_thr, rt["start_ns"],
                         _np(fs["thr"], np.int64), times(fs["ts"]), _np(fs["id"], np.int64))
    if need_gpu and len(ff["id"]):
        fkey = (_np(ff["dev"], np.int64) << 32) | (_np(ff["st"], np.int64) & 0xFFFFFFFF)
        fts, fid = times(ff["ts"]), _np(ff["id"], np.int64)
        for d in gpu.values():
            if len(d["correlation_id"]) and (d["correlation_id"] == 0).any():
                key = (np.where(d["device_id"] == BAD, -1, d["device_id"]) << 32) | (d["stream_id"] & 0xFFFFFFFF)
                _fill_from_flows(d["correlation_id"], key, d["start_ns"], fkey, fts, fid)
    acc.flow_s = acc.flow_f = None  # type: ignore[assignment]


def _fill_from_flows(corr: np.ndarray, key: np.ndarray, ts: np.ndarray, fkey: np.ndarray, fts: np.ndarray,
                     fid: np.ndarray) -> None:
    """Set ``corr`` of each row holding 0 to the id of the flow with the row's (``key``, ``ts``):
    of several such flows, the last one listed. One sort of the flows and the rows together (each
    row after the flows of its pair), no pandas."""
    miss = np.flatnonzero(corr == 0)
    nf = len(fkey)
    if not len(miss) or not nf:
        return
    k = np.concatenate([np.asarray(fkey, np.int64), np.asarray(key, np.int64)[miss]])
    t = np.concatenate([np.asarray(fts, np.int64), np.asarray(ts, np.int64)[miss]])
    is_row = np.arange(len(k)) >= nf
    order = np.lexsort((is_row, t, k))  # by pair, its flows (in listed order: stable) before its rows
    k, t, is_row = k[order], t[order], is_row[order]
    # the last flow at or before each position, and whether it has that position's pair
    last = np.maximum.accumulate(np.where(is_row, -1, np.arange(len(k))))
    j = np.flatnonzero(is_row)
    f = last[j]
    hit = f >= 0
    j, f = j[hit], f[hit]
    same = (k[f] == k[j]) & (t[f] == t[j])
    j, f = j[same], f[same]
    corr[miss[order[j] - nf]] = np.asarray(fid)[order[f]]


# --------------------------------------------------------------------------------------------
# public
# --------------------------------------------------------------------------------------------
def load_kineto(path: str | os.PathLike, *, cache: bool = True, cache_dir: str | os.PathLike | None = None,
                progress=None) -> Trace:
    """Load a PyTorch Profiler (Kineto) trace. Raises :mod:`nsysdoc.errors` exceptions (one line,
    exit 2 at the CLI) on input that is not JSON, not a trace, truncated, damaged or empty."""
    t0 = time.perf_counter()
    p = regular_file(path, "input")
    folder = Path(cache_dir or cache_m.default_cache_dir())
    entry = cache_m.entry_path(folder, p, "trace", f"{CACHE_FORMAT}-kineto{KINETO_FORMAT}") if cache else None
    cached = cache_read(entry) if entry is not None else None
    if cached is not None and cached["meta"].get("source_tool") == SOURCE_TOOL:
        meta, frames, strings, from_cache = cached["meta"], cached["frames"], cached["strings"], True
        store, extras = cached["store"], cached
    else:
        if progress:
            progress("reading the PyTorch Profiler trace")
        try:
            top, acc = _parse(p, progress)
            if not (len(acc.rt["s"]) or len(acc.host["s"]) or any(len(t["s"]) for t in acc.gpu.values())):
                raise EmptyTraceError(
                    f"{p}: empty trace: no kernel, CUDA API, memcpy/memset or CPU-op events were recorded "
                    f"({acc.events:,} trace events in all)",
                    hint="profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] around steps that run")
            if progress:
                progress("building tables")
            drops = F.Drops()
            built = _frames(top, acc, p, drops)
        except (ValueError, TypeError, OverflowError, KeyError, IndexError) as exc:
            raise CorruptFileError(f"{p}: damaged trace: unexpected values ({type(exc).__name__}: "
                                   f"{str(exc).splitlines()[0][:120] if str(exc) else ''})") from None
        except MemoryError:
            raise InputError(f"{p}: not enough memory to load this trace") from None
        frames, strings, info = built["frames"], built["strings"], built["info"]
        meta = {"nsys_version": None, "schema_version": info["schema_version"], "duration_ns": info["duration_ns"],
                "process_messages": [], "session_start_utc_ns": info["session_start_utc_ns"], "clock": info["clock"],
                "dropped_rows": drops.as_list(), "source_tool": SOURCE_TOOL, "traced": info["traced"],
                "not_recorded": info["not_recorded"], "distributed": info["distributed"], "tables": info["tables"],
                "viewer_origin_ns": info["viewer_origin_ns"]}
        from_cache = False
        tmp = cache_tmp(folder) if entry is not None else None
        store, extras = F.store_from_frames(frames, strings, tmp, write_all=tmp is not None,
                                            launch_configs=built["launch"], nvtx_facts=built["nvtx_facts"])
        if tmp is not None and not publish(tmp, entry, meta, frames, strings, store, extras):
            store._own_tmp = tmp
    traced = {k: bool(meta.get("traced", {}).get(k, False)) for k in S.TRACE_TYPES}
    trace = Trace(
        path=str(p), nsys_version=None, schema_version=meta.get("schema_version"),
        tables=frozenset(meta.get("tables") or ()), traced=traced, strings=strings,
        store=store, **{name: frames[name] for name in F.SMALL_FRAMES},
        nvtx_domains=extras["nvtx_domains"], nvtx_groups=extras["nvtx_groups"], derived=extras["derived"],
        duration_ns=meta.get("duration_ns"), process_messages=[],
        session_start_utc_ns=meta.get("session_start_utc_ns"), clock=meta.get("clock") or "session",
        dropped_rows=list(meta.get("dropped_rows") or []), from_cache=from_cache,
        source_tool=SOURCE_TOOL, not_recorded=dict(meta.get("not_recorded") or {}),
        distributed=meta.get("distributed"),
        viewer_origin_ns=meta.get("viewer_origin_ns") if isinstance(meta.get("viewer_origin_ns"), int) else None,
    )
    trace.load_seconds = time.perf_counter() - t0
    return trace
