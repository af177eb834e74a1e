"""Where task stdout/stderr go, and the master's merge of per-worker files.

Default mode: each worker appends its tasks' output to ``DAG.out.<rank>`` and
``DAG.err.<rank>`` (the task writes straight into the file; no copy, no pipe),
so output of different workers never interleaves. At the end the master
appends every worker's file, rank by rank, to its stdout/stderr or to the
-o/-e files. The per-worker files are deleted only when the run succeeded;
after a failed or aborted run they stay for inspection (their content is
merged too, so nothing is lost either way), and ``DAG.merged`` records how
much of each was merged, so that the next run merges only what came after.
Whatever no record covers is merged whole, as pegasus-mpi-cluster merges
what it finds: the output of tasks that finished before a SIGKILL of the
whole job (which left no merge and no record), and a file put there by hand.
Files of ranks the run no longer has are merged too.

Per-task mode: ``<dagdir>/<task>.out.NNN`` and ``.err.NNN``, NNN the first
number not yet used, claimed with O_EXCL so concurrent workers and reruns
never share a file. A task id is not a path: ``/`` in it is written as
``%2F`` (and ``%`` as ``%25``), so ``../x`` or ``a/b`` stay inside the DAG's
directory and two ids never share a file name.
"""

from __future__ import annotations

import os
import sys
from typing import BinaryIO

from pilot.util.safeopen import open_fd, read_at_most

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
# Per-task stdout is also read back (is there a kickstart record already?), and
# stderr for the invocation record (--invocation-records).
_RW_FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
MAX_MERGED_BYTES = 1 << 20  # of <dag>.merged, a line per per-worker file


def worker_paths(dag: str, rank: int) -> tuple[str, str]:
    return f"{dag}.out.{rank}", f"{dag}.err.{rank}"


def open_append(path: str, readable: bool = False) -> int:
    """``readable``: the worker reads a task's stderr back for its invocation record."""
    return open_fd(path, _RW_FLAGS if readable else _FLAGS)


def file_name(task: str) -> str:
    """The task id as one file name component."""
    if "/" in task or "%" in task:
        return task.replace("%", "%25").replace("/", "%2F")
    return task


def open_task_stdio(dag: str, task: str, hint: int = 0) -> tuple[int, int, str, str]:
    """Open the first unused ``<task>.out.NNN``/``.err.NNN`` pair next to the DAG."""
    base = os.path.join(os.path.dirname(os.path.abspath(dag)), file_name(task))
    number = max(0, hint)
    while True:
        out = f"{base}.out.{number:03d}"
        try:
            out_fd = open_fd(out, _RW_FLAGS | os.O_EXCL)
        except FileExistsError:
            number += 1
            continue
        err = f"{base}.err.{number:03d}"
        try:
            err_fd = open_fd(err, _RW_FLAGS | os.O_EXCL)
        except FileExistsError:
            # A stray .err without .out: reuse it rather than skip the number.
            err_fd = open_fd(err, _RW_FLAGS)
        return out_fd, err_fd, out, err


def merged_path(dag: str) -> str:
    return dag + ".merged"


def merged_offsets(dag: str) -> dict[str, int]:
    """How much of each per-worker file an earlier run merged, read before this run writes to them: a
    recorded size is kept only while the file is at least that long (else it was replaced: merge it whole)."""
    try:
        lines = read_at_most(merged_path(dag), MAX_MERGED_BYTES).decode("utf-8", "replace").splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        size, _, path = line.partition(" ")
        try:
            if size.isdigit() and os.path.getsize(path) >= int(size):
                out[os.path.abspath(path)] = int(size)
        except OSError:
            pass
    return out


def _ranks_on_disk(dag: str) -> set[int]:
    """Ranks whose per-worker files exist (a run of more workers left them)."""
    folder = os.path.dirname(os.path.abspath(dag))
    prefix = os.path.basename(dag) + "."
    out: set[int] = set()
    try:
        names = os.listdir(folder)
    except OSError:
        return out
    for name in names:
        if name.startswith(prefix):
            kind, _, rank = name[len(prefix) :].partition(".")
            if kind in ("out", "err") and rank.isdigit():
                out.add(int(rank))
    return out


