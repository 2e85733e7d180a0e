"""Issue 50: which captures keep their blocks (cache entry or ``--no-cache`` spill) uncompressed.

The loader writes lz4 blocks when the rows' estimate times ``UNCOMPRESSED_ROW_BYTES`` passes
``UNCOMPRESSED_MAX_BYTES`` (``trace/sqlite/load.py``). An lz4 block decodes 20-40x slower than an
uncompressed one is read, and the analysis reads each block several times: at 20 M kernels +
20 M CUDA API calls, 11.8 s of lz4 decoding against 2.5 s of file reads; the first report took
52 s against 70 s with lz4 blocks (2026-12-06).
"""
from __future__ import annotations

from nsysdoc import cache
from nsysdoc.trace import store


def test_20m_plus_20m_stays_uncompressed_50m_plus_50m_goes_lz4_inside_the_cap():
    """By hand: 20 M + 20 M rows x 48 B = 1,920,000,000 B <= 2 GiB = 2,147,483,648 B (uncompressed);
    50 M + 50 M rows x 48 B = 4,800,000,000 B > 2 GiB (lz4: about 2.6 GB on disk); and an
    uncompressed entry takes at most half the default cap (4,096 MB / 2 = 2,147,483,648 B)."""
    assert store.UNCOMPRESSED_ROW_BYTES == 48
    assert 40_000_000 * 48 <= store.UNCOMPRESSED_MAX_BYTES
    assert 100_000_000 * 48 > store.UNCOMPRESSED_MAX_BYTES
    assert store.UNCOMPRESSED_MAX_BYTES <= (cache.DEFAULT_MAX_MB << 20) // 2
