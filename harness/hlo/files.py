"""HLO files parsed once per process, however many analyses read them.

The pass timeline, the first-divergence ladder, the fingerprint and the cluster analysis all
read the same files (the baseline's per-pass dumps once for every variant compared with it);
`parse_cached` keys each parse by path, modification time and size, so a rewritten file is
parsed again and an unchanged one never is.
"""

from __future__ import annotations

import functools
from pathlib import Path

from harness.common import userfiles
from harness.hlo.parser import HloModule, parse_file


@functools.lru_cache(maxsize=128)
def _parsed(path: str, mtime_ns: int, size: int) -> HloModule:
    del mtime_ns, size  # part of the key
    return parse_file(path)


def parse_cached(path: Path | str) -> HloModule:
    """Returns the module in `path`, parsed once per process while the file is unchanged."""
    st = userfiles.stored(path).stat()  # the dump's file, kept compressed or not
    return _parsed(str(path), st.st_mtime_ns, st.st_size)
