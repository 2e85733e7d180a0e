"""Read a PyTorch Profiler (Kineto) Chrome-trace JSON into a :class:`~nsysdoc.trace.model.Trace`.

The only package that knows the Kineto trace format (``docs/kineto.md``). It produces exactly the
frames and columns the SQLite reader produces (:data:`nsysdoc.trace.tables.FRAME_COLUMNS`), so every
metric, rule and report above it is the same for both inputs. One module per concern:

* :mod:`.load`: :func:`load_kineto`, the entry point (the cache, then parse and map);
* :mod:`.document`: the top-level object (metadata keys; ``traceEvents`` handed on), over
  :mod:`.stream`, the file's bytes (plain or gzip) read a chunk at a time;
* :mod:`.windows`: the window scheduler: ``traceEvents`` cut into windows of about 4 MB of bytes
  (never decoded to text), parsed ahead on a worker thread, merged in file order;
* :mod:`.engines`: the parser engines behind one interface and their fallback chain, written once:
  :mod:`.parse_arrow` (pyarrow's JSON reader: no Python object per event), then
  :mod:`.parse_msgspec` (structs of only the fields a row needs), then :mod:`.parse_slow` (one
  event at a time, :meth:`json.JSONDecoder.raw_decode`), which defines the behaviour: all give the
  same rows. The file is never held as Python objects (``benchmarks/bench_kineto.py`` measures
  it against ``json.load``);
* :mod:`.accumulate`: the columns the rows are gathered in, and the merging of windows;
* :mod:`.numbers`: ``ts``/``dur`` microseconds to integer nanoseconds exactly (Kineto writes
  ``"5203460419.456"`` since PyTorch 2.0, integers before; no binary float in between, other
  decimal forms rounded half-even);
* :mod:`.events`, :mod:`.names`: what an event's ``ph``/``cat`` and its name say;
* :mod:`.mapping`: the gathered columns onto the canonical tables, apart from the parsing: the
  SQLite reader's row checks (:func:`nsysdoc.trace.tables.validate`: rows no capture can hold are
  dropped and counted in ``dropped_rows``), and what Kineto never records (OS runtime calls, GPU
  metrics; synchronization records unless the trace has ``cuda_sync`` events) is
  ``traced[...] = False`` and listed in ``Trace.not_recorded``, so rules needing it are skipped
  with the reason;
* :mod:`.errors`: the refusals.

What a file holds is decided in :mod:`nsysdoc.formats` (the one resolver), re-exported here. The
names other modules and tests import from ``nsysdoc.trace.kineto`` are re-exported below.
"""
from __future__ import annotations

# what a file holds is decided in nsysdoc/formats.py (the one resolver); re-exported here
from ...formats import GZIP_MAGIC, SNIFF_CHARS, _head, _is_regular, is_kineto_trace, routes_here  # noqa: F401
from .accumulate import _Acc  # noqa: F401
from .document import _parse  # noqa: F401
from .errors import EmptyTraceError, NotATraceError, NotJsonError, TruncatedTraceError  # noqa: F401
from .events import (CATEGORIES, FLOW_CATEGORIES, HOST_DOMAIN, K_DRIVER, K_HOST, K_KERNEL,  # noqa: F401
                     K_MEM, K_MEMCPY, K_MEMSET, K_OVERHEAD, K_RUNTIME, K_SPAN, K_SYNC, MEMORY_EVENT,
                     NOT_RECORDED, TABLE_NAMES)
from .load import KINETO_FORMAT, SOURCE_TOOL, load_kineto  # noqa: F401
from .mapping import MEMORY_DROP_REASON, _fill_from_flows  # noqa: F401
from .names import COPY_KINDS, MEM_KINDS, short_kernel_name  # noqa: F401
from .numbers import BAD, us_to_ns  # noqa: F401
from .parse_arrow import _arrow_part, _arrow_read, _arrow_text  # noqa: F401
from .parse_msgspec import _dims_texts, _numbered, _thread_numbers  # noqa: F401
from .stream import CHUNK_CHARS, MAX_VALUE_CHARS  # noqa: F401
from .windows import ARROW, ARROW_AHEAD, FAST_CHARS  # noqa: F401
