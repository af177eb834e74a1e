"""The root dagman.out and jobstate.log of a submit directory, written as ``pilot submit`` drives it.

``pilot submit`` plays DAGMan for the cluster DAG, so it writes what DAGMan
(and the POST script) would: per cluster attempt ``Submitting ... / ULOG_SUBMIT``
when the batch job is queued, ``ULOG_EXECUTE`` when it starts running,
``ULOG_JOB_TERMINATED`` and the job's outcome when it ends, then the POST step
(the job output kept as ``<cluster>.out.NNN``, see pilot.monitor.joboutput)
and its outcome; a cluster resubmitted after wall time or node failure gets
``Retrying node ...`` and a new attempt, as DAGMan's RETRY does; a batch job
``pilot cancel`` removes gets ``ULOG_JOB_ABORTED``, as a condor_rm. DAG status
blocks (what pegasus-status reads) follow changes, at most once a second, and
the final counts precede ``EXITING WITH STATUS``. The same events go to the
root jobstate.log. Lines are written by the per-DAG writers
(pilot.monitor.dagman_out, pilot.monitor.jobstate).

Both files are appended to. A restarted ``pilot submit`` reads back its own
dagman.out to learn each node's attempts and state, writes a new start banner
(as a restarted DAGMan does) and goes on without repeating an event.

The HTCondor id in the events is a counter of submissions in this directory
(monitord wants a number); the batch job id is in jobstate.log's SUBMIT line.
"""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass, field
from typing import Any

from pilot.contracts.jobstate import Event, JobstateWriter, Marker, jobstate_path
from pilot.contracts.rootfiles import read_braindump, read_root_dag
from pilot.errors import ConfigError
from pilot.monitor import joboutput
from pilot.monitor.dagman_out import DagmanOut

_EVENT = re.compile(
    r"Submitting HTCondor Node (?P<submit>\S+) job|ULOG_EXECUTE for HTCondor Node (?P<execute>\S+) |"
    r"POST Script of Node (?P<post>\S+) (?P<outcome>completed successfully|failed)|"
    r"Retrying node (?P<retry>\S+) |ULOG_JOB_ABORTED for HTCondor Node (?P<aborted>\S+) "
)
_KINDS = ("submit", "execute", "post", "retry", "aborted")


class Phase(enum.Enum):
    WAITING = "waiting"  # not submitted (or to be retried)
    QUEUED = "queued"  # batch job submitted, not running yet
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass
class Node:
    name: str
    parents: list[str] = field(default_factory=list)
    attempts: int = 0  # submissions so far; the current one's output number is attempts - 1
    sched: int = 0  # the HTCondor-style id of the current attempt
    phase: Phase = Phase.WAITING


