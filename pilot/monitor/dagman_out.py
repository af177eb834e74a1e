"""``DAG.dagman.out`` (--monitord-hack): DAGMan-style lines pegasus-monitord and pegasus-status follow.

The lines are those PMC's --monitord-hack writes (the start banner, ``Parsing``,
per node ``Submitting``, ULOG_SUBMIT/EXECUTE/JOB_TERMINATED events, ``completed
successfully`` or ``failed with status N``, the ``EXITING WITH STATUS`` line),
plus what DAGMan writes and PMC does not: exit codes rather than wait
statuses, ``failed with signal N`` for a signal, and ``DAG status`` blocks,
which are the only thing pegasus-status reads. It reads only the last block,
so between flushes a block is added at most once a second; every flush writes
the latest counts, and the final counts always come before the EXITING line.

Stamps are local ``MM/DD/YY HH:MM:SS``. monitord reads a task's ``.out.NNN``
when it sees the node's completed/failed line, so the master writes that line
only after the worker closed the files. The file is appended to, never
truncated, so monitord sees a rerun as DAGMan's restart. Buffered, and flushed
at every exit path and by its owner: ``pilot run``'s master every 0.5 s
(monitord polls once a second), ``pilot submit`` after each event of the root
workflow; in between, the writer flushes itself once ``flush_interval`` (1 s)
has passed since its last flush.

The same writer makes a submit directory's root dagman.out (pilot.monitor.root),
where the nodes are clusters: there the submission, start and end of a batch
job are separate events, and DAGMan's POST script, retry and abort lines and
the Pre/Post columns of the status block are used too.
"""

from __future__ import annotations

import os
import time

from pilot.dag.model import Task
from pilot.monitor.events import RunEvents
from pilot.util.latefile import open_if_late, opened_late
from pilot.util.safeopen import open_file

_HEADER = " Done     Pre   Queued    Post   Ready   Un-Ready   Failed"
_RULE = "  ===     ===      ===     ===     ===        ===      ==="


