"""The rescue log ``<dag>.rescue``: an append-only transaction log of ``DONE <task>`` records.

Written by ``pilot run`` (``RescueLog``: one record as each task succeeds),
read whole at its next start (``read_rescue``: the tasks not to run again) and
followed by ``pilot submit`` as the run goes (``RescueTail``: tasks done).

Durability: every record is one ``write()`` of a whole line on an O_APPEND
descriptor, so a SIGKILL of the master can neither tear nor lose a record that
was written (the kernel holds it). Power loss is covered by an fsync at most
once per ``fsync_interval`` seconds and at close.

On start the old log is read, then replaced atomically (temp file, fsync,
rename, directory fsync) by a compacted log holding its DONE records, so the
log never grows across restarts and a crash during the rewrite leaves the old
log intact. With ``-s`` (the old log is ignored), or with nothing done yet,
the log is emptied in place instead (O_TRUNC: a crash leaves the old records
or none, never a part of them), made durable by the first fsync that follows
rather than by a file and a directory fsync before the first task starts. A
temp file that a killed run left behind (``<log>.tmp.<pid>`` of a process that
is gone) is removed at the next start; one that cannot be written (a full
disk) is removed at once.

pegasus-mpi-cluster writes each record as ``\\nDONE <task>``: its log starts
with a newline and its last record ends without one. Such a log is read
whole. In one of ours (records end with a newline) an unterminated last line
can only be a torn write and is ignored, so that task runs again.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable

from pilot.errors import DagError, OutOfSpace
from pilot.util.atomic import atomic_file
from pilot.util.safeopen import open_fd, open_regular_fd
from pilot.util.stdstreams import is_no_space
from pilot.util.tail import Tail

log = logging.getLogger("pilot.master")

RESCUE_SUFFIX = ".rescue"
_FIX = "check that the directory exists and is writable, or pick another path with -r"


def rescue_path(dag: str) -> str:
    """The rescue log of ``dag`` when ``pilot run -r`` names none (``pilot submit`` follows this one)."""
    return dag + RESCUE_SUFFIX


def done_record(line: str) -> str | None:
    """The task a ``DONE <task>`` record names; None for any other line."""
    parts = line.strip().split(None, 1)
    return parts[1] if len(parts) == 2 and parts[0] == "DONE" else None


def read_rescue(path: str, known: Iterable[str] | None = None) -> set[str]:
    """Return the names of tasks recorded DONE. Missing file means none."""
    known_set = known if known is None or isinstance(known, (set, dict)) else set(known)
    done: set[str] = set()
    try:
        fd = open_regular_fd(path)  # a FIFO: refused, not waited on
        fh = open(fd, encoding="utf-8", errors="surrogateescape")  # noqa: SIM115 - opened apart so that its errors are told apart; the with below closes it
    except FileNotFoundError:
        return done
    except OSError as exc:
        raise DagError(
            path, None, f"cannot read rescue log: {exc.strerror}; fix its permissions or use -s to ignore it"
        ) from exc
    with fh:
        pmc_style = False
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1:
                pmc_style = raw == "\n"
            if not raw.endswith("\n") and not pmc_style:
                # Our writer emits whole lines in one write(); an unterminated
                # last line can only be a torn write (power loss, full disk).
                # Ignoring it reruns that task rather than trusting a fragment.
                break
            line = raw.strip()
            if not line or line[0] == "#":
                continue
            name = done_record(line)
            if name is None:
                raise DagError(
                    path, lineno, f"invalid rescue record {line!r}: expected 'DONE <task>' (use -s to ignore this log)"
                )
            if known_set is not None and name not in known_set:
                raise DagError(
                    path,
                    lineno,
                    f"rescue log names unknown task {name!r}: it belongs to another DAG (use -s to ignore it, or -r to pick another log)",
                )
            done.add(name)
    return done


class RescueLog:
    """Writer side of the rescue log."""

    def __init__(self, path: str, carried: Iterable[str] = (), fsync_interval: float = 1.0) -> None:
        self.path = path
        self.fsync_interval = fsync_interval
        self.write_failed = False
        remove_stale_temps(path)
        carried = list(carried)
        try:
            if carried:
                with atomic_file(path, errors="surrogateescape") as fh:
                    fh.writelines(f"DONE {name}\n" for name in carried)
                self._fd = open_fd(path, os.O_WRONLY | os.O_APPEND)
            else:
                # Nothing to keep: emptying the log in place is one step a crash cannot
                # split, and the log's first fsync makes it durable. Never through a link (pilot.util.safeopen).
                self._fd = open_fd(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o666)
        except OSError as exc:
            if is_no_space(exc):  # the old log is intact (an atomic rewrite): room is all a rerun needs
                raise OutOfSpace(
                    f"{path}: cannot write the rescue log: {exc.strerror}; free space and rerun: the log "
                    "keeps what is done"
                ) from exc
            raise DagError(path, None, f"cannot write the rescue log: {exc.strerror or exc}; {_FIX}") from exc
        self._dirty = not carried  # an emptied log is synced like a new record
        self._last_sync = time.monotonic()

    def done(self, name: str) -> None:
        """Append one record. A failed write is reported once and the run goes on: those tasks rerun after a restart."""
        data = f"DONE {name}\n".encode("utf-8", "surrogateescape")
        try:
            written = os.write(self._fd, data)
            if written != len(data):  # a full disk: take the fragment back so later records stay whole lines
                os.ftruncate(self._fd, os.lseek(self._fd, 0, os.SEEK_END) - written)
                raise OSError(28, os.strerror(28))
        except OSError as exc:
            if not self.write_failed:
                self.write_failed = True
                log.error(
                    "cannot append to rescue log %s (%s): tasks that end from now on will run again after a restart",
                    self.path,
                    exc.strerror or exc,
                )
            return
        self._dirty = True
        now = time.monotonic()
        if now - self._last_sync >= self.fsync_interval:
            self.sync(now)

    def sync(self, now: float | None = None) -> None:
        if self._dirty and self._fd >= 0:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                log.error("cannot sync rescue log %s: %s", self.path, exc.strerror or exc)
            self._dirty = False
        self._last_sync = time.monotonic() if now is None else now

    def close(self) -> None:
        if self._fd >= 0:
            self.sync()
            os.close(self._fd)
            self._fd = -1


class RescueTail:
    """The tasks a running pilot records DONE, each read once (the log is followed as it grows)."""

    def __init__(self, dag: str) -> None:
        self._tail = Tail(rescue_path(dag))

    def done(self) -> tuple[bool, list[str]]:
        """(the log was replaced or emptied since the last call: count again from what follows, the tasks newly
        recorded DONE). A run that starts again compacts the log, so its records come back after a reset."""
        reset, lines = self._tail.lines()
        return reset, [name for name in map(done_record, lines) if name is not None]


def remove_stale_temps(path: str) -> None:
    """Remove ``<path>.tmp.<pid>`` files whose writer no longer runs on this host."""
    where, prefix = os.path.split(path)
    prefix += ".tmp."
    try:
        with os.scandir(where or ".") as entries:  # not glob: its pattern, a new one per log, costs a compile
            temps = [os.path.join(where, e.name) for e in entries if e.name.startswith(prefix)]
    except OSError:
        return
    for tmp in temps:
        pid = tmp.rsplit(".", 1)[1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # a live writer (a concurrent run with -n): leave it alone
        except ProcessLookupError:
            _unlink(tmp)
        except PermissionError:
            continue


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
