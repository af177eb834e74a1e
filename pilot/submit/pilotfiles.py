"""What a cluster's pilot has written so far: tasks done, running now, failed, and where their stderr is.

Read from the files ``pilot run`` keeps next to the cluster's DAG, through
their contracts: the rescue log (pilot.contracts.rescue: one ``DONE <task>``
per finished task, across every attempt) and jobstate.log
(pilot.contracts.jobstate: SUBMIT when a task became ready, EXECUTE when it
started, JOB_TERMINATED/JOB_SUCCESS/JOB_FAILURE per task attempt,
PMC_STARTED/PMC_FINISHED around each run). Both are append-only, so a
``PilotFiles`` reads only what was added since it last looked: live progress
costs the new lines, not the whole history.

A task's stderr is in its own ``<task>.err.NNN`` only with ``--per-task-stdio``.
Otherwise the pilot of a planned cluster writes every task's stderr to the
job's ``<cluster>.err`` and, for a failed task, an invocation record with the
tail of that stderr to ``<cluster>.out`` (``-e``/``-o``, ``--invocation-records``);
``pilot submit`` renames both to the attempt's ``.err.NNN``/``.out.NNN`` when
the attempt ends (pilot.monitor.joboutput).
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field

from pilot.contracts.jobstate import INTERNAL, Event, JobstateLine, JobstateTail, Marker, jobstate_path
from pilot.contracts.rescue import RescueTail
from pilot.monitor import stdio

_ERR_NUMBER = re.compile(r"\.err\.(\d+)\Z")


@dataclass
class TaskProgress:
    done: int = 0
    running: set[str] = field(default_factory=set)
    queued: set[str] = field(default_factory=set)  # ready, waiting for a slot (SUBMIT without EXECUTE)
    failed: dict[str, int] = field(default_factory=dict)  # task -> status of its last attempt (negative: signal)
    started: bool = False  # a run has started (PMC_STARTED)
    finished: bool = False  # and the latest one finished (PMC_FINISHED)


class PilotFiles:
    def __init__(self, dag: str) -> None:
        self.dag = dag
        self.dir = os.path.dirname(dag)
        self._rescue = RescueTail(dag)
        self._jobstate = JobstateTail(jobstate_path(self.dir))
        self.progress = TaskProgress()

    def update(self) -> TaskProgress:
        p = self.progress
        reset, done = self._rescue.done()
        if reset:
            p.done = 0
        p.done += len(done)
        reset, lines = self._jobstate.lines()
        if reset:
            p.running.clear()
            p.failed.clear()
            p.queued.clear()
            p.started = p.finished = False
        for line in lines:
            self._event(line)
        return p

    def _event(self, line: JobstateLine) -> None:
        p = self.progress
        if line.job == INTERNAL:
            if line.event == Marker.PMC_STARTED:
                p.started, p.finished = True, False
                p.running.clear()  # whatever ran or waited in an earlier attempt is over
                p.queued.clear()
            elif line.event == Marker.PMC_FINISHED:
                p.finished = True
                p.running.clear()
            return
        task, event = line.job, line.event
        if event == Event.SUBMIT:
            p.queued.add(task)
            p.failed.pop(task, None)
        elif event == Event.EXECUTE:
            p.queued.discard(task)
            p.running.add(task)
            p.failed.pop(task, None)
        elif event == Event.JOB_TERMINATED:
            p.running.discard(task)
        elif event == Event.JOB_SUCCESS:
            p.failed.pop(task, None)
        elif event == Event.JOB_FAILURE and line.info:
            try:
                p.failed[task] = int(line.info)
            except ValueError:
                p.failed[task] = 1

    def stderr_of(self, task: str) -> str | None:
        """The stderr file of the task's latest attempt (``<task>.err.NNN``, the highest NNN; the task id
        written as ``pilot run`` names the file, ``/`` as ``%2F``)."""
        return _latest(self.dir, stdio.file_name(task))

    def job_output(self) -> tuple[str | None, str | None]:
        """The latest attempt's job output ``<cluster>.out.NNN`` and ``.err.NNN`` (None when there is none):
        where a task's stderr and invocation record are without per-task files."""
        err = _latest(self.dir, os.path.basename(self.dag).removesuffix(".dag"))
        if err is None:
            return None, None
        m = _ERR_NUMBER.search(err)
        assert m is not None  # _latest returns only names it matched
        out = f"{err[:m.start()]}.out.{m.group(1)}"
        return (out if os.path.exists(out) else None), err


def _latest(directory: str, base: str) -> str | None:
    """``<base>.err.NNN`` with the highest NNN in ``directory``."""
    best, best_n = None, -1
    for path in glob.glob(os.path.join(glob.escape(directory), glob.escape(base) + ".err.*")):
        m = _ERR_NUMBER.search(path)
        if m and int(m.group(1)) > best_n:
            best, best_n = path, int(m.group(1))
    return best
