"""``DAG.resource``: CSV ``<epoch>,<slots_free>,<cpus_free>,<memory_free_mb>,<host>``.

One line per host at registration and after every allocation and release, as
PMC writes it. Buffered (a line per task event would otherwise cost a write
syscall on the master's hot path) and flushed at most every second and at close.
A write that fails (a full disk) is said once to ``on_error``; the log is
incomplete from there on, and the run goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pilot.util.latefile import open_if_late, opened_late
from pilot.util.safeopen import open_file


class ResourceLog:
    def __init__(
        self,
        path: str,
        flush_interval: float = 1.0,
        on_error: Callable[[str, OSError], None] | None = None,
        late: bool = False,
    ) -> None:
        """``late``: opened by ``open_late`` (pilot.util.latefile), what is written before kept."""
        self.path = path
        self._fh = opened_late(lambda: open_file(path, "a", encoding="utf-8", buffering=1 << 16), late)
        self._flush_interval = flush_interval
        self._last = time.monotonic()
        self.on_error = on_error
        self.failed = False

    def open_late(self) -> None:
        open_if_late(self._fh)

    def record(self, slots_free: int, cpus_free: int, memory_free: int, host: str) -> None:
        if self.failed:
            return
        now = time.time()
        try:
            self._fh.write(f"{now:.6f},{slots_free},{cpus_free},{memory_free},{host}\n")
            mono = time.monotonic()
            if mono - self._last >= self._flush_interval:
                self._fh.flush()
                self._last = mono
        except OSError as exc:
            self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        self.failed = True
        if self.on_error is None:
            raise exc
        self.on_error(self.path, exc)

    def flush(self) -> None:
        if self.failed:
            return
        try:
            self._fh.flush()
        except OSError as exc:
            self._failed(exc)

    def close(self) -> None:
        if self._fh.closed:
            return
        try:
            self._fh.close()  # closes the descriptor even where the last flush fails
        except OSError as exc:
            if not self.failed:
                self._failed(exc)