class DagmanOut(RunEvents):
    def __init__(self, path: str, dag_path: str, flush_interval: float = 1.0, late: bool = False) -> None:
        """``late``: opened by ``open_late`` (pilot.util.latefile), what is written before kept."""
        self.path = path
        self.dag_name = os.path.basename(dag_path)
        self._fh = opened_late(
            lambda: open_file(path, "a", encoding="utf-8", errors="surrogateescape", buffering=1 << 16), late
        )
        self._interval = flush_interval
        self._last_flush = time.monotonic()
        self._second = -1
        self._stamp = ""
        self._total = 0
        self._written: tuple[int, ...] | None = None
        self._pending: tuple[int, ...] | None = None
        self._block_at = 0.0
        self.pid = os.getpid()

    def open_late(self) -> None:
        open_if_late(self._fh)

    def _now(self) -> str:
        second = int(time.time())
        if second != self._second:
            self._second = second
            self._stamp = time.strftime("%m/%d/%y %H:%M:%S", time.localtime(second))
        return self._stamp

    def _write(self, *lines: str) -> None:
        stamp = self._now()
        self._fh.write("".join(f"{stamp} {line}\n" for line in lines))
        now = time.monotonic()
        if now - self._last_flush >= self._interval:
            self._fh.flush()
            self._last_flush = now

    def run_started(self, dag_path: str, total: int, workers: int) -> None:  # noqa: ARG002 - the run observer's signature
        self.header(total)

    # -- node-level lines, shared with the submit directory's root dagman.out ----
    def header(self, total: int, pid: int | None = None) -> None:
        """DAGMan's start banner; a restarted driver writes it again, as a restarted DAGMan does."""
        self._total = total
        self._write(
            "This is a DAGMan-style log written by pilot for pegasus-monitord",
            "******************************************************",
            "** condor_scheduniv_exec.0.0 (CONDOR_DAGMAN) STARTING UP",
            f"** PID = {pid or self.pid}",
            "******************************************************",
            f"Parsing {self.dag_name} ...",
        )
        self.flush()

    def submitted(self, node: str, seq: str) -> None:
        self._write(
            f"Submitting HTCondor Node {node} job(s)...",
            f"Event: ULOG_SUBMIT for HTCondor Node {node} ({seq}.0) {{{self._now()}}}",
        )

    def executing(self, node: str, seq: str) -> None:
        self._write(f"Event: ULOG_EXECUTE for HTCondor Node {node} ({seq}.0) {{{self._now()}}}")

    def terminated(self, node: str, seq: str, status: int) -> None:
        """The job's end: ``status`` is the exit code, or minus the signal number."""
        self._write(
            f"Event: ULOG_JOB_TERMINATED for HTCondor Node {node} ({seq}.0) {{{self._now()}}}",
            _outcome(f"Node {node} job proc ({seq}.0)", status),
        )

    def post_script(self, node: str, seq: str, status: int) -> None:
        """A POST script's run and outcome, as DAGMan logs it."""
        self._write(
            f"Running POST script of Node {node}...",
            f"Event: ULOG_POST_SCRIPT_TERMINATED for HTCondor Node {node} ({seq}.0) {{{self._now()}}}",
            _outcome(f"POST Script of Node {node}", status),
        )

    def aborted(self, node: str, seq: str) -> None:
        self._write(f"Event: ULOG_JOB_ABORTED for HTCondor Node {node} ({seq}.0) {{{self._now()}}}")

    def retrying(self, node: str, retry: int, limit: int) -> None:
        self._write(f"Retrying node {node} (retry #{retry} of {limit})...")

    # -- per-DAG (pilot run --monitord-hack): each task is a node ---------------
    def task_queued(self, task: Task, seq: int) -> None:
        self.submitted(task.name, f"{seq}.0")

    def task_dispatched(self, task: Task, seq: int, rank: int, hostname: str) -> None:  # noqa: ARG002 - the run observer's signature
        self.executing(task.name, f"{seq}.0")

    def task_ended(self, task: Task, seq: int, status: int, will_retry: bool) -> None:  # noqa: ARG002 - the run observer's signature
        self.terminated(task.name, f"{seq}.0", status)

    def status(self, done: int, queued: int, ready: int, failed: int, pre: int = 0, post: int = 0) -> None:
        counts = (done, pre, queued, post, ready, failed)
        if counts == self._written:
            self._pending = None
            return
        self._pending = counts
        now = time.monotonic()
        if now - self._block_at >= 1.0:
            self._write_block()
            self._block_at = now

    def _write_block(self) -> None:
        if self._pending is None:
            return
        done, pre, queued, post, ready, failed = self._written = self._pending
        self._pending = None
        unready = max(0, self._total - done - pre - queued - post - ready - failed)
        code = "2 (DAG_STATUS_NODE_FAILED)" if failed else "0 (DAG_STATUS_OK)"
        self._write(
            f"DAG status: {code}",
            f"Of {self._total} nodes total:",
            _HEADER,
            _RULE,
            f"{done:>5}{pre:>8}{queued:>9}{post:>8}{ready:>8}{unready:>11}{failed:>9}",
        )

    def run_finished(self, ok: bool, counts: dict[str, int]) -> None:  # noqa: ARG002 - the run observer's signature
        self.exiting(0 if ok else 1)

    def exiting(self, code: int, pid: int | None = None) -> None:
        self._write_block()
        self._write(f"**** condor_scheduniv_exec.0.0 (condor_DAGMAN) pid {pid or self.pid} EXITING WITH STATUS {code}")
        self.flush()

    def flush(self) -> None:
        if not self._fh.closed:
            self._write_block()  # a reader between events sees the latest counts
            self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


def _outcome(what: str, status: int) -> str:
    if status == 0:
        return f"{what} completed successfully."
    if status < 0:
        return f"{what} failed with signal {-status}."
    return f"{what} failed with status {status}."
