"""The top level of a Kineto trace: the metadata keys, and the ``traceEvents`` list handed on.

Walks the outer JSON object with the byte stream (:mod:`.stream`), decoding every key but
``traceEvents`` as a value (the trace's metadata: ``deviceProperties``, ``baseTimeNanoseconds``
...), and hands the events to the window scheduler (:mod:`.windows`). Tells a file that is not
JSON from JSON that is not a trace.
"""
from __future__ import annotations

from pathlib import Path

from .accumulate import _Acc
from .errors import NotATraceError, NotJsonError
from .stream import _COLON, _Stream, _open_bytes
from . import windows as _W

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
                _W._events(st, acc, progress)
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
