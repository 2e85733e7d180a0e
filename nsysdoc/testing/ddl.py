"""DDL of the nsys export tables the fixture builder writes, per schema variant.

Column lists follow the NVIDIA "SQLite Schema Reference" and real exports in
``shared/traces`` (2022.4 / schema 3.0.0 up to 2026.2 / schema 3.25.0). Only the tables and
columns nsysdoc reads (plus a few that identify the file) are written; the real exporter writes
many more, which readers must ignore anyway.

Variants:

* ``"2026"`` — nsys 2026.2 / schema 3.25: ``greenContextId``, ``mangledName``,
  ``deprecatedSyncType`` + ``syncType``, ``META_DATA_EXPORT``, ENUM tables.
* ``"2024"`` — nsys 2024.2 / schema 3.11: ``greenContextId``, ``mangledName``, ``syncType``.
* ``"2022"`` — nsys 2022.4 / schema 3.0: ``EXPORT_META_DATA`` instead of ``META_DATA_EXPORT``,
  no ENUM tables, no ``greenContextId``/``mangledName``, NVTX text inline only.
"""
from __future__ import annotations

VARIANTS = ("2026", "2024", "2022")

VERSIONS = {
    "2026": ("2026.2.1.210", "3.25.0"),
    "2024": ("2024.2.1.106", "3.11.1"),
    "2022": ("2022.4.2.1", "3.0.0"),
}


def _gpu_head(variant: str) -> list[tuple[str, str]]:
    """Columns every GPU activity table starts with (greenContextId since schema 3.11)."""
    cols = [
        ("start", "INTEGER NOT NULL"),
        ("end", "INTEGER NOT NULL"),
        ("deviceId", "INTEGER NOT NULL"),
        ("contextId", "INTEGER NOT NULL"),
    ]
    if variant != "2022":
        cols.append(("greenContextId", "INTEGER"))
    return cols


def kernel_columns(variant: str) -> list[tuple[str, str]]:
    cols = _gpu_head(variant)
    cols += [
        ("streamId", "INTEGER NOT NULL"),
        ("correlationId", "INTEGER"),
        ("globalPid", "INTEGER"),
        ("demangledName", "INTEGER NOT NULL"),
        ("shortName", "INTEGER NOT NULL"),
    ]
    if variant != "2022":
        cols.append(("mangledName", "INTEGER"))
    cols += [
        ("launchType", "INTEGER"),
        ("cacheConfig", "INTEGER"),
        ("registersPerThread", "INTEGER NOT NULL"),
        ("gridX", "INTEGER NOT NULL"),
        ("gridY", "INTEGER NOT NULL"),
        ("gridZ", "INTEGER NOT NULL"),
        ("blockX", "INTEGER NOT NULL"),
        ("blockY", "INTEGER NOT NULL"),
        ("blockZ", "INTEGER NOT NULL"),
        ("staticSharedMemory", "INTEGER NOT NULL"),
        ("dynamicSharedMemory", "INTEGER NOT NULL"),
        ("localMemoryPerThread", "INTEGER NOT NULL"),
        ("localMemoryTotal", "INTEGER NOT NULL"),
        ("gridId", "INTEGER NOT NULL"),
        ("sharedMemoryExecuted", "INTEGER"),
        ("graphNodeId", "INTEGER"),
        ("sharedMemoryLimitConfig", "INTEGER"),
    ]
    return cols


def memcpy_columns(variant: str) -> list[tuple[str, str]]:
    cols = _gpu_head(variant)
    cols += [
        ("streamId", "INTEGER NOT NULL"),
        ("correlationId", "INTEGER"),
        ("globalPid", "INTEGER"),
        ("bytes", "INTEGER NOT NULL"),
        ("copyKind", "INTEGER NOT NULL"),
        ("deprecatedSrcId", "INTEGER"),
        ("srcKind", "INTEGER"),
        ("dstKind", "INTEGER"),
        ("srcDeviceId", "INTEGER"),
        ("srcContextId", "INTEGER"),
        ("dstDeviceId", "INTEGER"),
        ("dstContextId", "INTEGER"),
        ("migrationCause", "INTEGER"),
        ("graphNodeId", "INTEGER"),
        ("virtualAddress", "INTEGER"),
    ]
    return cols


def memset_columns(variant: str) -> list[tuple[str, str]]:
    cols = _gpu_head(variant)
    cols += [
        ("streamId", "INTEGER NOT NULL"),
        ("correlationId", "INTEGER"),
        ("globalPid", "INTEGER"),
        ("value", "INTEGER NOT NULL"),
        ("bytes", "INTEGER NOT NULL"),
        ("graphNodeId", "INTEGER"),
        ("memKind", "INTEGER"),
    ]
    return cols


