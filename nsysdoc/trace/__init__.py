"""Trace loading: the only layer that knows the nsys SQLite schema."""
from ..cache import default_cache_dir
from .loader import load_trace
from .model import StringTable, Trace
from .open import ExportFile, open_export

__all__ = ["load_trace", "open_export", "ExportFile", "Trace", "StringTable", "default_cache_dir"]