class RootEvents:
    """What the driver reports; this base does nothing (the driver's default, and for pilot cancel)."""

    def start(self) -> None: ...

    def submitted(self, cluster: str, job_id: str, site: str) -> None: ...

    def running(self, cluster: str) -> None: ...

    def ended(self, cluster: str, retry: bool, retry_limit: int) -> None: ...

    def aborted(self, cluster: str) -> None: ...

    def refused(self, cluster: str) -> None: ...

    def finished(self, code: int) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class RootMonitor(RootEvents):
    def __init__(self, submit_dir: str) -> None:
        self.submit_dir = os.path.abspath(submit_dir)
        brain = root_braindump(self.submit_dir)
        self.dag = os.path.join(self.submit_dir, brain["dag"])
        self.nodes = {name: Node(name, parents) for name, parents in read_root_dag(self.dag).items()}
        self.path = self.dag + ".dagman.out"
        self._sched = 0
        self._recover()
        self.out: DagmanOut | None = None
        self.jobstate: JobstateWriter | None = None

    @property
    def restarted(self) -> bool:
        """Whether an earlier pilot submit wrote this dagman.out already."""
        return os.path.exists(self.path) and os.path.getsize(self.path) > 0

    def _recover(self) -> None:
        """Each node's attempts and state from the dagman.out an earlier pilot submit wrote."""
        try:
            fh = open(self.path, encoding="utf-8", errors="replace")  # noqa: SIM115 - opened apart so that a missing file is told apart; the with below closes it
        except FileNotFoundError:
            return
        with fh:
            for line in fh:
                m = _EVENT.search(line)
                if m is None:
                    continue
                kind = next(k for k in _KINDS if m.group(k))
                node = self.nodes.get(m.group(kind))
                if node is None:
                    continue
                if kind == "submit":
                    node.attempts += 1
                    self._sched += 1
                    node.sched = self._sched
                    node.phase = Phase.QUEUED
                elif kind == "execute":
                    node.phase = Phase.RUNNING
                elif kind == "post":
                    node.phase = Phase.DONE if m.group("outcome").startswith("completed") else Phase.FAILED
                elif kind == "retry":
                    node.phase = Phase.WAITING
                else:
                    node.phase = Phase.FAILED

    # -- events -----------------------------------------------------------------
    def start(self) -> None:
        """Open the files (appending) and write the start banner."""
        path = self.path
        try:
            self.out = DagmanOut(path, self.dag)
            path = jobstate_path(self.submit_dir)
            self.jobstate = JobstateWriter(path)
        except OSError as exc:  # a link, a directory or FIFO where the file goes, a read-only directory
            if self.out is not None:
                self.out.close()
                self.out = None
            raise ConfigError(
                f"{path}: cannot write: {exc.strerror}; pilot submit writes the root monitoring files "
                f"in the submit directory"
            ) from None
        self._out().header(len(self.nodes))
        self._jobstate().internal(Marker.DAGMAN_STARTED, 0)
        self._status()

    def submitted(self, cluster: str, job_id: str, site: str) -> None:
        node = self.nodes[cluster]
        if node.phase in (Phase.QUEUED, Phase.RUNNING):
            return  # already recorded (a restarted driver adopting its job)
        node.attempts += 1
        self._sched += 1
        node.sched = self._sched
        node.phase = Phase.QUEUED
        seq = f"{node.sched}.0"
        self._out().submitted(cluster, seq)
        self._jobstate().event(cluster, Event.SUBMIT, job_id or seq, node.attempts, site)
        self._status()

    def running(self, cluster: str) -> None:
        node = self.nodes[cluster]
        if node.phase != Phase.QUEUED:
            return
        node.phase = Phase.RUNNING
        self._out().executing(cluster, f"{node.sched}.0")
        self._jobstate().event(cluster, Event.EXECUTE, f"{node.sched}.0", node.attempts)
        self._status()

    def ended(self, cluster: str, retry: bool, retry_limit: int) -> None:
        """The attempt is over: job end, POST step (job output kept, outcome), retry if the driver resubmits."""
        node = self.nodes[cluster]
        if node.phase not in (Phase.QUEUED, Phase.RUNNING):
            return
        self.running(cluster)  # a job seen only once it was over still ran
        seq = f"{node.sched}.0"
        cdir = os.path.join(self.submit_dir, cluster)
        joboutput.rotate(cdir, cluster, node.attempts - 1)
        status, _ = joboutput.outcome(cdir, cluster)
        self._out().terminated(cluster, seq, status)
        self._jobstate().event(cluster, Event.JOB_TERMINATED, seq, node.attempts)
        self._jobstate().event(
            cluster, Event.JOB_SUCCESS if status == 0 else Event.JOB_FAILURE, str(status), node.attempts
        )
        post = 0 if status == 0 else 1
        self._out().post_script(cluster, seq, post)
        self._jobstate().event(cluster, Event.POST_SCRIPT_STARTED, "-", node.attempts)
        self._jobstate().event(cluster, Event.POST_SCRIPT_TERMINATED, seq, node.attempts)
        self._jobstate().event(
            cluster, Event.POST_SCRIPT_SUCCESS if post == 0 else Event.POST_SCRIPT_FAILURE, str(post), node.attempts
        )
        if post == 0:
            node.phase = Phase.DONE
        elif retry:
            node.phase = Phase.WAITING
            self._out().retrying(cluster, node.attempts, retry_limit)
        else:
            node.phase = Phase.FAILED
        self._status()

    def aborted(self, cluster: str) -> None:
        """``pilot cancel`` removed the cluster's batch job (DAGMan logs ULOG_JOB_ABORTED for a condor_rm)."""
        node = self.nodes[cluster]
        if node.phase not in (Phase.QUEUED, Phase.RUNNING):
            return
        node.phase = Phase.FAILED
        self._out().aborted(cluster, f"{node.sched}.0")
        self._jobstate().event(cluster, Event.JOB_ABORTED, f"{node.sched}.0", node.attempts)
        self._status()

    def refused(self, cluster: str) -> None:
        """The cluster failed without a batch job (the site refused it, or every submission failed).

        DAGMan marks such a node failed with no job event; only the counts
        (what pegasus-status reads) change.
        """
        node = self.nodes[cluster]
        if node.phase in (Phase.QUEUED, Phase.RUNNING, Phase.FAILED):
            return
        node.phase = Phase.FAILED
        self._status()

    def finished(self, code: int) -> None:
        """The driver stops: 0 all done, 1 failed, 2 stopped with batch jobs left running."""
        self._status()
        self._out().exiting(code)
        self._jobstate().internal(Marker.DAGMAN_FINISHED, code)

    def counts(self) -> dict[str, int]:
        c = {"done": 0, "queued": 0, "ready": 0, "failed": 0, "unready": 0}
        for node in self.nodes.values():
            if node.phase == Phase.DONE:
                c["done"] += 1
            elif node.phase in (Phase.QUEUED, Phase.RUNNING):
                c["queued"] += 1
            elif node.phase == Phase.FAILED:
                c["failed"] += 1
            elif all(self.nodes[p].phase == Phase.DONE for p in node.parents):
                c["ready"] += 1
            else:
                c["unready"] += 1
        return c

    def _out(self) -> DagmanOut:
        if self.out is None:
            raise RuntimeError("RootMonitor.start() opens the files")
        return self.out

    def _jobstate(self) -> JobstateWriter:
        if self.jobstate is None:
            raise RuntimeError("RootMonitor.start() opens the files")
        return self.jobstate

    def _status(self) -> None:
        """Counts after an event; events are few (per cluster attempt), so they reach the files at once."""
        c = self.counts()
        self._out().status(c["done"], c["queued"], c["ready"], c["failed"])
        self.flush()

    def flush(self) -> None:
        for writer in (self.out, self.jobstate):
            if writer is not None:
                writer.flush()

    def close(self) -> None:
        for writer in (self.out, self.jobstate):
            if writer is not None:
                writer.close()


def root_braindump(submit_dir: str) -> dict[str, Any]:
    """The root braindump (pilot.contracts.rootfiles.read_braindump: bounded, its root DAG inside the directory)."""
    return read_braindump(submit_dir)
