"""Read a PyTorch Profiler (Kineto) Chrome-trace JSON into a :class:`~nsysdoc.trace.model.Trace`.

The only module that knows the Kineto trace format (``docs/kineto.md``). It produces exactly the
frames and columns the SQLite reader produces (:data:`nsysdoc.trace.tables.FRAME_COLUMNS`), so every
metric, rule and report above it is the same for both inputs.

How:

* **Streaming.** ``traceEvents`` is read from the file's bytes (``gzip.open`` for ``.gz``) a
  window of 4 MB at a time, never decoded to text, by two column readers at once (:func:`_events`):
  pyarrow's JSON reader on a worker thread (:func:`_arrow_read`: no Python object per event;
  :func:`_arrow_chunk` makes the rows from its columns), and :mod:`msgspec` on this one, which
  decodes a window's events into structs of only the fields a row needs (a ``cpu_op``'s input
  shapes and the like are skipped, never built), turned into columns by :func:`_chunk`. Each
  window's rows are numbered on their own and merged in file order. Any window neither takes
  (damage, values of unexpected types, text without event ends) goes to the one-event-at-a-time
  reader (:func:`_events_slow`, :meth:`json.JSONDecoder.raw_decode`), which defines the
  behaviour: all give the same rows. The file is never held as Python objects
  (``benchmarks/bench_kineto.py`` measures it against ``json.load``).
* **Times.** ``ts``/``dur`` are microseconds, written by Kineto as decimal text with 3 digits
  (``"5203460419.456"``) since PyTorch 2.0 and as integers before. Floats are read as their text
  and converted to integer nanoseconds exactly (no binary float in between), so nothing drifts
  and ordering is kept; other decimal forms are rounded half-even to the nanosecond.
* **Validation.** The SQLite reader's row checks (:func:`nsysdoc.trace.tables.validate`): rows no
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
import sys
import time
import zlib
from array import array
from collections import deque
from itertools import compress
from decimal import ROUND_HALF_EVEN, Decimal, DecimalException
from json import JSONDecodeError
from pathlib import Path

import msgspec
import numpy as np

from .. import cache as cache_m
from ..errors import CorruptFileError, EmptyCaptureError, InputError
from ..formats import GZIP_MAGIC, SNIFF_CHARS  # noqa: F401 - SNIFF_CHARS re-exported
from ..inputs import regular_file
from . import tables as F
from . import schema as S
from .cache_entry import CACHE_FORMAT, cache_read, cache_tmp, publish
from .nvtx_text import Groups, text_facts
from .nvtx_text import SIZES_FIELD as _SIZES_FIELD, SIZES_MAX_CHARS as _SIZES_MAX, sizes_text as _sizes_text
from .nvtx_text import raw_too_long_shapes as _raw_too_long_shapes
from .columns import Columns, factorize
from .model import StringTable, Trace

#: ``Trace.source_tool`` of traces read here.
SOURCE_TOOL = "pytorch-profiler"
#: Bump when the mapping below changes: cached tables of older versions are then rebuilt.
KINETO_FORMAT = 7  # 6: [memory] events; 7: record_shapes ("Input Dims") kept in op texts (issue 47)
#: Characters read per refill of the stream.
CHUNK_CHARS = 1 << 20
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
#: PyTorch's allocator events (``profile_memory=True``): instant events (``ph: "i"``) named
#: ``[memory]``, whatever their ``cat`` (none before PyTorch 1.13, ``cpu_instant_event`` after);
#: a row of the memory table (issue 47), outside the X kinds and the flow/metadata codes
K_MEM = 12
MEMORY_EVENT = "[memory]"
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
# what a file holds is decided in nsysdoc/formats.py (the one resolver); re-exported here
from ..formats import _head, _is_regular, is_kineto_trace, routes_here  # noqa: E402,F401


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
        # [memory] events: time, thread, Device Type (-1 unknown), Device Id (-2 unknown), Bytes
        # (signed, BAD unknown), Total Allocated / Total Reserved / Addr (-1 when absent)
        self.mem = {"s": q(), "thr": i(), "dtype": i(), "dev": i(), "bytes": q(), "alloc": q(), "resv": q(),
                    "addr": q()}
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
        #: windows read by each path (:func:`_events`): "arrow", "msgspec", and "slow" (one call
        #: of the one-event-at-a-time reader, for a window or the events after the last cut)
        self.paths = {"arrow": 0, "msgspec": 0, "slow": 0}

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
    from .python_frames import is_user_frame

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
                            # record_shapes: the op's input shapes, as emit_nvtx writes them ("sizes = [[2, 3]]")
                            dims = a.get("Input Dims")
                            if dims.__class__ is list and name.__class__ is str:
                                sz = _sizes_text(dims)
                                if sz is not None:
                                    name = f"{name}{_SIZES_FIELD}{sz}"
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
            elif ph == "i" and ev.get("name") == MEMORY_EVENT:
                _memory_event(ev, acc)
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
#: bytes per window (its last event ends at a "},": its separator). 8 MB before the Arrow path:
#: with windows read two ways at once, 4 MB is as fast and holds less memory
FAST_CHARS = 4 << 20
#: whether windows are read by pyarrow's JSON reader too (:func:`_arrow_read`); the tests turn
#: it off to check the msgspec path on its own
ARROW = sys.byteorder == "little"  # (decimals are read as little-endian words: _dec_ns)
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
    # [memory] events (issue 47)
    m_bytes: object = msgspec.field(default=None, name="Bytes")
    m_alloc: object = msgspec.field(default=None, name="Total Allocated")
    m_resv: object = msgspec.field(default=None, name="Total Reserved")
    m_dtype: object = msgspec.field(default=None, name="Device Type")
    m_dev: object = msgspec.field(default=None, name="Device Id")
    m_addr: object = msgspec.field(default=None, name="Addr")
    # record_shapes: an op's input shapes, as written (made a text once per distinct value: _dims_texts)
    dims: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Dims")


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
_DIMS_DECODE = json.JSONDecoder(parse_float=str, parse_int=_big_int).decode


def _dims_texts(raws: list) -> list:
    """:func:`~nsysdoc.trace.nvtx_text.sizes_text` of each op's ``Input Dims`` as written (a
    ``msgspec.Raw``; empty when missing), decoded as the slow path decodes it, once per distinct
    text (an op's shapes repeat every step); the loops over the ops are C-level (``map``)."""
    keys = list(map(bytes, raws))
    memo = {}
    for key in set(keys):
        got = None
        if key and not _raw_too_long_shapes(key):  # (a huge value is None without decoding it)
            try:
                got = _sizes_text(_DIMS_DECODE(key.decode("utf-8")))
            except (ValueError, RecursionError):
                got = None
        memo[key] = got
    return list(map(memo.__getitem__, keys))


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
_THREADED = (K_RUNTIME, K_DRIVER, K_HOST, K_MEM)
#: :class:`_Args` field of each memory column (:data:`_MEM_ARGS`)
_MEM_FIELDS = {"dtype": "m_dtype", "dev": "m_dev", "bytes": "m_bytes", "alloc": "m_alloc", "resv": "m_resv",
               "addr": "m_addr"}


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


def _commit_rows(acc: _Acc, kinds: np.ndarray, gpu_rows: dict, rt_row, host_row, fs_row, fe_row) -> None:
    """Append one window's rows (either reader's: :func:`_chunk`, :func:`_arrow_chunk`) to the
    accumulator's columns; a table whose row dict is None got no rows."""
    acc.kinds.update(kinds.tolist())
    for kind, row in gpu_rows.items():
        for k, v in row.items():
            _add(acc.gpu[kind][k], v)
    for table, row in ((acc.rt, rt_row), (acc.host, host_row), (acc.flow_s, fs_row), (acc.flow_f, fe_row)):
        if row is not None:
            for k, v in row.items():
                _add(table[k], v)


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
        elif evs[i].ph == "i" and evs[i].name == MEMORY_EVENT:
            kinds[i] = K_MEM
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
        dims = [a.dims for a in o_args]
        if any(dims):  # record_shapes: the input shapes, as emit_nvtx writes them
            for i, sz in zip(o_pos, _dims_texts(dims)):
                name = nm[i]
                if sz is not None and name.__class__ is str:
                    nm[i] = f"{name}{_SIZES_FIELD}{sz}"
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
    # ---- memory events ------------------------------------------------------------------------
    mem_row = None
    if (kinds == K_MEM).any():
        mev = list(compress(evs, (kinds == K_MEM).tolist()))
        margs = [_NO_ARGS if e.args is None else e.args for e in mev]
        mem_row = {"s": _ns_many([e.ts for e in mev]), "thr": thr_all[thr_kind == K_MEM]}
        for key, (_arg, lo, hi, other) in _MEM_ARGS.items():
            fld = _MEM_FIELDS[key]
            mem_row[key] = _ints([getattr(a, fld) for a in margs], lo, hi, lambda i, o=other: o)
    # ---- commit -----------------------------------------------------------------------------------
    _commit_rows(acc, np.unique(xk), gpu_rows, rt_row, host_row, fs_row, fe_row)
    if mem_row is not None:
        for k, v in mem_row.items():
            _add(acc.mem[k], v)
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


# --------------------------------------------------------------------------------------------
# Arrow path: a window's events parsed into columns by pyarrow's JSON reader (no Python object
# per event) on a worker thread, then the rows built with pyarrow's kernels and numpy; any window
# it does not take goes to the msgspec path
# --------------------------------------------------------------------------------------------
#: the deepest nesting the Arrow path takes (far below the recursion limit at which msgspec and
#: the json module give up: deeper windows get their RecursionError, and refusal, as before).
#: An event shorter than twice this nests less deeply (each level takes two brackets); the
#: brackets of longer ones are counted
_MAX_NEST = 512
#: bytes per block when looking for the event separators (:func:`_deep_event`)
_SEP_BLOCK = 512
#: an aligned block of this many bytes all digits is where a run of 33 digits would be (any
#: number text over :data:`_MAX_NUMBER_CHARS` characters has one)
_DIGIT_BLOCK = 17
_LEADING_OBJECT = re.compile(rb"[ \t\n]*\{")
_GPU_KINDS = (K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC)


class _NotForArrow(Exception):
    """A window pyarrow read whose rows it cannot make exactly (the msgspec path reads it)."""


_ARROW: dict = {}


def _arrow():
    """pyarrow and the reader's options (tids as numbers, and as text: traces before PyTorch 1.13),
    imported on first use."""
    if not _ARROW:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.json as pj

        i64 = pa.int64()
        # the fields a row needs, typed as Kineto writes them: a window where any of them has
        # another type (a string pid, a float grid) fails to parse and goes to the msgspec path
        args = pa.struct([("device", i64), ("stream", i64), ("context", i64), ("correlation", i64),
                          ("bytes", i64), ("grid", pa.list_(i64)), ("block", pa.list_(i64)),
                          ("registers per thread", i64), ("shared memory", i64),
                          ("est. achieved occupancy %", i64), ("Sequence number", i64),
                          ("Call stack", pa.string()), ("name", pa.string()),
                          # [memory] events (issue 47)
                          ("Bytes", i64), ("Total Allocated", i64), ("Total Reserved", i64),
                          ("Device Type", i64), ("Device Id", i64), ("Addr", i64),
                          ("Input Dims", pa.list_(pa.list_(i64)))])
        # times as decimals of 3 places: exact (no binary float), and a value with more places,
        # or more than 24 digits, fails to parse
        us = pa.decimal128(24, 3)
        got = {"pa": pa, "pc": pc, "pj": pj}
        for tid in ("int", "text"):
            schema = pa.schema([("ph", pa.string()), ("cat", pa.string()), ("name", pa.string()), ("pid", i64),
                                ("tid", i64 if tid == "int" else pa.string()), ("ts", us), ("dur", us), ("id", i64),
                                ("args", args)])
            got[tid] = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore",
                                       newlines_in_values=True)
        _ARROW.update(got)  # (at once: the worker thread and this one may both ask)
    return _ARROW


