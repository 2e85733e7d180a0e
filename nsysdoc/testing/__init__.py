"""Tools for testing nsysdoc and team rules: a builder of nsys-shaped SQLite exports."""
from .builder import MS, US, Capture, GpuOp, Process, Thread, global_tid

__all__ = ["Capture", "Process", "Thread", "GpuOp", "global_tid", "US", "MS"]
