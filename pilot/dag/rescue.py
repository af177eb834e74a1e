"""The rescue log: an append-only transaction log of ``DONE <task>`` records.

Durability: every record is one ``write()`` of a whole line on an O_APPEND
descriptor, so a SIGKILL of the master can neither tear nor lose a record that
was written (the kernel holds it). Power loss is covered by an fsync at most
once per ``fsync_interval`` seconds and at close.

On start the old log is read, then replaced atomically (temp file + rename) by
a compacted log holding its DONE records, so the log never grows across
restarts and a crash during the rewrite leaves the old log intact. With
``-s`` the old log is ignored and the new one starts empty.
"""

from __future__ import annotations

import os
import time
from typing import Iterable

from pilot.errors import DagError


def read_rescue(path: str, known: Iterable[str] | None = None) -> set[str]:
    """Return the names of tasks recorded DONE. Missing file means none."""
    known_set = known if known is None or isinstance(known, (set, dict)) else set(known)
    done: set[str] = set()
    try:
        fh = open(path, encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        return done
    except OSError as exc:
        raise DagError(path, None, f"cannot read rescue log: {exc.strerror}") from exc
    with fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.endswith("\n"):
                # Our writer emits whole lines in one write(); an unterminated
                # last line can only be a torn write (power loss, full disk).
                # Ignoring it reruns that task rather than trusting a fragment.
                break
            line = raw.strip()
            if not line or line[0] == "#":
                continue
            parts = line.split(None, 1)
            if len(parts) != 2 or parts[0] != "DONE":
                raise DagError(path, lineno, f"invalid rescue record {line!r}: expected 'DONE <task>' (use -s to ignore this log)")
            name = parts[1]
            if known_set is not None and name not in known_set:
                raise DagError(path, lineno, f"rescue log names unknown task {name!r}: it belongs to another DAG (use -s to ignore it, or -r to pick another log)")
            done.add(name)
    return done


class RescueLog:
    """Writer side of the rescue log."""

    def __init__(self, path: str, carried: Iterable[str] = (), fsync_interval: float = 1.0) -> None:
        self.path = path
        self.fsync_interval = fsync_interval
        tmp = f"{path}.tmp.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.writelines(f"DONE {name}\n" for name in carried)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        self._dirty = False
        self._last_sync = time.monotonic()

    def done(self, name: str) -> None:
        os.write(self._fd, f"DONE {name}\n".encode("utf-8", "surrogateescape"))
        self._dirty = True
        now = time.monotonic()
        if now - self._last_sync >= self.fsync_interval:
            self.sync(now)

    def sync(self, now: float | None = None) -> None:
        if self._dirty and self._fd >= 0:
            os.fsync(self._fd)
            self._dirty = False
        self._last_sync = time.monotonic() if now is None else now

    def close(self) -> None:
        if self._fd >= 0:
            self.sync()
            os.close(self._fd)
            self._fd = -1