#: bytes after which a ``NaN`` or ``Inf`` could be a JSON value: ':', '[', ',', blanks, '-'
_BEFORE_LITERAL = np.frombuffer(b":[, \t\n-", dtype=np.uint8)
_DIGIT_RUN = re.compile(rb"[0-9]{33}")


def _odd_literals(body: bytes, c: np.ndarray) -> bool:
    """Whether ``body`` (``c``: its bytes) may hold ``Inf`` or ``-NaN`` as a value: pyarrow takes
    them where it ignores a field, the json module refuses them (``NaN``, ``Infinity`` and
    ``-Infinity`` both take; ``Infinity`` is refused here with ``Inf``, a name such as
    ``cudaStreamGetCaptureInfo`` is not). Looked for as bytes ('N' is rare in traces, 'I' not)."""
    if body.find(b"N") >= 0:
        p = np.flatnonzero(c == 78)  # 'N'
        p = p[(p > 0) & (p + 2 < len(c))]
        if ((c[p - 1] == 45) & (c[p + 1] == 97) & (c[p + 2] == 78)).any():  # -NaN
            return True
    p = np.flatnonzero(c == 73)  # 'I'
    p = p[p + 2 < len(c)]
    p = p[(c[p + 1] == 110) & (c[p + 2] == 102)]  # Inf (Infinity too: refused alike)
    return bool(len(p)) and (p[0] == 0 or np.isin(c[p[p > 0] - 1], _BEFORE_LITERAL).any())