class MergeError(Exception):
    """A target of the merge could not be written (a full disk): its per-worker files are kept, none deleted."""

    def __init__(self, stream: str, error: OSError, kept: list[str]) -> None:
        super().__init__(f"task {stream}: {error.strerror or error}")
        self.stream = stream  # "stdout" or "stderr"
        self.error = error
        self.kept = kept


def merge_worker_files(
    dag: str,
    ranks: list[int],
    stdout: BinaryIO | None,
    stderr: BinaryIO | None,
    delete: bool,
    offsets: dict[str, int] | None = None,
) -> list[str]:
    """Append per-worker files to the targets (open files, None for our own stdout/stderr); return the files left on disk.

    The targets are opened by the caller before any task runs, so a bad -o/-e
    path is found at the start, not after the work is done; they are not closed here.
    ``offsets`` (``merged_offsets`` at the start of the run): the part of a kept file an earlier run merged;
    the rest is merged now. Kept files (``delete`` False) are recorded in ``DAG.merged`` as merged up to here.
    A per-worker file is deleted only once its target has taken all of it (flushed). A target that cannot be
    written (a full disk) keeps every file of its stream with the record an earlier run left, so the next run
    merges them again; the other stream is merged all the same, then MergeError says what was not.
    """
    offsets = offsets or {}
    kept: list[str] = []
    merged: list[tuple[int, str]] = []
    failed: MergeError | None = None
    ranks = sorted(set(ranks) | _ranks_on_disk(dag))
    for which, target in ((0, stdout), (1, stderr)):
        copied: list[tuple[int, str]] = []
        try:
            sink = _sink(which, target)
            for rank in ranks:
                path = worker_paths(dag, rank)[which]
                try:
                    with open(path, "rb") as src:
                        src.seek(offsets.get(os.path.abspath(path), 0))
                        # shutil.copyfileobj's loop, without importing shutil (and with it bz2 and
                        # lzma) at the end of every run, where the job waits on it: some 8 ms. 64 KiB at a
                        # time: a 1 MiB buffer was a third of a 20,000-task master's growth at its peak.
                        while chunk := src.read(1 << 16):
                            sink.write(chunk)
                        copied.append((src.tell(), path))
                except FileNotFoundError:
                    continue
            sink.flush()
        except OSError as exc:
            lost = [path for rank in ranks if os.path.exists(path := worker_paths(dag, rank)[which])]
            kept.extend(lost)
            merged.extend(
                (offsets[os.path.abspath(path)], os.path.abspath(path))
                for path in lost
                if os.path.abspath(path) in offsets
            )
            failed = failed or MergeError("stdout" if which == 0 else "stderr", exc, lost)
            continue
        for end, path in copied:
            if delete:
                os.unlink(path)
            else:
                kept.append(path)
                merged.append((end, os.path.abspath(path)))
    try:
        _record_merged(dag, merged)
    except OSError:
        if failed is None:
            raise
    if failed is not None:  # the target's error comes first: the record is lost to the same full disk
        raise failed
    return kept


def _sink(which: int, target: BinaryIO | None) -> BinaryIO:
    """Where stream ``which`` (0 stdout, 1 stderr) is merged: its -o/-e file, else the master's own stream."""
    if target is not None:
        return target
    stream = sys.stdout if which == 0 else sys.stderr
    stream.flush()
    return stream.buffer


def _record_merged(dag: str, merged: list[tuple[int, str]]) -> None:
    """``DAG.merged``: what this run merged of the files it keeps (none kept: no record)."""
    if not merged:
        try:
            os.unlink(merged_path(dag))
        except FileNotFoundError:
            pass
        return
    from pilot.util.atomic import write_atomic  # noqa: PLC0415 - only after a failed run

    write_atomic(merged_path(dag), "".join(f"{size} {path}\n" for size, path in merged))
