"""What a path holds: the input formats' suffixes, magic bytes and sniffers, decided here only
(issue 51: it was decided in six places). Every entry point (``report``, ``diff``, ``job``, the
Python API, ``capture``) reaches a capture through :func:`input_kind`'s order:

1. a name ending ``.nsys-rep`` (or nsys's older ``.qdrep``; any case) is an Nsight Systems
   report: exported to SQLite first (:func:`is_report_name`);
2. a regular file that starts with SQLite's header is an nsys export (:func:`is_sqlite`);
3. a regular file that is gzip-compressed, starts with a JSON object or array, or is named
   ``*.json``/``*.json.gz`` goes to the PyTorch Profiler reader (:func:`routes_here`), which
   refuses what is not a trace in its own words;
4. anything else goes to the SQLite reader, which refuses it in its own words.

A saved report (``nsysdoc report -f json``, one side of ``diff``) is told from a capture by
:func:`is_saved_report_head`. Folders stand for the captures named by :data:`NSYS_INPUT_SUFFIXES`
and :func:`is_kineto_name`. Nothing here imports nsysdoc: the readers, the inputs and the
outputs all stand above it. Sniffers never raise, never load a whole file, never open a FIFO.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import stat
import zlib
from json import JSONDecodeError
from pathlib import Path

#: an Nsight Systems report, and the suffix nsys wrote before 2021.4 (the 2020.x guides say
#: ".qdrep", the 2021.4 guide says ".nsys-rep":
#: https://docs.nvidia.com/nsight-systems/2021.4/UserGuide); both accepted as input
REP_SUFFIX = ".nsys-rep"
OLD_REP_SUFFIX = ".qdrep"
REPORT_SUFFIXES = (REP_SUFFIX, OLD_REP_SUFFIX)
#: an nsys SQLite export
SQLITE_SUFFIX = ".sqlite"
#: the nsys files a folder stands for (issue 51: "capture" meant six things; an input file is an "input")
NSYS_INPUT_SUFFIXES = (REP_SUFFIX, SQLITE_SUFFIX)
#: PyTorch Profiler (Kineto) traces a folder stands for (``torch.profiler.tensorboard_trace_handler``
#: names); never nsysdoc's own ``*.nsysdoc.json`` reports or other JSON
KINETO_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
#: nsysdoc's own saved report beside a capture
SAVED_REPORT_SUFFIX = ".nsysdoc.json"
#: every suffix a capture's name may end with, the longer of two overlapping ones first: what is
#: left is the input's stem (:func:`input_stem`)
STEM_SUFFIXES = (REP_SUFFIX, OLD_REP_SUFFIX, SQLITE_SUFFIX, ".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json")

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
#: The most characters :func:`is_kineto_trace` looks at.
SNIFF_CHARS = 4 << 20

_WS = re.compile(r"[ \t\n\r]*")
_AFTER_KEY = re.compile(r"[ \t\n\r]*([,}])")
_COLON = re.compile(r"[ \t\n\r]*:[ \t\n\r]*")


def is_report_name(path: str | os.PathLike) -> bool:
    """An Nsight Systems report by its name (``.nsys-rep``, ``.qdrep``, any case)."""
    return Path(path).suffix.lower() in REPORT_SUFFIXES


def is_kineto_name(name: str) -> bool:
    """A PyTorch Profiler trace a folder stands for, by its name."""
    low = name.lower()
    return low.endswith(KINETO_SUFFIXES) and not low.endswith(SAVED_REPORT_SUFFIX)


def input_stem(path: str | os.PathLike) -> str:
    """A capture's name without its capture suffix (``rank3.pt.trace.json.gz`` -> ``rank3``)."""
    name = Path(path).name
    for suffix in STEM_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return Path(name).stem


def is_sqlite(path) -> bool:
    """A regular file that starts with SQLite's header (never opens a FIFO or a device)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except (OSError, ValueError):
        return False


def is_saved_report_head(path: str | os.PathLike, head: bytes) -> bool:
    """A saved nsysdoc report, given the file's first bytes (leading white space removed): named
    ``*.json`` or starting with ``{``, and not a PyTorch Profiler trace (JSON too, but a capture)."""
    return (Path(path).suffix.lower() == ".json" or head.startswith(b"{")) and not is_kineto_trace(path)


def input_kind(path, *, saved_report: bool = False) -> str:
    """What a capture path holds, in the order of the module docstring: ``"nsys-report"``,
    ``"sqlite"``, ``"kineto"`` or ``"other"`` (left to the SQLite reader's refusal). Every entry
    point asks here (issue 51): the pipeline (export a report first), the trace loader (which
    reader), one side of a diff (``saved_report=True``: a regular file holding a saved nsysdoc
    report is ``"saved-report"``, before anything else; reading its first bytes may raise OSError,
    for the caller to word)."""
    if saved_report and _is_regular(path) and is_saved_report_head(path, _first_bytes(path)):
        return "saved-report"
    if is_report_name(path):
        return "nsys-report"
    if is_sqlite(path):
        return "sqlite"
    if routes_here(path):
        return "kineto"
    return "other"


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


def _first_bytes(path, n: int = 64) -> bytes:
    """The first ``n`` bytes, leading white space removed (OSError is the caller's)."""
    with open(path, "rb") as fh:
        return fh.read(n).lstrip()


def _json_start(head: bytes) -> bool:
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    return text[:1] in (b"{", b"[")


def routes_here(path) -> bool:
    """Whether :func:`nsysdoc.trace.load_trace` should hand ``path`` to the PyTorch Profiler
    reader (:mod:`nsysdoc.trace.kineto`): a regular file
    that is gzip-compressed, starts with a JSON object or array, or is named ``*.json``/``*.json.gz``
    (so that a damaged one gets that reader's refusal, not "not SQLite"). Never true for SQLite,
    for missing or non-regular paths (the nsys path's checks refuse those), and never opens a FIFO."""
    if not _is_regular(path):
        return False
    head = _head(path)
    if head.startswith(SQLITE_MAGIC):
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
