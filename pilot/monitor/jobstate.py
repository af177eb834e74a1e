"""jobstate.log next to the DAG (--jobstate-log), appended, as pegasus-monitord reads it.

Per attempt ``seq``: SUBMIT when the task became ready, EXECUTE when it
started (monitord's queue time is the gap, as with PMC), JOB_TERMINATED at the
end, then JOB_SUCCESS 0 or JOB_FAILURE <exit code>. PMC writes the raw wait
status there (768 for exit 3); we write what DAGMan writes, the exit code
(minus the signal number for a signal). INTERNAL lines frame the run.
Buffered; flushed at most once a second and at every exit path.
"""

from __future__ import annotations

import time

from pilot.dag.model import Task
from pilot.monitor.events import RunEvents
from pilot.util.safeopen import open_file


class JobstateLog(RunEvents):
    def __init__(self, path: str, flush_interval: float = 1.0) -> None:
        self.path = path
        self._fh = open_file(path, "a", encoding="utf-8", errors="surrogateescape", buffering=1 << 16)
        self._interval = flush_interval
        self._last = time.monotonic()

    def _line(self, text: str) -> None:
        self._fh.write(f"{time.time():.6f} {text}\n")
        now = time.monotonic()
        if now - self._last >= self._interval:
            self._fh.flush()
            self._last = now

    def event(self, job: str, state: str, info: str, seq: int, site: str = "-") -> None:
        """One line ``<epoch> <job> <STATE> <sched id or status> <site> - <seq>``."""
        self._line(f"{job} {state} {info} {site} - {seq}")

    def internal(self, text: str) -> None:
        self._line(f"INTERNAL *** {text} ***")
        self.flush()

    def run_started(self, dag_path: str, total: int, workers: int) -> None:
        self.internal("PMC_STARTED")

    def task_queued(self, task: Task, seq: int) -> None:
        self.event(task.name, "SUBMIT", f"{seq}.0", seq)

    def task_dispatched(self, task: Task, seq: int, rank: int, hostname: str) -> None:
        self.event(task.name, "EXECUTE", f"{seq}.0", seq)

    def task_ended(self, task: Task, seq: int, status: int, will_retry: bool) -> None:
        self.event(task.name, "JOB_TERMINATED", f"{seq}.0", seq)
        if status == 0:
            self.event(task.name, "JOB_SUCCESS", "0", seq)
        else:
            self.event(task.name, "JOB_FAILURE", str(status), seq)

    def run_finished(self, ok: bool, counts: dict[str, int]) -> None:
        self.internal(f"PMC_FINISHED {0 if ok else 1}")

    def flush(self) -> None:
        if not self._fh.closed:
            self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()
