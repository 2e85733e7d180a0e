"""The SQLite reader: an nsys SQLite export into a :class:`~nsysdoc.trace.model.Trace`.

How (and why this way — measured in ``shared/reference/loading-performance.md`` and
``benchmarks/``):

* Only the needed integer columns are selected, never ``JOIN StringIds`` per row; names are
  mapped once per distinct string id.
* Big tables are **streamed**: read in rowid-range chunks through the ADBC SQLite driver straight
  into Arrow (about 5x faster and 3x less memory than ``pandas.read_sql``; two chunks in flight
  on two connections, the driver releases the GIL), checked, given their small ids, and appended
  to the capture's :class:`~nsysdoc.trace.store.Store` in blocks. No table is ever held whole:
  peak memory is a few chunks plus the per-row arrays the join needs while loading (see
  ``docs/loader.md``). Without ADBC the stdlib ``sqlite3`` cursor is used (slower, same result).
* The launch join (which runtime row launched each GPU row, by process and correlation id) is done
  while loading, with a direct-address table per process: GPU rows carry ``api`` (the runtime
  row's position) and ``api_start_ns``.
* The store's blocks are written as Arrow IPC record batches into the cache folder (never next to the
  input; keys, validation and the size cap are :mod:`nsysdoc.cache`'s), so a second report on the
  same capture skips SQLite and reads only the blocks each part of the analysis needs.

One module per concern (issue 51), each importing only those before it:

* :mod:`.chunks` — chunked SQL: the read-only connections, the ADBC/stdlib reads, rowid ranges;
* :mod:`.clock` — the session's duration and start, and the clock the timestamps count on;
* :mod:`.cells` — SQLite cells as Python values, and ``StringIds``;
* :mod:`.codes` — first-seen id codes and the launch correlation index;
* :mod:`.nvtx` — the NVTX reader;
* :mod:`.small` — devices, thread names, GPU metrics, memory, diagnostics;
* :mod:`.ingest` — the event tables streamed into the block store;
* :mod:`.load` — :func:`load_export`: the cache entry, else the ingest.
"""
from __future__ import annotations

from .chunks import CHUNK_ROWS, CHUNKS_IN_FLIGHT
from .clock import ABSOLUTE_MIN_NS, timestamp_clock
from .ingest import GPU_TABLES
from .load import EVENT_TABLES, load_export
from .small import GPU_METRICS_DROP_REASON, MEMORY_DROP_REASON, MEMORY_USAGE, METRICS_CHUNK_ROWS

__all__ = ["ABSOLUTE_MIN_NS", "CHUNKS_IN_FLIGHT", "CHUNK_ROWS", "EVENT_TABLES", "GPU_METRICS_DROP_REASON", "GPU_TABLES",
           "MEMORY_DROP_REASON", "MEMORY_USAGE", "METRICS_CHUNK_ROWS", "load_export", "timestamp_clock"]
