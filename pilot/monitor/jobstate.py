"""jobstate.log next to the DAG (--jobstate-log), as the pilot run's events happen.

Per attempt ``seq``: SUBMIT when the task became ready, EXECUTE when it
started (monitord's queue time is the gap, as with PMC), JOB_TERMINATED at the
end, then JOB_SUCCESS 0 or JOB_FAILURE <exit code>; PMC_STARTED and
PMC_FINISHED frame the run. The line format is pilot.contracts.jobstate's.
"""

from __future__ import annotations

from pilot.contracts.jobstate import Event, JobstateWriter, Marker
from pilot.dag.model import Task
from pilot.monitor.events import RunEvents


class JobstateLog(JobstateWriter, RunEvents):
    """The run's events as jobstate.log lines (the writer's flush and close end the file)."""

    def run_started(self, dag_path: str, total: int, workers: int) -> None:  # noqa: ARG002 - the run observer's signature
        self.internal(Marker.PMC_STARTED)

    def task_queued(self, task: Task, seq: int) -> None:
        self.event(task.name, Event.SUBMIT, f"{seq}.0", seq)

    def task_dispatched(self, task: Task, seq: int, rank: int, hostname: str) -> None:  # noqa: ARG002 - the run observer's signature
        self.event(task.name, Event.EXECUTE, f"{seq}.0", seq)

    def task_ended(self, task: Task, seq: int, status: int, will_retry: bool) -> None:  # noqa: ARG002 - the run observer's signature
        self.event(task.name, Event.JOB_TERMINATED, f"{seq}.0", seq)
        if status == 0:
            self.event(task.name, Event.JOB_SUCCESS, "0", seq)
        else:
            self.event(task.name, Event.JOB_FAILURE, str(status), seq)

    def run_finished(self, ok: bool, counts: dict[str, int]) -> None:  # noqa: ARG002 - the run observer's signature
        self.internal(Marker.PMC_FINISHED, 0 if ok else 1)