def sync_columns(variant: str) -> list[tuple[str, str]]:
    cols = _gpu_head(variant)
    cols += [
        ("streamId", "INTEGER NOT NULL"),
        ("correlationId", "INTEGER"),
        ("globalPid", "INTEGER"),
    ]
    if variant == "2026":
        cols.append(("deprecatedSyncType", "INTEGER"))
    cols += [("syncType", "INTEGER NOT NULL"), ("eventId", "INTEGER NOT NULL")]
    return cols


RUNTIME_COLUMNS = [
    ("start", "INTEGER NOT NULL"),
    ("end", "INTEGER NOT NULL"),
    ("eventClass", "INTEGER NOT NULL"),
    ("globalTid", "INTEGER"),
    ("correlationId", "INTEGER"),
    ("nameId", "INTEGER NOT NULL"),
    ("returnValue", "INTEGER NOT NULL"),
    ("callchainId", "INTEGER"),
]

#: CUDA_CALLCHAINS (--cudabacktrace): one row per frame, stackDepth 0 the innermost
CUDA_CALLCHAINS_COLUMNS = [
    ("id", "INTEGER NOT NULL"),
    ("symbol", "INTEGER NOT NULL"),
    ("module", "INTEGER NOT NULL"),
    ("unresolved", "INTEGER"),
    ("originalIP", "INTEGER"),
    ("stackDepth", "INTEGER NOT NULL"),
]

OSRT_COLUMNS = [
    ("start", "INTEGER NOT NULL"),
    ("end", "INTEGER NOT NULL"),
    ("eventClass", "INTEGER NOT NULL"),
    ("globalTid", "INTEGER"),
    ("nameId", "INTEGER NOT NULL"),
    ("returnValue", "INTEGER NOT NULL"),
    ("nestingLevel", "INTEGER"),
    ("callchainId", "INTEGER NOT NULL"),
]


def nvtx_columns(variant: str) -> list[tuple[str, str]]:
    cols = [
        ("start", "INTEGER NOT NULL"),
        ("end", "INTEGER"),
        ("eventType", "INTEGER NOT NULL"),
        ("rangeId", "INTEGER"),
        ("category", "INTEGER"),
        ("color", "INTEGER"),
        ("text", "TEXT"),
        ("globalTid", "INTEGER"),
        ("endGlobalTid", "INTEGER"),
        ("textId", "INTEGER"),
        ("domainId", "INTEGER"),
        ("uint64Value", "INTEGER"),
        ("int64Value", "INTEGER"),
        ("doubleValue", "REAL"),
        ("uint32Value", "INTEGER"),
        ("int32Value", "INTEGER"),
        ("floatValue", "REAL"),
        ("jsonTextId", "INTEGER"),
        ("jsonText", "TEXT"),
    ]
    if variant == "2026":
        cols.append(("binaryData", "TEXT"))
    return cols


OTHER_TABLES = {
    "StringIds": [("id", "INTEGER NOT NULL PRIMARY KEY"), ("value", "TEXT NOT NULL")],
    "ThreadNames": [("nameId", "INTEGER NOT NULL"), ("priority", "INTEGER"), ("globalTid", "INTEGER")],
    "PROCESSES": [("globalPid", "INTEGER"), ("pid", "INTEGER"), ("name", "TEXT")],
    "ANALYSIS_DETAILS": [
        ("globalVid", "INTEGER NOT NULL"),
        ("duration", "INTEGER NOT NULL"),
        ("startTime", "INTEGER NOT NULL"),
        ("stopTime", "INTEGER NOT NULL"),
    ],
    "TARGET_INFO_GPU": [
        ("vmId", "INTEGER NOT NULL"),
        ("id", "INTEGER NOT NULL"),
        ("name", "TEXT"),
        ("busLocation", "TEXT"),
        ("totalMemory", "INTEGER"),
        ("memoryBandwidth", "INTEGER"),
        ("smCount", "INTEGER"),
        ("computeMajor", "INTEGER"),
        ("computeMinor", "INTEGER"),
        ("cuDevice", "INTEGER"),
    ],
    "TARGET_INFO_SESSION_START_TIME": [
        ("utcEpochNs", "INTEGER"),
        ("utcTime", "TEXT"),
        ("localTime", "TEXT"),
    ],
    "DIAGNOSTIC_EVENT": [
        ("timestamp", "INTEGER NOT NULL"),
        ("timestampType", "INTEGER NOT NULL"),
        ("source", "INTEGER NOT NULL"),
        ("severity", "INTEGER NOT NULL"),
        ("text", "TEXT NOT NULL"),
        ("globalPid", "INTEGER"),
    ],
    "PROFILER_OVERHEAD": [
        ("start", "INTEGER NOT NULL"),
        ("end", "INTEGER NOT NULL"),
        ("globalTid", "INTEGER"),
        ("nameId", "INTEGER NOT NULL"),
        ("returnValue", "INTEGER NOT NULL"),
    ],
    "TARGET_INFO_GPU_METRICS": [
        ("typeId", "INTEGER NOT NULL"),
        ("sourceId", "INTEGER NOT NULL"),
        ("typeName", "TEXT NOT NULL"),
        ("metricId", "INTEGER NOT NULL"),
        ("metricName", "TEXT NOT NULL"),
    ],
    "GPU_METRICS": [
        ("timestamp", "INTEGER"),
        ("typeId", "INTEGER NOT NULL"),
        ("metricId", "INTEGER NOT NULL"),
        ("value", "INTEGER NOT NULL"),
    ],
}

