"""A batch system in memory for the driver's tests: scripted outcomes per cluster attempt, a fake clock.

Each submitted job pends for one query, runs for one, then finishes: the fake
writes the cluster's ``.result`` as the pilot would (or none, for a job that
vanishes) and, for failed tasks, the jobstate.log lines and ``.err.NNN`` file
the pilot writes. Tests script submit failures, pending reasons and queue
outages, and read back every call made.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from pilot.contracts.queue import QueueState, QueueStatus
from pilot.contracts.result import RunOutcome, RunResult, result_path, write_result
from pilot.errors import SubmitError
from pilot.submit.backend import JobRef, Submitted


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Job:
    job_id: str
    name: str
    cluster: str
    site: str
    workdir: str
    outcome: RunOutcome | None
    queries: int = 0
    status: QueueStatus = field(default_factory=lambda: QueueStatus(QueueState.PENDING))
    pinned: bool = False  # the test set its status: no automatic progress


class FakeQueue:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.jobs: dict[str, Job] = {}
        self.outcomes: dict[str, list[RunOutcome | None]] = {}  # cluster -> outcome per attempt (default DONE)
        self.per_task_stdio = True  # False: task stderr goes to <cluster>.err, as in a planned cluster's job
        self.submit_errors: dict[str, list[bool]] = {}  # cluster -> per failing try: did the job reach the queue?
        self.refuse: dict[str, str] = {}  # cluster -> a permanent refusal message
        self.query_outages = 0  # the next N queries fail
        self.find_outages = 0
        self.submits: list[tuple[float, str, str]] = []  # (time, site, cluster) of every submit call
        self.cancelled: list[str] = []
        self.cancel_fails: set[str] = set()  # clusters whose job the cancel command fails for
        self.crash_stopped: set[str] = set()  # clusters whose failed task was stopped at --max-crashes (2 crashes)
        self.max_active: dict[str, int] = {}

    # -- the Backend interface -------------------------------------------------
    def submit(self, site, req, job_name: str) -> Submitted:
        self.submits.append((self.clock.now, site.name, req.name))
        if req.name in self.refuse:
            raise SubmitError(self.refuse[req.name], transient=False)
        errors = self.submit_errors.get(req.name)
        if errors:
            reached = errors.pop(0)
            if reached:
                self._new_job(site.name, req, job_name)
            raise SubmitError(f"{site.name}: submitting {req.name} failed: timed out", transient=True)
        job = self._new_job(site.name, req, job_name)
        active = sum(1 for j in self.jobs.values() if j.site == site.name and j.status.state is not QueueState.FINISHED)
        self.max_active[site.name] = max(self.max_active.get(site.name, 0), active)
        return Submitted(
            job.job_id, os.path.join(req.workdir, job_name + ".stdout"), os.path.join(req.workdir, job_name + ".stderr")
        )

    def query(self, site, job_ids):
        if self.query_outages:
            self.query_outages -= 1
            raise SubmitError("squeue: error: slurm_load_jobs error: Socket timed out", transient=True)
        out = {}
        for job_id in job_ids:
            job = self.jobs[job_id]
            if not job.pinned:
                self._advance(job)
            out[job_id] = job.status
        return out

    def find(self, site, workdir, job_name):
        if self.find_outages:
            self.find_outages -= 1
            return None
        return next((j.job_id for j in self.jobs.values() if j.name == job_name), "")

    def ended(self):
        return None  # a batch job's end is learnt at the poll

    def found_by_name(self, site, cluster):
        return True  # every cluster is a batch job of its own

    def cancel(self, site, refs: list[JobRef]):
        done = []
        failing = [r.job_id for r in refs if r.job_id and self.jobs[r.job_id].cluster in self.cancel_fails]
        if failing:
            raise SubmitError(
                f"scancel: error: Kill job error on job id {failing[0]}: Unable to contact slurm controller",
                transient=True,
            )
        for ref in refs:
            job_id = ref.job_id or self.find(site, ref.workdir, ref.job_name)
            if job_id:
                self.jobs[job_id].status = QueueStatus(QueueState.FINISHED)
                self.jobs[job_id].pinned = True
                done.append(job_id)
        self.cancelled += done
        return done

    # -- test controls -------------------------------------------------------------
    def pin(self, cluster: str, status: QueueStatus) -> None:
        """The latest job of ``cluster`` stays in ``status`` until released."""
        job = self.latest(cluster)
        job.status, job.pinned = status, True

    def release(self, cluster: str) -> None:
        job = self.latest(cluster)
        job.pinned = False
        job.status = QueueStatus(QueueState.RUNNING)

    def latest(self, cluster: str) -> Job:
        return [j for j in self.jobs.values() if j.cluster == cluster][-1]

    def _new_job(self, site: str, req, job_name: str) -> Job:
        attempt = sum(1 for j in self.jobs.values() if j.cluster == req.name)
        plan = self.outcomes.get(req.name, [])
        outcome = plan[attempt] if attempt < len(plan) else RunOutcome.DONE
        job = Job(str(100 + len(self.jobs)), job_name, req.name, site, req.workdir, outcome)
        self.jobs[job.job_id] = job
        return job

    def _advance(self, job: Job) -> None:
        job.queries += 1
        if job.queries == 1:
            job.status = QueueStatus(QueueState.PENDING, "Priority")
        elif job.queries == 2:
            job.status = QueueStatus(QueueState.RUNNING)
            for suffix in (".stdout", ".stderr"):  # the batch system opens the job's output when it starts
                Path(job.workdir, job.name + suffix).touch()
        elif job.status.state is not QueueState.FINISHED:
            self._pilot_ends(job)
            job.status = QueueStatus(QueueState.FINISHED)

    def _pilot_ends(self, job: Job) -> None:
        """Write what a pilot leaves behind: rescue records, jobstate.log, stderr files, the result."""
        dag = os.path.join(job.workdir, job.cluster + ".dag")
        tasks = [line.split()[1] for line in Path(dag).read_text().splitlines() if line.startswith("TASK ")]
        if job.outcome is None:
            return  # vanished: no result
        with (
            open(os.path.join(job.workdir, "jobstate.log"), "a", encoding="utf-8") as log,
            open(dag + ".rescue", "a") as rescue,
        ):
            log.write("1.0 INTERNAL *** PMC_STARTED ***\n")
            for n, task in enumerate(tasks):
                fail = job.outcome is RunOutcome.FAILED and n == 0
                log.write(
                    f"1.0 {task} SUBMIT {n}.0 - - {n}\n1.0 {task} EXECUTE {n}.0 - - {n}\n1.0 {task} JOB_TERMINATED {n}.0 - - {n}\n"
                )
                if fail:
                    log.write(f"1.0 {task} JOB_FAILURE {-9 if job.cluster in self.crash_stopped else 3} - - {n}\n")
                    if self.per_task_stdio:
                        k = len(list(Path(job.workdir).glob(f"{task}.err.*")))
                        Path(job.workdir, f"{task}.err.{k:03d}").write_text("boom\n")
                    else:  # the job's -e file, renamed per attempt by the root monitoring
                        with open(os.path.join(job.workdir, job.cluster + ".err"), "a") as err:
                            err.write("boom\n")
                elif job.outcome is RunOutcome.DONE or job.outcome is RunOutcome.FAILED:
                    log.write(f"1.0 {task} JOB_SUCCESS 0 - - {n}\n")
                    rescue.write(f"DONE {task}\n")
            log.write("1.0 INTERNAL *** PMC_FINISHED 1 ***\n")
        done = (
            len(tasks) - (1 if job.outcome is RunOutcome.FAILED else 0)
            if job.outcome in (RunOutcome.DONE, RunOutcome.FAILED)
            else 0
        )
        failed = 1 if job.outcome is RunOutcome.FAILED else 0
        crashed = {tasks[0]: 2} if failed and job.cluster in self.crash_stopped else {}
        write_result(
            result_path(dag),
            RunResult(
                job.outcome,
                len(tasks),
                done,
                [],
                0 if job.outcome is RunOutcome.DONE else 1,
                failed=failed,
                crashed=crashed,
            ),
        )


def make_plan(
    root: Path,
    clusters: dict[str, list[str]],
    tasks: int = 2,
    retry: dict[str, int] | None = None,
    categories: dict[str, tuple[str, int]] | None = None,
) -> str:
    """A submit directory with ``clusters`` (name -> parents, parents first), each a DAG of ``tasks`` tasks;
    ``categories``: name -> (DAGMan category, its maxjobs) of data-job clusters."""
    lines = [
        "format: 1",
        'workflow: "wf"',
        'site: "a"',
        'site_file: "/nonexistent/a.yaml"',
        'scheduler: "local"',
        "clusters:",
    ]
    for name, parents in clusters.items():
        d = root / name
        d.mkdir(parents=True)
        (d / f"{name}.dag").write_text("".join(f"TASK {name}_t{i} /bin/true\n" for i in range(tasks)))
        lines += [
            f"- name: {json.dumps(name)}",
            '  kind: "horizontal"',
            f"  dir: {json.dumps(name)}",
            f"  dag: {json.dumps(name + '/' + name + '.dag')}",
            f'  script: "{name}/{name}.sh"',
            f"  tasks: {tasks}",
            "  ranks: 2",
            "  runtime: null",
            "  critical_path: null",
            f"  parents: {json.dumps(parents)}",
            f"  retry: {json.dumps((retry or {}).get(name))}",
        ]
        if categories and name in categories:
            lines += [f"  category: {json.dumps(categories[name][0])}", f"  maxjobs: {categories[name][1]}"]
    (root / "clusters.yml").write_text("\n".join(lines) + "\n")
    return str(root)
