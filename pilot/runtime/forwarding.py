"""Master side of I/O forwarding: append each task's data to its destination.

Destinations are opened in append mode and never truncated (a retry or a
rerun must not destroy earlier data) and kept open in an LRU cache bounded by
--maxfds, so 10,000 tasks writing to a few shared files cost a few opens.
All data of one task for one destination goes out in consecutive writes from
this single process, so it is never split or interleaved with another task's.
"""

from __future__ import annotations

import collections
import os
import resource


def default_maxfds() -> int:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        soft = 4096
    return max(1, min(soft // 2, 1024))


class FdCache:
    def __init__(self, maxfds: int | None = None) -> None:
        self.maxfds = maxfds or default_maxfds()
        self._fds: collections.OrderedDict[str, int] = collections.OrderedDict()
        self.hits = 0
        self.misses = 0

    def _fd(self, path: str) -> int:
        fd = self._fds.get(path)
        if fd is not None:
            self._fds.move_to_end(path)
            self.hits += 1
            return fd
        self.misses += 1
        while len(self._fds) >= self.maxfds:
            _, old = self._fds.popitem(last=False)
            os.close(old)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        self._fds[path] = fd
        return fd

    def write(self, path: str, data: bytes) -> None:
        """Append ``data`` to ``path``; raise OSError on any failure."""
        if not data:
            self._fd(path)
            return
        fd = self._fd(path)
        view = memoryview(data)
        try:
            while view:
                n = os.write(fd, view)
                view = view[n:]
        except OSError:
            self._fds.pop(path, None)
            os.close(fd)
            raise

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def close(self) -> None:
        while self._fds:
            _, fd = self._fds.popitem()
            os.close(fd)