META_TABLE = {"2026": "META_DATA_EXPORT", "2024": "META_DATA_EXPORT", "2022": "EXPORT_META_DATA"}

ENUM_TABLES = {
    "ENUM_CUDA_MEMCPY_OPER": [
        (0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"),
        (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
        (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"),
        (3, "CUDA_MEMCPY_KIND_HTOA", "Host-to-Array"),
        (4, "CUDA_MEMCPY_KIND_ATOH", "Array-to-Host"),
        (5, "CUDA_MEMCPY_KIND_ATOA", "Array-to-Array"),
        (6, "CUDA_MEMCPY_KIND_ATOD", "Array-to-Device"),
        (7, "CUDA_MEMCPY_KIND_DTOA", "Device-to-Array"),
        (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"),
        (9, "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"),
        (10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"),
    ],
    "ENUM_CUDA_MEM_KIND": [
        (0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"),
        (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
        (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"),
        (3, "CUDA_MEMOPR_MEMORY_KIND_ARRAY", "Array"),
        (4, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed"),
        (5, "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC", "Device Static"),
        (6, "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC", "Managed Static"),
        (7, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown"),
    ],
    "ENUM_NSYS_EVENT_TYPE": [
        (33, "NvtxCategory", "NvtxCategory"),
        (34, "NvtxMark", "NvtxMark"),
        (59, "NvtxPushPopRange", "NvtxPushPopRange"),
        (60, "NvtxStartEndRange", "NvtxStartEndRange"),
        (75, "NvtxDomainCreate", "NvtxDomainCreate"),
    ],
    "ENUM_DIAGNOSTIC_SEVERITY_LEVEL": [(1, "Info", "Info"), (2, "Warning", "Warning"), (3, "Error", "Error")],
}


#: issue 47: ``--cuda-memory-usage=true``'s allocation and release rows (the columns the
#: Nsight Systems export schema documents; ``memoryOperationType``: 0 allocation, 1 deallocation)
MEMORY_USAGE_COLUMNS = [
    ("start", "INTEGER NOT NULL"), ("globalPid", "INTEGER"), ("deviceId", "INTEGER"), ("contextId", "INTEGER"),
    ("address", "INTEGER"), ("pc", "INTEGER"), ("bytes", "INTEGER"), ("memKind", "INTEGER"),
    ("memoryOperationType", "INTEGER"), ("name", "TEXT"), ("correlationId", "INTEGER"), ("streamId", "INTEGER"),
    ("localMemoryPoolAddress", "INTEGER"), ("localMemoryPoolReleaseThreshold", "INTEGER"),
    ("localMemoryPoolSize", "INTEGER"), ("localMemoryPoolUtilizedSize", "INTEGER"),
    ("importedMemoryPoolAddress", "INTEGER"), ("importedMemoryPoolProcessId", "INTEGER"),
]


def target_info_gpu_columns(variant: str) -> list[tuple[str, str]]:
    """TARGET_INFO_GPU; the per-SM limits (real exports have them since nsys 2022.4) are left out
    of the "2022" variant so that their absence is exercised too."""
    cols = list(OTHER_TABLES["TARGET_INFO_GPU"])
    if variant != "2022":
        cols += [("threadsPerWarp", "INTEGER"), ("maxWarpsPerSm", "INTEGER"), ("maxBlocksPerSm", "INTEGER"),
                 ("maxRegistersPerSm", "INTEGER"), ("maxShmemPerSm", "INTEGER"), ("maxShmemPerBlockOptin", "INTEGER"),
                 ("maxThreadsPerBlock", "INTEGER")]
    return cols


def create_sql(table: str, columns: list[tuple[str, str]]) -> str:
    body = ",\n    ".join(f'"{name}" {decl}' for name, decl in columns)
    return f"CREATE TABLE {table} (\n    {body}\n);"