def _long_digit_run(body: bytes) -> bool:
    """Whether ``body`` has a run of 33 digits (where a time text over :data:`_MAX_NUMBER_CHARS`
    characters, out of range for the slow path, could be: pyarrow reads it as a number)."""
    n = len(body) // _DIGIT_BLOCK
    for k in np.flatnonzero(np.strings.isdigit(np.frombuffer(body, dtype=f"S{_DIGIT_BLOCK}", count=n))).tolist():
        at = k * _DIGIT_BLOCK
        if _DIGIT_RUN.search(body, max(0, at - 32), at + _DIGIT_BLOCK + 32):
            return True
    return False


def _deep_event(text: np.ndarray) -> bool:
    """Whether an event of ``text`` (bytes; events separated by ``\\r``: :func:`_arrow_text`)
    may nest :data:`_MAX_NEST` deep. The first separator of each block of :data:`_SEP_BLOCK`
    bytes is found at once; between two such separators less than twice that apart, events nest
    less deeply (each level takes two brackets); any longer stretch (a long event, or the
    window's ends) is looked at as a whole: fewer than that many opening brackets in it, no
    event in it nests so deeply."""
    n = len(text) // _SEP_BLOCK
    first = np.strings.find(np.frombuffer(text, dtype=f"S{_SEP_BLOCK}", count=n), b"\r")
    cut = np.flatnonzero(first >= 0)
    at = np.concatenate(([0], cut * _SEP_BLOCK + first[cut], [len(text)]))
    long = np.flatnonzero(np.diff(at) >= 2 * _MAX_NEST)
    if not len(long):
        return False
    opening = np.flatnonzero((text == 91) | (text == 123))  # '[', '{'
    inside = np.searchsorted(opening, at[long + 1]) - np.searchsorted(opening, at[long])
    return bool((inside >= _MAX_NEST).any())


def _arrow_text(body: bytes) -> np.ndarray | None:
    """The events of a window (``body``: UTF-8 from an event's ``{`` to the last event's ``}``,
    events separated by ``},\\n``) as text for pyarrow's JSON reader (:func:`_arrow_read`), or
    None when the window is not for the Arrow path, which then reads exactly what
    :func:`_events_slow` would:

    * separators: each ``},\\n`` becomes ``}\\r\\n`` (whitespace: pyarrow reads objects one after
      another). One inside an event (a nested object followed by ``,`` and a line break) would
      leave two members or elements without a comma between them: invalid JSON, so the parse
      fails; a ``,`` between events not written so is left, and fails too. A window that
      parses is therefore exactly its events, each between two ``\\r``;
    * what pyarrow accepts and the json module does not, or reads differently, is refused here:
      a ``\\r`` in the text (it marks the separators), a first value that is not an object
      (pyarrow 26 crashes on a leading ``null``), ``Inf`` or ``-NaN`` as a value
      (:func:`_odd_literals`), a run of 33 digits (:func:`_long_digit_run`), an event nested
      :data:`_MAX_NEST` deep (:func:`_deep_event`: pyarrow has no depth limit; msgspec and the
      json module stop near the recursion limit). (A GPU row whose ``device`` is null, which
      pyarrow cannot tell from a missing one, is refused by :func:`_arrow_chunk`);
    * values of other types than the schema's (a string pid, a float in ``grid``, ``NaN`` in a
      number), times with more than 3 decimals, duplicate keys, invalid JSON: pyarrow raises
      (ArrowInvalid: :func:`_arrow_read`)."""
    if not _LEADING_OBJECT.match(body) or body.find(b"\r") >= 0:
        return None
    c = np.frombuffer(body, dtype=np.uint8)
    if _odd_literals(body, c) or _long_digit_run(body):
        return None
    at = np.flatnonzero(c[1:-1] == 44)  # ',': those of "},\n" become '\r' (numpy: without the GIL)
    at = at[(c[at] == 125) & (c[at + 2] == 10)] + 1
    text = c.copy()
    text[at] = 13
    return None if _deep_event(text) else text


_ROW = re.compile(r"changed from \w+ to \w+ in row (\d+)")


def _arrow_read(body: bytes, tid: str = "int"):
    """pyarrow's table of the events of a window (``body``: :func:`_arrow_text`), the tid type it
    was read with (``tid``, else the other one), and how many bytes of ``body`` it holds: all,
    or the events before the first one of another type than the schema's (a span's text pid,
    say), the rest being left to the msgspec path. None when it is not for pyarrow or none can
    be read. Runs on a worker thread, mostly without the GIL (numpy, pyarrow's parser)."""
    text = _arrow_text(body)
    if text is None:
        return None
    ar = _arrow()
    pa, pj = ar["pa"], ar["pj"]
    read = pj.ReadOptions(use_threads=False, block_size=len(text) + 1)
    best = (0, tid)
    for kind in (tid, "text" if tid == "int" else "int"):
        try:
            return pj.read_json(pa.BufferReader(text), parse_options=ar[kind], read_options=read), kind, len(text)
        except pa.ArrowException as exc:
            m = _ROW.search(str(exc))
            if m is None:
                return None
            best = max(best, (int(m.group(1)), kind))
            if "Column(/tid) changed from" not in str(exc):
                break
    rows, kind = best
    if rows == 0:
        return None
    end = int(np.flatnonzero(text == 13)[rows - 1])  # the '\r' after it
    if end < len(text) // 4:  # (a 2021 trace's device events mix number and text tids: msgspec's)
        return None
    try:
        return pj.read_json(pa.BufferReader(text[:end]), parse_options=ar[kind], read_options=read), kind, end
    except pa.ArrowException:
        return None


