"""``DAG.resource``: CSV ``<epoch>,<slots_free>,<cpus_free>,<memory_free_mb>,<host>``.

One line per host at registration and after every allocation and release, as
PMC writes it. Buffered (a line per task event would otherwise cost a write
syscall on the master's hot path) and flushed at most every second and at close.
"""

from __future__ import annotations

import time

from pilot.util.safeopen import open_file


class ResourceLog:
    def __init__(self, path: str, flush_interval: float = 1.0) -> None:
        self.path = path
        self._fh = open_file(path, "a", encoding="utf-8", buffering=1 << 16)
        self._flush_interval = flush_interval
        self._last = time.monotonic()

    def record(self, slots_free: int, cpus_free: int, memory_free: int, host: str) -> None:
        now = time.time()
        self._fh.write(f"{now:.6f},{slots_free},{cpus_free},{memory_free},{host}\n")
        mono = time.monotonic()
        if mono - self._last >= self._flush_interval:
            self._fh.flush()
            self._last = mono

    def flush(self) -> None:
        self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()
