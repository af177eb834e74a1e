"""Sub-workflows, run as Pegasus runs them but without HTCondor: planned when ready, driven by a nested driver.

Pegasus gives a pegasusWorkflow job a PRE script that plans its workflow
(pegasus-plan ``--deferred``) and runs the plan as a nested DAGMan.
``NestedBackend`` does the same for a cluster of kind ``subworkflow``,
behind the ``Backend`` seam the driver submits through:

- ``submit`` plans the workflow into the nested submit directory with
  ``pilot plan`` (once: a directory whose plan is complete is resumed, as
  Pegasus reuses a sub-workflow's rescue DAG unless told to re-plan), names
  the nested dagman.out in the job's .sub (``_CONDOR_DAGMAN_LOG``, where
  pegasus-monitord looks for a sub-workflow), and starts a nested ``pilot
  submit`` in a session of its own, which writes the cluster's ``<dag>.result``
  as it ends (``--result``), so the driver settles it as any cluster;
- ``query`` says RUNNING while that process lives (it may have outlived a
  driver that was stopped or killed: its lock names it), FINISHED after;
- ``find`` adopts a nested driver that a killed driver started;
- ``cancel`` runs ``pilot cancel`` on the nested directory, which stops it and
  cancels its batch jobs.

Job ids are ``nested:<cluster>:<pid>``, so a restarted driver needs nothing
but the id to find its nested runs. ``Routed`` sends each call to the nested
backend or the batch one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from pilot.contracts.clusters import ClusterSpec, SubworkflowSpec, plan_site_file, read_clusters
from pilot.contracts.queue import QueueState, QueueStatus
from pilot.contracts.result import RunOutcome, RunResult, result_path, write_result
from pilot.contracts.rootfiles import BRAINDUMP, read_braindump, set_environment
from pilot.contracts.submitstate import ClusterState, SubmitState, state_path
from pilot.errors import ConfigError, SubmitError
from pilot.jobrequest import JobRequest
from pilot.sites import SiteConfig
from pilot.submit.backend import Backend, JobRef, Submitted
from pilot.submit.lock import holder
from pilot.submit.options import Options
from pilot.util.procs import cmdline

PREFIX = "nested:"
PLAN_TIMEOUT = 3600.0  # seconds: planning a million jobs takes about a minute; a hung plan must not hang the run


def nested_log(spec: ClusterSpec) -> str:
    """Where the nested pilot submit's own output goes (appended over attempts)."""
    return os.path.join(spec.dir, os.path.basename(spec.dir) + ".nested")