def _valid(arr) -> np.ndarray:
    """Which values of a pyarrow array are not null (a bool array)."""
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _int_col(arr) -> tuple[np.ndarray, np.ndarray]:
    """An int64 pyarrow array as (values, 0 where null; which are not null)."""
    if arr.null_count == 0:
        return arr.to_numpy(), np.ones(len(arr), dtype=bool)
    return arr.fill_null(0).to_numpy(), arr.is_valid().to_numpy(zero_copy_only=False)


def _dec_ns(arr) -> np.ndarray:
    """A decimal128(24, 3) array of microseconds as int64 nanoseconds, exactly: the decimal's
    unscaled integer (two little-endian 64-bit words) is the nanoseconds. BAD where null or not
    within +-2^62 ns, as :func:`us_to_ns`."""
    data = arr.buffers()[1]
    if data is None or arr.null_count == len(arr):
        return np.full(len(arr), BAD, dtype=np.int64)
    w = np.frombuffer(data, dtype=np.int64)[2 * arr.offset:2 * (arr.offset + len(arr))]
    lo, hi = w[0::2], w[1::2]
    ok = (hi == (lo >> 63)) & (lo > -_LIM) & (lo < _LIM)
    if arr.null_count:
        ok &= _valid(arr)
    return np.where(ok, lo, BAD)


def _first_codes(pc, arr) -> tuple[np.ndarray, list]:
    """(code of each value, the distinct values as Python objects in order of first appearance;
    null is a value, None)."""
    d = pc.dictionary_encode(arr, null_encoding="encode")
    return d.indices.to_numpy().astype(np.int64), d.dictionary.to_pylist()


