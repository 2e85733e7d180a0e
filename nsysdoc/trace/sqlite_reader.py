"""The SQLite reader's former single module, kept importable (issue 51): the reader is the package
:mod:`nsysdoc.trace.sqlite`, one module per concern (see its docstring). Every name this module
defined is re-exported from the module that now defines it.

To patch one of them in a test, patch the module that looks it up (``monkeypatch.setattr`` here
changes only this module's name): ``sqlite.chunks`` for ``_adbc_module`` and ``CHUNK_ROWS``,
``sqlite.load`` for ``_MIN_ROW_BYTES``, ``UNCOMPRESSED_MAX_BYTES``, ``_strings`` and ``publish``,
``sqlite.ingest`` for ``_NvtxReader``, ``sqlite.nvtx`` for ``_utf8_as_is``.
"""
from __future__ import annotations

from .sqlite.cells import _int, _strings, _text  # noqa: F401
from .sqlite.chunks import (  # noqa: F401
    _INT64_MAX, _MUST, CHUNK_ROWS, CHUNKS_IN_FLIGHT, _adbc_module, _bound, _ChunkReader, _fetch_arrow, _fetch_integers,
    _fetch_rows, _file_size, _fill, _is_type_error, _keyset_starts, _must, _pipelined, _pool, _query, _Ranges,
    _rowid_range, _rows_bound, _safe_expr, _sample_windows, _select_list, _table_ranges)
from .sqlite.clock import (ABSOLUTE_MIN_NS, _CLOCK_TABLES, _session_duration, _session_start,  # noqa: F401
                           _shift_times, timestamp_clock)
from .sqlite.codes import _Codes, _CorrIndex, _Grow, _TupleCodes  # noqa: F401
from .sqlite.ingest import _COLS_OF, _DROP_ORDER, _TABLE_OF, GPU_TABLES, _Ingest  # noqa: F401
from .sqlite.load import _MIN_ROW_BYTES, EVENT_TABLES, _expected_rows, load_export  # noqa: F401
from .sqlite.nvtx import _mostly_distinct, _NvtxReader, _per_row_facts, _utf8_as_is  # noqa: F401
from .sqlite.small import (_HOST_MEM_KINDS, GPU_METRICS_DROP_REASON, MEMORY_DROP_REASON, MEMORY_USAGE,  # noqa: F401
                           METRICS_CHUNK_ROWS, _device_memory, _devices_frame, _gpu_metrics, _memory_usage,
                           _small_tables, _thread_names)