class NestedBackend:
    def __init__(
        self, submit_dir: str, specs: Sequence[ClusterSpec], sites: dict[str, dict[str, Any]], opts: Options
    ) -> None:
        self.submit_dir = submit_dir
        self.specs = {s.name: s for s in specs if s.subworkflow is not None}
        self.sites = sites  # the driver's state.sites: name -> {"file": path, "set": {key: value}}
        self.opts = opts
        self._procs: dict[int, subprocess.Popen] = {}

    def owns(self, name: str) -> bool:
        return name in self.specs

    def _sets(self) -> list[str]:
        """The --set values of the run's sites, for the nested plan and run."""
        sets = {k: v for s in self.sites.values() for k, v in s.get("set", {}).items()}
        return [f"--set={k}={v}" for k, v in sets.items()]

    def _site_args(self) -> list[str]:
        return ["--site", ",".join(v["file"] for v in self.sites.values()), *self._sets()]

    def submit(self, site: SiteConfig, req: JobRequest, job_name: str) -> Submitted:  # noqa: ARG002 - the provider interface's signature
        spec = self.specs[req.name]
        sub = spec.subworkflow
        assert sub is not None
        if not os.path.exists(os.path.join(sub.submit_dir, BRAINDUMP)):
            self._plan(spec, sub)
        dag = str(read_braindump(sub.submit_dir)["dag"])
        # As Pegasus names it: in the directory without the .NNN that monitord adds back.
        set_environment(
            self.submit_dir,
            spec.name,
            {
                "_CONDOR_DAGMAN_LOG": os.path.join(sub.submit_dir[: -len(".000")], dag + ".dagman.out"),
                "_CONDOR_MAX_DAGMAN_LOG": "0",
            },
        )
        log = nested_log(spec)
        argv = [
            sys.executable,
            "-m",
            "pilot",
            "submit",
            "--no-monitord",
            "--result",
            result_path(spec.dag),
            "--retry",
            str(self.opts.retry),
            "--max-resubmits",
            str(self.opts.max_resubmits),
            "--poll",
            str(self.opts.poll),
            *self._site_args(),
            sub.submit_dir,
        ]
        with open(log + ".out", "ab") as out, open(log + ".err", "ab") as err:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=self.submit_dir, start_new_session=True
            )  # a Ctrl-C of the driver leaves it running, as batch jobs
        self._procs[proc.pid] = proc
        return Submitted(f"{PREFIX}{spec.name}:{proc.pid}", log + ".out", log + ".err")

    def _plan(self, spec: ClusterSpec, sub: SubworkflowSpec) -> None:
        """pilot plan of the sub-workflow (Pegasus' PRE script); a failure is the job's, in one line."""
        site_file = plan_site_file(self.submit_dir) or next(iter(self.sites.values()))["file"]
        argv = [
            sys.executable,
            "-m",
            "pilot",
            "plan",
            sub.workflow,
            "--site",
            site_file,
            *self._sets(),
            "--dir",
            sub.submit_dir,
            "--force",
            *sub.plan_args,
        ]
        try:
            done = subprocess.run(
                argv,
                cwd=self.submit_dir,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=PLAN_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            raise SubmitError(
                f"planning sub-workflow {sub.workflow} took over {PLAN_TIMEOUT:.0f} s", transient=False
            ) from None
        with open(nested_log(spec) + ".plan", "w", encoding="utf-8") as fh:  # as Pegasus keeps <job>.pre.log
            fh.write(done.stdout + done.stderr)
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            why = lines[-1] if lines else f"pilot plan exited {done.returncode}"
            raise SubmitError(
                f"planning sub-workflow {os.path.relpath(sub.workflow, self.submit_dir)} failed: {why}", transient=False
            )

    def query(self, site: SiteConfig, job_ids: Sequence[str]) -> dict[str, QueueStatus]:  # noqa: ARG002 - the provider interface's signature
        return {j: QueueStatus(QueueState.RUNNING if self._alive(j) else QueueState.FINISHED) for j in job_ids}

    def _alive(self, job_id: str) -> bool:
        name, _, pid_text = job_id[len(PREFIX) :].rpartition(":")
        pid = int(pid_text) if pid_text.isdigit() else 0
        proc = self._procs.get(pid)
        if proc is not None:
            if proc.poll() is None:
                return True
            del self._procs[pid]  # reaped
            return False
        spec = self.specs.get(name)
        if spec is None or spec.subworkflow is None:
            return False
        return holder(spec.subworkflow.submit_dir) == pid or _runs_nested(pid, spec.subworkflow.submit_dir)

    def find(self, site: SiteConfig, workdir: str, job_name: str) -> str | None:  # noqa: ARG002 - the provider interface's signature
        name = os.path.basename(workdir)
        sub = self.specs[name].subworkflow
        assert sub is not None
        pid = holder(sub.submit_dir) if os.path.isdir(sub.submit_dir) else None
        return f"{PREFIX}{name}:{pid}" if pid else ""

    def cancel(self, site: SiteConfig, jobs: Sequence[JobRef]) -> list[str]:  # noqa: ARG002 - the provider interface's signature
        out = []
        for job in jobs:
            sub = self.specs[os.path.basename(job.workdir)].subworkflow
            assert sub is not None
            if os.path.exists(state_path(sub.submit_dir)) or holder(sub.submit_dir) is not None:
                subprocess.run(
                    [sys.executable, "-m", "pilot", "cancel", sub.submit_dir],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=600,
                )
                out.append(job.job_id or f"{PREFIX}{os.path.basename(job.workdir)}")
        return out


def _runs_nested(pid: int, submit_dir: str) -> bool:
    """Whether ``pid`` is a live pilot submit of ``submit_dir`` (before it took its lock, or a pid reused)."""
    argv = cmdline(pid) or []  # a zombie's is empty
    return b"submit" in argv and os.fsencode(submit_dir) in argv


class Routed:
    """A Backend that sends sub-workflow clusters to ``nested`` and every other cluster to ``batch``."""

    def __init__(self, batch: Backend, nested: NestedBackend) -> None:
        self.batch = batch
        self.nested = nested

    def submit(self, site: SiteConfig, req: JobRequest, job_name: str) -> Submitted:
        return (self.nested if self.nested.owns(req.name) else self.batch).submit(site, req, job_name)

    def query(self, site: SiteConfig, job_ids: Sequence[str]) -> dict[str, QueueStatus]:
        mine = [j for j in job_ids if j.startswith(PREFIX)]
        rest = [j for j in job_ids if not j.startswith(PREFIX)]
        return {**(self.batch.query(site, rest) if rest else {}), **self.nested.query(site, mine)}

    def find(self, site: SiteConfig, workdir: str, job_name: str) -> str | None:
        owner = self.nested if self.nested.owns(os.path.basename(workdir)) else self.batch
        return owner.find(site, workdir, job_name)

    def cancel(self, site: SiteConfig, jobs: Sequence[JobRef]) -> list[str]:
        mine = [j for j in jobs if self.nested.owns(os.path.basename(j.workdir))]
        rest = [j for j in jobs if not self.nested.owns(os.path.basename(j.workdir))]
        return [*(self.batch.cancel(site, rest) if rest else []), *self.nested.cancel(site, mine)]

    def ended(self) -> bool | None:
        return self.batch.ended()  # a sub-workflow's end is seen at the poll

    def found_by_name(self, site: SiteConfig, cluster: str) -> bool:
        """A sub-workflow's nested pilot submit is recorded before it starts, as a batch job is."""
        return self.nested.owns(cluster) or self.batch.found_by_name(site, cluster)


def routed(
    batch: Backend, submit_dir: str, specs: Sequence[ClusterSpec], sites: dict[str, dict[str, Any]], opts: Options
) -> Backend:
    """``batch``, or a Routed over it when the plan has sub-workflows."""
    if not any(s.subworkflow is not None for s in specs):
        return batch
    return Routed(batch, NestedBackend(submit_dir, specs, sites, opts))


def write_outcome(result_file: str, submit_dir: str, code: int) -> None:
    """``pilot submit --result``: how a nested run ended, as a pilot run's ``<dag>.result`` says it (exit code
    0 done, 1 failed, 130 stopped by a signal, anything else: it could not run), with its tasks counted."""
    outcome = {0: RunOutcome.DONE, 1: RunOutcome.FAILED, 130: RunOutcome.SIGNAL}.get(code, RunOutcome.ERROR)
    tasks = done = 0
    unfinished: list[str] = []
    try:
        specs = read_clusters(submit_dir)
        state = SubmitState.load(submit_dir)
        records = state.clusters if state is not None else {}
        for s in specs:
            tasks += s.tasks
            if s.name in records and records[s.name].state is ClusterState.DONE:
                done += s.tasks
            else:
                unfinished.append(s.name)
    except ConfigError:
        pass  # the counts stay 0: the outcome is what matters
    write_result(result_file, RunResult(outcome, tasks, done, unfinished, code))
