"""Keyed NumPy archives in a cache folder: written atomically with the key they were made
from, read back only through io.read_cache_file (the one reader), bounded before anything is
inflated, never unpickled, and a miss (None) unless the recorded key is the one asked for.
The inputs cache (harness.variants.expression) and the run's float64 references
(harness.capture.reference) keep their arrays this way; each checks its own arrays' shapes."""

from __future__ import annotations

import io as stdio
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from harness.common import userfiles
from harness.store import io

KEY = "key"  # the archive's entry holding the key it was made from


def write_keyed(cache: Path, name: str, key: str, arrays: Mapping[str, np.ndarray]) -> bool:
    """Keeps `arrays` as `cache/name` with `key`; False (nothing kept) when the cache refuses."""
    buffer = stdio.BytesIO()
    np.savez(buffer, **{KEY: np.array(key)}, **arrays)
    return io.write_cache_file(cache, name, buffer.getvalue())


def read_keyed(cache: Path, name: str, key: str) -> dict[str, np.ndarray] | None:
    """Returns the arrays of `cache/name` (its key entry left out), or None: absent, refused,
    unreadable, larger unpacked than io.CACHE_FILE_BYTES, or made from another key."""
    data = io.read_cache_file(cache, name)
    if data is None:
        return None
    try:  # bounded before inflating, never unpickled
        arrays = userfiles.parse_npz(data, str(cache / name), io.CACHE_FILE_BYTES)
    except userfiles.Unreadable:
        return None
    if KEY not in arrays or str(arrays[KEY]) != key:
        return None
    return {n: np.asarray(a) for n, a in arrays.items() if n != KEY}