def _row_codes(pa, pc, mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(code of each row of an int64 matrix, the distinct rows in order of first appearance):
    the rows hashed as fixed-size binary values by pyarrow."""
    mat = np.ascontiguousarray(mat, dtype=np.int64)
    width = mat.shape[1]
    rows = pa.Array.from_buffers(pa.binary(8 * width), len(mat), [None, pa.py_buffer(mat)])
    d = pc.dictionary_encode(rows)
    uniq = np.frombuffer(d.dictionary.buffers()[1], dtype=np.int64).reshape(-1, width)
    return d.indices.to_numpy().astype(np.int64), uniq


def _number(known: dict, new: dict, keys: list) -> np.ndarray:
    """Each key's number (``keys``: distinct): from ``known``, else the next number after
    ``known``'s, in order, recorded in ``new`` (empty): the slow path's numbering, not yet
    committed."""
    got = list(map(known.get, keys))
    if None in got:
        missing = [k for k, v in zip(keys, got) if v is None]
        new.update(zip(missing, range(len(known), len(known) + len(missing))))
        got = list(map(new.get, keys, got))  # (a known key is never in new: its number stays)
    return np.fromiter(got, dtype=np.int64, count=len(got))


def _list3(lst, rows: np.ndarray) -> np.ndarray:
    """For the ``rows`` of a list<int64> array: is it a list of 3, and its 3 values with their
    validity (zeros when not a list of 3), as 7 int64 columns."""
    k = len(rows)
    out = np.zeros((k, 7), dtype=np.int64)
    off = lst.offsets.to_numpy()
    lens = np.where(_valid(lst), off[1:] - off[:-1], -1)[rows]
    is3 = lens == 3
    out[:, 0] = is3
    if is3.any():
        vals, ok = _int_col(lst.values)
        at = off[:-1][rows][is3]
        for j in range(3):
            out[is3, 1 + 2 * j] = vals[at + j]
            out[is3, 2 + 2 * j] = ok[at + j]
    return out


def _arrow_launch(pa, pc, acc: _Acc, rows: np.ndarray, f: dict, new_raw: dict, new_items: dict) -> np.ndarray:
    """:meth:`_Acc.launch_code5` of each kernel row, the distinct configurations looked up once
    (in order of first appearance, so new codes are numbered as the slow path numbers them)."""
    parts = [_list3(f["grid"], rows), _list3(f["block"], rows)]
    for key in ("registers per thread", "shared memory", "est. achieved occupancy %"):
        v, ok = _int_col(f[key])
        parts.append(np.stack([v[rows], ok[rows]], axis=1))
    codes, uniq = _row_codes(pa, pc, np.concatenate(parts, axis=1))
    out = []
    for u in uniq.tolist():
        g = tuple(u[1 + 2 * j] if u[2 + 2 * j] else None for j in range(3)) if u[0] else None
        b = tuple(u[8 + 2 * j] if u[9 + 2 * j] else None for j in range(3)) if u[7] else None
        regs, smem, est = (u[14] if u[15] else None), (u[16] if u[17] else None), (u[18] if u[19] else None)
        raw = (*g, *b, regs, smem, est) if g is not None and b is not None else (g, b, regs, smem, est)
        code = acc.launch_raw.get(raw)
        if code is None:
            code = new_raw.get(raw)
        if code is None:
            item = _launch_fields(raw)
            code = acc.launch_codes.get(item)
            if code is None:
                code = new_items.get(item)
            if code is None:
                code = new_items[item] = len(acc.launch_codes) + len(new_items)
            new_raw[raw] = code
        out.append(code)
    return np.asarray(out, dtype=np.int64)[codes]


def _arrow_sizes(pa, pc, dims, rows: np.ndarray, name):
    """``name`` with ``", sizes = "`` and the canonical text of ``Input Dims`` (:func:`_sizes_text`)
    appended on the ``rows`` that have one, made from the columns: each shape's integers joined
    by ``", "`` in brackets, then the shapes likewise. A null inside a value (which the other
    paths refuse) sends the window to them."""
    has = rows & _valid(dims)
    if not has.any():
        return name
    at = np.flatnonzero(has)
    d = dims.take(pa.array(at))
    inner = d.flatten()  # one list per input
    if inner.null_count or inner.flatten().null_count:
        raise _NotForArrow("a null in Input Dims")
    # rows whose text would surely pass the cap (nvtx_text.too_long_shapes' lower bound: 2 + 2(n - 1)
    # for n inputs, max(2, 3k) per input of k integers) are dropped before any text is made
    k = np.asarray(pc.list_value_length(inner).to_numpy(zero_copy_only=False), dtype=np.int64)
    cs = np.concatenate(([0], np.cumsum(np.maximum(2, 3 * k))))
    offs = np.asarray(d.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    offs = offs - offs[0]
    n_in = np.diff(offs)
    low = 2 * n_in + (cs[offs[1:]] - cs[offs[:-1]])
    fits = low <= _SIZES_MAX
    if not fits.all():
        if not fits.any():
            return name
        at = at[fits]
        d = d.filter(pa.array(fits))
        inner = d.flatten()
    one = pc.binary_join(pc.cast(inner, pa.list_(pa.string())), ", ")
    one = pc.binary_join_element_wise("[", one, "]", "")
    outer = pa.ListArray.from_arrays(pc.subtract(d.offsets, d.offsets[0]), one)
    text = pc.binary_join_element_wise("[", pc.binary_join(outer, ", "), "]", "")
    keep = pc.less_equal(pc.utf8_length(text), _SIZES_MAX).to_numpy(zero_copy_only=False)
    if not keep.any():
        return name
    at = at[keep]
    full = pc.binary_join_element_wise(name.take(pa.array(at)), text.filter(pa.array(keep)), _SIZES_FIELD)
    mask = np.zeros(len(name), dtype=bool)
    mask[at] = True
    return pc.replace_with_mask(name, pa.array(mask), full)


def _arrow_chunk(t, acc: _Acc) -> None:  # noqa: C901 - one pass per column, kept together
    """:func:`_chunk` of a window read by pyarrow (:func:`_arrow_read`): the same rows, names,
    threads and launch codes, in the same order, from the columns (no Python object per event;
    Python only per distinct name, thread and launch configuration, and for the rare span,
    overhead and metadata events). ``acc`` (a window's own: :func:`_arrow_part`) is only changed
    at the end (new numbers are held apart until then); a window that raises here is read again,
    from scratch, by the msgspec path."""
    ar = _arrow()
    pa, pc = ar["pa"], ar["pc"]
    n = t.num_rows
    col = {name: t.column(name).combine_chunks() for name in t.column_names}
    args = col["args"]
    f = dict(zip((args.type.field(i).name for i in range(args.type.num_fields)), args.flatten()))
    # ---- kinds, from the distinct (ph, cat) pairs -----------------------------------------
    phc, phv = _first_codes(pc, col["ph"])
    catc, catv = _first_codes(pc, col["cat"])
    nc = len(catv)
    lut = np.array([(_X_KIND.get(c, _IGNORED) if p == "X" else _META if p == "M" else _KIND.get((p, c), _IGNORED))
                    for p in phv for c in catv], dtype=np.int8)
    kinds = lut[phc * nc + catc]
    if "i" in phv:  # [memory] instant events, whatever their category
        is_i = phc == phv.index("i")
        named_mem = pc.fill_null(pc.equal(col["name"], pa.scalar(MEMORY_EVENT)), False).to_numpy(zero_copy_only=False)
        kinds[is_i & named_mem] = K_MEM
    # ---- times ----------------------------------------------------------------------------
    s = _dec_ns(col["ts"])
    d = _dec_ns(col["dur"])
    ok = (s != BAD) & (d != BAD)
    e_ = np.where(ok, s + np.where(ok, d, 0), BAD)
    e_[(e_ != BAD) & ~((e_ > -_LIM) & (e_ < _LIM))] = BAD
    is_x = (kinds >= 0) & (kinds <= K_OVERHEAD)
    fid, fid_ok = _int_col(col["id"])
    fid = np.where(fid_ok & (fid > 0) & (fid < (1 << 32)), fid, 0)
    fstart = (kinds == _F_START) & (fid != 0) & (s != BAD)
    fend = (kinds == _F_END) & (fid != 0) & (s != BAD)
    # ---- threads, in event order: calls, host ranges, flow starts that bind -----------------
    pid, pid_ok = _int_col(col["pid"])
    pc_, pv = _first_codes(pc, col["pid"])
    tc_, tv = _first_codes(pc, col["tid"])  # ints, or text (traces before PyTorch 1.13)
    tid_stream = np.array([_stream_of(v) for v in tv], dtype=np.int64)[tc_]  # _stream_of(tid)
    need = np.flatnonzero(np.isin(kinds, _THREADED) | fstart)
    thr = np.full(n, -1, dtype=np.int64)
    new_threads: dict = {}
    if len(need):
        nt = len(tv)
        codes, pairs = factorize(pc_[need] * nt + tc_[need])
        thr[need] = _number(acc.threads, new_threads, [(pv[c // nt], tv[c % nt]) for c in pairs.tolist()])[codes]
    # ---- names, in event order (host ranges get their sequence number and stack frame) ------
    named = np.flatnonzero(np.isin(kinds, _NAMED))
    host = kinds == K_HOST
    dom_lut = np.array([_HOST_DOM.get(c, 0) if c.__class__ is str else 0 for c in catv], dtype=np.int8)
    dom = dom_lut[catc]
    name = col["name"]
    name_ok = _valid(name)
    op = host & (dom == _DOM_OP)
    seq, seq_ok = _int_col(f["Sequence number"])
    with_seq = op & seq_ok & (seq >= 0) & (seq < _LIM) & name_ok
    if with_seq.any():  # autograd's sequence number, kept in the text as emit_nvtx writes it
        seq_text = pc.if_else(pa.array(with_seq), pc.cast(f["Sequence number"], pa.string()), pa.scalar(None, pa.string()))
        name = pc.coalesce(pc.binary_join_element_wise(name, seq_text, ", seq = "), name)
    name = _arrow_sizes(pa, pc, f["Input Dims"], op & name_ok, name)
    stack = f["Call stack"]
    if stack.null_count < n:  # 2021 format: the innermost frame of the user's code
        has = op & name_ok & _valid(stack)
        has &= pc.fill_null(pc.binary_length(stack), 0).to_numpy() > 0
        at = np.flatnonzero(has)
        if len(at):
            idx = pa.array(at)
            texts = []
            for nm, cs in zip(name.take(idx).to_pylist(), stack.take(idx).to_pylist()):
                fr = _user_frame(cs)
                texts.append(f"{nm}, stack = {fr}" if fr else nm)
            mask = np.zeros(n, dtype=bool)
            mask[at] = True
            name = pc.replace_with_mask(name, pa.array(mask), pa.array(texts, type=pa.string()))
    nid = np.full(n, -1, dtype=np.int64)
    new_names: dict = {}
    if len(named):
        codes, distinct = _first_codes(pc, name.take(pa.array(named)))
        distinct = [F.UNKNOWN_NAME if v is None else v for v in distinct]
        nid[named] = _number(acc.names, new_names, distinct)[codes]
    # ---- GPU rows ---------------------------------------------------------------------------
    dev, dev_ok = _int_col(f["device"])  # missing: the event's pid; null: unknown (BAD)
    if not dev_ok[np.isin(kinds, _GPU_KINDS)].all():
        raise _NotForArrow("a GPU row's device is null or missing: pyarrow cannot tell which")
    dev = np.where((dev >= 0) & (dev < 65536), dev, BAD)
    stream, ok = _int_col(f["stream"])
    stream = np.where(ok & (stream >= -_I32) & (stream < _I32), stream, tid_stream)
    ctx, ok = _int_col(f["context"])
    ctx = np.where(ok & (ctx >= -_I32) & (ctx < _I32), ctx, 0)
    corr, ok = _int_col(f["correlation"])
    corr = np.where(ok & (corr > 0) & (corr < (1 << 32)), corr, 0)
    nbytes, ok = _int_col(f["bytes"])
    nbytes = np.where(ok & (nbytes >= 0) & (nbytes < _LIM), nbytes, 0)
    gpu_rows = {}
    new_raw: dict = {}
    new_items: dict = {}
    for kind in (K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC):
        rows = np.flatnonzero(kinds == kind)
        if not len(rows):
            continue
        row = {"s": s[rows], "e": e_[rows], "dev": dev[rows], "ctx": ctx[rows], "st": stream[rows],
               "corr": corr[rows], "name": nid[rows], "bytes": nbytes[rows]}
        if kind == K_KERNEL:
            row["launch"] = _arrow_launch(pa, pc, acc, rows, f, new_raw, new_items)
        gpu_rows[kind] = row
    rows = np.flatnonzero((kinds == K_RUNTIME) | (kinds == K_DRIVER))
    rt_row = {"s": s[rows], "e": e_[rows], "thr": thr[rows], "corr": corr[rows], "name": nid[rows],
              "drv": (kinds[rows] == K_DRIVER).astype(np.int8)} if len(rows) else None
    rows = np.flatnonzero(host)
    host_row = {"s": s[rows], "e": e_[rows], "thr": thr[rows], "name": nid[rows], "dom": dom[rows]} \
        if len(rows) else None
    rows = np.flatnonzero(fstart)
    fs_row = {"id": fid[rows], "thr": thr[rows], "ts": s[rows]}
    fdev = np.where(pid_ok & (pid >= 0) & (pid < 65536), pid, -1)  # _small_int(pid, 0, 65536, -1)
    rows = np.flatnonzero(fend & (fdev >= 0))
    fe_row = {"id": fid[rows], "dev": fdev[rows], "st": tid_stream[rows], "ts": s[rows]}
    # the rare rows kept as Python objects (read before anything is committed)
    spans = [(int(s[i]), int(e_[i])) for i in np.flatnonzero(kinds == K_SPAN).tolist() if s[i] != BAD and e_[i] != BAD]
    over = np.flatnonzero((kinds == K_OVERHEAD) & (s != BAD) & (e_ != BAD))
    over = [(int(s[i]), int(e_[i]), F.cap(str(nm or ""))) for i, nm in
            zip(over.tolist(), col["name"].take(pa.array(over, type=pa.int64())).to_pylist())]
    meta = np.flatnonzero((kinds == _META) & _valid(args))
    if len(meta):
        idx = pa.array(meta, type=pa.int64())
        meta = [{"name": nm, "pid": p, "tid": q, "args": {"name": label}} for nm, p, q, label in
                zip(*(c.take(idx).to_pylist() for c in (col["name"], col["pid"], col["tid"], f["name"])))]
    # ---- memory events ----------------------------------------------------------------------
    rows = np.flatnonzero(kinds == K_MEM)
    mem_row = None
    if len(rows):
        mem_row = {"s": s[rows], "thr": thr[rows]}
        for key, (arg, lo, hi, other) in _MEM_ARGS.items():
            v, ok = _int_col(f[arg])
            mem_row[key] = np.where(ok & (v >= lo) & (v < hi), v, other)[rows]
    # ---- commit -----------------------------------------------------------------------------
    acc.names.update(new_names)
    acc.threads.update(new_threads)
    acc.launch_codes.update(new_items)
    acc.launch_raw.update(new_raw)
    _commit_rows(acc, np.unique(kinds[is_x]), gpu_rows, rt_row, host_row, fs_row, fe_row)
    if mem_row is not None:
        for k, v in mem_row.items():
            _add(acc.mem[k], v)
    acc.spans.extend(spans)
    for o in over:
        if len(acc.overhead) < 100_000:
            acc.overhead.append(o)
    for ev in meta:
        _metadata_event(ev, acc)
    acc.events += n
    acc.ignored += int((kinds == _IGNORED).sum())


#: windows being read by pyarrow at once (on a worker thread, while this one reads others with
#: msgspec), and windows read but not yet merged into the accumulators, at most
ARROW_AHEAD = 2
_MAX_PENDING = 6


class _Window:
    """A window of events (:func:`_events`): its bytes as read (``raw``) and as decoded
    (``body``: the same unless not UTF-8), where it starts (``offset``, in characters), its
    length in characters with its ',' (``chars``), and its rows once read (``part``: an
    :class:`_Acc` of its own, numbered from 0; None: the slow path's) or being read by pyarrow
    (``future``)."""
    __slots__ = ("raw", "body", "offset", "chars", "first", "future", "part")

    def __init__(self, raw: bytes, body: bytes, offset: int, chars: int, first: bool) -> None:
        self.raw, self.body, self.offset, self.chars, self.first = raw, body, offset, chars, first
        self.future = self.part = None


def _msgspec_part(body: bytes) -> _Acc | None:
    """The rows of a window read by msgspec (:func:`_chunk`), or None (the slow path's)."""
    part = _Acc()
    try:
        _chunk(_decode_events(b"".join((b"[", body, b"]"))), part)
    except Exception:  # noqa: BLE001 - any surprise (RecursionError too): the slow path reads this window
        return None
    part.paths["msgspec"] += 1
    return part


def _arrow_part(body: bytes, got) -> _Acc | None:
    """The rows of a window read by pyarrow (``got``: :func:`_arrow_read`'s) made by
    :func:`_arrow_chunk` (on this thread: it holds the GIL much of the time, which would stall
    this thread's msgspec reading on the worker's), those of the events it left read by msgspec;
    None: not pyarrow's (the msgspec path's)."""
    if got is None:
        return None
    table, tid, end = got
    part = _Acc()
    try:
        _arrow_chunk(table, part)
        if end < len(body):  # the events from the first of another type on
            _chunk(_decode_events(b"".join((b"[", body[end + 1:], b"]"))), part)
            part.paths["msgspec"] += 1
    except Exception:  # noqa: BLE001 - the msgspec path reads this window
        return None
    part.paths["arrow"] += 1
    return part


def _merge(acc: _Acc, part: _Acc) -> None:
    """Append a window's rows (``part``, numbered from 0) to ``acc``: names, threads and launch
    configurations new to ``acc`` are numbered after its own in the order the window met them,
    which is the order the slow path, reading the events one by one, numbers them in."""
    def lut(known: dict, numbered: dict) -> np.ndarray:
        new: dict = {}
        out = _number(known, new, list(numbered))
        known.update(new)
        return out

    names, threads, launch = lut(acc.names, part.names), lut(acc.threads, part.threads), \
        lut(acc.launch_codes, part.launch_codes)
    acc.launch_raw.update(zip(part.launch_raw, launch[list(part.launch_raw.values())].tolist()))
    recode = {"name": names, "thr": threads, "launch": launch}
    for mine, theirs in [(acc.gpu[k], part.gpu[k]) for k in acc.gpu] + [(acc.rt, part.rt), (acc.host, part.host),
                                                                       (acc.flow_s, part.flow_s), (acc.flow_f, part.flow_f),
                                                                       (acc.mem, part.mem)]:
        for key, col in theirs.items():
            if len(col):
                if key in recode:
                    _add(mine[key], recode[key][np.frombuffer(col, dtype=col.typecode)])
                else:
                    mine[key].extend(col)
    acc.spans.extend(part.spans)
    acc.overhead.extend(part.overhead[:max(0, 100_000 - len(acc.overhead))])
    acc.proc_names.update(part.proc_names)
    acc.thread_names.update(part.thread_names)
    acc.kinds.update(part.kinds)
    acc.events += part.events
    acc.ignored += part.ignored
    for k, v in part.paths.items():
        acc.paths[k] += v


def _events(st: _Stream, acc: _Acc, progress=None) -> None:  # noqa: C901 - one loop, kept together
    """Parse ``traceEvents`` items (the '[' is consumed) into ``acc`` until the closing ']'.

    The file's bytes are cut into windows of about :data:`FAST_CHARS` bytes (the file's UTF-8,
    as :class:`_Stream` would decode it: read as bytes, never built as text), each after the
    last ``"},"`` in it. A cut anywhere but between two events makes that text invalid JSON (a
    newline is never inside a string, an unbalanced bracket never decodes). Each window is read
    by one of two column readers, both reading exactly what the slow path reads:

    * pyarrow's JSON reader (:func:`_arrow_text`, :func:`_arrow_read`, :func:`_arrow_chunk`),
      which parses on a worker thread, without the GIL, up to :data:`ARROW_AHEAD` windows at
      once, while this thread reads the next windows with
    * msgspec (:func:`_chunk`): one call into structs of the fields a row needs (:class:`_Ev`:
      unknown fields, such as a ``cpu_op``'s input shapes, are skipped without being built).

    A window pyarrow does not take goes to msgspec. Each window's rows are numbered on their own
    and merged in file order (:func:`_merge`). A window msgspec does not take either (it fails
    to decode, or holds a value :func:`_chunk` does not expect) is read by the slow path, after
    the windows before it are merged and from its first character, as are the events after the
    last cut; it gives every refusal."""
    if st.peek() == "]":
        st.pos += 1
        return
    first = True
    tick = time.monotonic() + 2.0
    data, pos = st.take_bytes(), 0  # the file's bytes from the first event on
    offset = st.offset  # characters before data[pos]
    pending: deque[_Window] = deque()  # read, or being read, not yet merged
    tid = ["int"]  # the type of the tids pyarrow last read

    def merge_ready(wait: bool = False) -> _Window | None:
        """Merge the pending windows that are read, in order (``wait``: all of them); the first
        one that is the slow path's is returned (with those after it), not merged."""
        while pending:
            w = pending[0]
            if w.future is not None:
                if not (wait or w.future.done()):
                    return None
                try:
                    got = w.future.result()
                except Exception:  # noqa: BLE001 - any surprise in pyarrow: the msgspec path reads it
                    got = None
                w.future = None
                if got is not None:
                    tid[0] = got[1]
                w.part = _arrow_part(w.body, got) or _msgspec_part(w.body)
            if w.part is None:
                return w
            pending.popleft()
            _merge(acc, w.part)
            w.part = w.raw = w.body = None
        return None

    def slow(w: _Window | None) -> bool:
        """Merge what is pending before ``w``, then read from ``w`` on (else from data[pos]) with
        the slow path up to ``w``'s end (else to the last event): True at the list's end."""
        nonlocal data, pos, offset, first
        if w is not None:  # what comes after w is cut and read again
            first = w.first
            rest = b",".join(x.raw for x in pending) + b"," + data[pos:]
            for x in pending:
                if x.future is not None:
                    x.future.cancel()
            pending.clear()
            st.offset = w.offset
            st.give_bytes(rest)
            stop = w.offset + w.chars
        else:
            st.offset = offset
            st.give_bytes(data[pos:])
            stop = st.offset + len(st.buf)
        acc.paths["slow"] += 1
        if _events_slow(st, acc, progress, stop=stop, first=first):
            return True  # (the stream is after the ']')
        first = False
        data, pos = st.take_bytes(), 0
        offset = st.offset
        return False

    pool = None
    try:
        while True:
            if len(data) - pos < FAST_CHARS:
                more = st.read_bytes(FAST_CHARS)
                if more:
                    data, pos = data[pos:] + more, 0
            cut = data.rfind(b"},\n", pos, pos + FAST_CHARS + 3)
            if cut < 0:
                cut = data.rfind(b"},\n", pos)
            if cut < 0:
                cut = data.rfind(b"},", pos)
            if cut < 0:  # the last events, or no line breaks or object ends in a whole window
                w = merge_ready(wait=True)
                if w is not None:
                    slow(w)  # (then the windows after it are cut again)
                elif slow(None):
                    return
                continue
            raw = body = data[pos:cut + 1]
            if body.isascii():
                chars = len(body) + 1  # the window and its ','
            else:  # decoders read the text as the slow path sees it (U+FFFD for what is not UTF-8)
                try:
                    chars = len(body.decode("utf-8")) + 1
                except UnicodeDecodeError:
                    text = body.decode("utf-8", "replace")
                    chars, body = len(text) + 1, text.encode("utf-8")
            w = _Window(raw, body, offset, chars, first)
            offset += chars
            pos = cut + 2
            if ARROW and len(body) <= 4 * FAST_CHARS and sum(x.future is not None for x in pending) < ARROW_AHEAD:
                # (a window that long has an event longer than FAST_CHARS: msgspec's, without the
                # guards' temporary arrays of its size)
                if pool is None:
                    from concurrent.futures import ThreadPoolExecutor
                    pool = ThreadPoolExecutor(1, thread_name_prefix="nsysdoc-kineto")
                w.future = pool.submit(_arrow_read, body, tid[0])
            else:
                w.part = _msgspec_part(body)
            pending.append(w)
            w = merge_ready(wait=len(pending) > _MAX_PENDING)
            if w is not None:
                slow(w)
            first = False
            if progress is not None and time.monotonic() > tick:
                progress(f"read {acc.events:,} trace events")
                tick = time.monotonic() + 2.0
    finally:
        for x in pending:
            if x.future is not None:
                x.future.cancel()
        if pool is not None:
            pool.shutdown(wait=True)
            _release_memory()


def _release_memory() -> None:
    """Give the windows' freed buffers back to the system: pyarrow's pool keeps what it freed,
    and glibc keeps the worker thread's freed memory in that thread's arena, where the rest of
    the report (on this thread) cannot reuse it: a report's peak memory would grow by ~50 MB."""
    from .store import _malloc_trim

    if _ARROW:
        _ARROW["pa"].default_memory_pool().release_unused()
    _malloc_trim()


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


def _mem_int(v, lo: int, hi: int, other: int) -> int:
    """A memory event's integer arg when it is an int in [lo, hi), else ``other``."""
    return v if v.__class__ is int and lo <= v < hi else other


def _memory_event(ev: dict, acc: _Acc) -> None:
    """One ``[memory]`` instant event (the slow path's, which defines the row the fast paths
    make: :func:`_memory_rows`)."""
    tkey = (ev.get("pid"), ev.get("tid"))
    threads = acc.threads
    try:
        ti = threads.get(tkey)
    except TypeError:  # an unhashable pid/tid: one thread for all such rows
        tkey = (repr(tkey[0])[:64], repr(tkey[1])[:64])
        ti = threads.get(tkey)
    if ti is None:
        ti = threads[tkey] = len(threads)
    a = ev.get("args")
    if a.__class__ is not dict:
        a = _EMPTY
    m = acc.mem
    m["s"].append(us_to_ns(ev.get("ts")))
    m["thr"].append(ti)
    m["dtype"].append(_mem_int(a.get("Device Type"), 0, 256, -1))
    m["dev"].append(_mem_int(a.get("Device Id"), -1, 65536, -2))
    m["bytes"].append(_mem_int(a.get("Bytes"), -_LIM + 1, _LIM, BAD))
    m["alloc"].append(_mem_int(a.get("Total Allocated"), 0, _LIM, -1))
    m["resv"].append(_mem_int(a.get("Total Reserved"), 0, _LIM, -1))
    m["addr"].append(_mem_int(a.get("Addr"), 0, _LIM, -1))


#: (arg name, lowest, highest + 1, value when not an int in range) of each memory column
_MEM_ARGS = {"dtype": ("Device Type", 0, 256, -1), "dev": ("Device Id", -1, 65536, -2),
             "bytes": ("Bytes", -_LIM + 1, _LIM, BAD), "alloc": ("Total Allocated", 0, _LIM, -1),
             "resv": ("Total Reserved", 0, _LIM, -1), "addr": ("Addr", 0, _LIM, -1)}


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
    """Every frame of :data:`nsysdoc.trace.tables.FRAME_COLUMNS`, plus the trace's metadata."""
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
    out["memory"], out["device_memory"] = _memory_frames(acc, t_gtid, times, props, drops)
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


#: why a timed ``[memory]`` event made no row
MEMORY_DROP_REASON = "Bytes missing, not an integer or beyond 2^62"


def _memory_frames(acc: _Acc, t_gtid: np.ndarray, times, props: dict, drops: F.Drops) -> tuple[Columns, Columns]:
    """The ``memory`` table (``[memory]`` events in time order; rows without a time or a byte
    count dropped) and ``device_memory`` (``deviceProperties[].totalGlobalMem`` per device id)."""
    m = acc.mem
    d = {"timestamp_ns": times(m["s"]), "device_type": _np(m["dtype"], np.int64),
         "device_id": _np(m["dev"], np.int64), "bytes": _np(m["bytes"], np.int64),
         "total_allocated_bytes": _np(m["alloc"], np.int64), "total_reserved_bytes": _np(m["resv"], np.int64),
         "global_tid": t_gtid[_np(m["thr"], np.int64)] if len(m["thr"]) else np.zeros(0, np.int64),
         "address": _np(m["addr"], np.int64)}
    timed = d["timestamp_ns"] != BAD
    ok = timed & (d["bytes"] != BAD)
    drops.add(MEMORY_EVENT, F.DROP_REASONS[0], int((~timed).sum()))
    drops.add(MEMORY_EVENT, MEMORY_DROP_REASON, int((timed & ~ok).sum()))
    if not ok.all():
        d = {k: v[ok] for k, v in d.items()}
    order = np.argsort(d["timestamp_ns"], kind="stable")
    mem = Columns({c: d[c][order] for c in F.FRAME_COLUMNS["memory"]})
    ids = sorted(i for i, p in props.items() if 0 <= i < 65536)
    total = [props[i].get("totalGlobalMem") for i in ids]
    keep = [j for j, v in enumerate(total) if v.__class__ is int and 0 < v < _LIM]
    dm = Columns({"device_id": np.array([ids[j] for j in keep], dtype=np.int64),
                  "total_bytes": np.array([total[j] for j in keep], dtype=np.int64)})
    return mem, dm


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
