"""Every file the master writes, opened or checked before the first task starts.

A run that can only fail at its end (task stdout to ``-o /nonexistent/x``, a
DAG directory the per-worker stdio files cannot be created in) would throw
away all the work its tasks did. So the master opens ``-o``/``-e`` and its
monitoring files, and checks that the DAG's directory is writable, while it
starts up; any problem is one line naming the path, exit status 2. A DAG fed
to a long-lived run has them checked before its first task and opened just
after it (``check_task_output``, pilot.util.latefile): creating them would
make each DAG of a fan fed at once wait for the creations of all before it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TypeVar

from pilot.errors import DagError
from pilot.runtime.options import RunOptions
from pilot.util.latefile import opened_late

T = TypeVar("T")


def opened(path: str, what: str, how: str, opener: Callable[[], T]) -> T:
    """``opener()``, with an OSError turned into the one-line error for ``path``."""
    try:
        return opener()
    except OSError as exc:
        raise DagError(path, None, f"cannot open {what}: {exc.strerror or exc}; {how}") from None


def check_dag_dir(opts: RunOptions) -> None:
    """Per-worker or per-task stdio, DAG.resource and DAG.result are written next to the DAG."""
    where = os.path.dirname(os.path.abspath(opts.dag))
    if not os.access(where, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids):
        raise DagError(
            opts.dag,
            None,
            f"cannot write next to the DAG: directory {where} is not writable (task stdio, DAG.resource and "
            "DAG.result go there); make it writable or copy the DAG to a writable directory",
        )


_TASK_OUTPUT = "create its directory or pick another path"  # how to mend a -o/-e that cannot be written


def check_task_output(opts: RunOptions) -> None:
    """The -o and -e files can be appended to, by what the file system says of them (nothing is created): a
    file that exists must be writable, a file that does not must have a writable directory to be created in."""
    if opts.per_task_stdio:
        return
    effective = os.access in os.supports_effective_ids
    for path, what in ((opts.stdout, "the task stdout file (-o)"), (opts.stderr, "the task stderr file (-e)")):
        if path is None:
            continue
        there = Path(path)
        why: str | None
        if there.is_dir():
            why = "it is a directory"
        elif there.exists():
            why = None if os.access(there, os.W_OK, effective_ids=effective) else "permission denied"
        elif not there.parent.is_dir():
            why = "its directory does not exist"
        else:
            why = None if os.access(there.parent, os.W_OK | os.X_OK, effective_ids=effective) else "permission denied"
        if why is not None:
            raise DagError(path, None, f"cannot open {what}: {why}; {_TASK_OUTPUT}")


def open_task_output(opts: RunOptions, late: bool = False) -> tuple[BinaryIO | None, BinaryIO | None]:
    """The -o and -e files (appended to), None for the master's own stdout/stderr. ``late``: checked now
    (``check_task_output``) and opened by ``open_if_late`` (pilot.util.latefile), after a fed DAG's first tasks."""
    if opts.per_task_stdio:
        return None, None  # every task writes its own files instead
    if late:
        check_task_output(opts)

    def one(path: str, what: str) -> BinaryIO:
        """One of them, kept open for the run (the run closes it)."""
        fh: BinaryIO = opened(path, what, _TASK_OUTPUT, lambda: opened_late(lambda: open(path, "ab"), late, path))  # noqa: SIM115 - the run closes it
        return fh

    out = err = None
    stdout, stderr = opts.stdout, opts.stderr
    if stdout is not None:
        out = one(stdout, "the task stdout file (-o)")
    if stderr is not None:
        if stderr == stdout:
            err = out
        else:
            try:
                err = one(stderr, "the task stderr file (-e)")
            except DagError:
                if out is not None:
                    out.close()
                raise
    return out, err
