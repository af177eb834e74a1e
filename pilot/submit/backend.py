"""What the driver asks of batch systems, and the real implementation over the scheduler plug-ins.

The driver talks to a ``Backend`` only: submit one cluster's job, ask the
queue about jobs, find a job by its unique name (a submission in doubt), and
cancel jobs. ``SchedulerBackend`` does it with Parsl providers (submission and
cancel) and each scheduler's own ``query`` (job states with pending reasons:
Parsl's status cannot give reasons and reports a vanished job as completed).
Tests drive the same state machine with a fake backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pilot.contracts.queue import QueueState, QueueStatus
from pilot.errors import SubmitError
from pilot.jobrequest import JobRequest
from pilot.sites import SiteConfig


@dataclass(frozen=True)
class Submitted:
    job_id: str
    stdout: str | None = None  # where the batch job's own stdout/stderr go
    stderr: str | None = None
    # A batch job in a scheduler's queue: the driver records its id at once. False: a cluster handed to a running
    # pilot job within milliseconds, recorded with the pass's other changes (a driver that dies before finds its
    # run by the DAG lock and its pilot job in pilots.json).
    queued: bool = True


@dataclass(frozen=True)
class JobRef:
    job_id: str | None  # None: a submission in doubt, to be found by name
    workdir: str
    job_name: str


class Backend(Protocol):
    def submit(self, site: SiteConfig, req: JobRequest, job_name: str) -> Submitted:
        """Submit; SubmitError(transient=...) when the scheduler refused or could not be reached."""

    def query(self, site: SiteConfig, job_ids: Sequence[str]) -> dict[str, QueueStatus]:
        """The queue's view of exactly these jobs; SubmitError(transient=True) when it cannot be asked."""

    def find(self, site: SiteConfig, workdir: str, job_name: str) -> str | None:
        """The id of the job submitted as ``job_name``: "" when the queue has none, None when it cannot be asked."""

    def cancel(self, site: SiteConfig, jobs: Sequence[JobRef]) -> list[str]:
        """Cancel these jobs (finding those in doubt by name); return the ids cancelled. SubmitError when one
        could not be cancelled, or the queue could not be asked whether it exists."""

    def ended(self) -> bool | None:
        """Between polls: whether a job may have ended since the last look, learnt without asking the queue
        (True ends the driver's wait early); None when the backend cannot tell (the driver sleeps the poll)."""

    def found_by_name(self, site: SiteConfig, cluster: str) -> bool:
        """Whether submitting ``cluster`` to ``site`` starts what a restarted driver can only find by the cluster's
        job name (a batch job, a nested pilot submit): the driver then records the cluster as SUBMITTING, with
        that name, before it submits. False where the cluster is handed to a running pilot job, whose run a
        restart finds by the cluster's DAG lock."""


class SchedulerBackend:
    """Parsl providers, made on first use per site (SlurmProvider's constructor runs a command)."""

    def __init__(self) -> None:
        self._providers: dict[str, Any] = {}

    def provider(self, site: SiteConfig) -> Any:
        from providers import provider_for

        if site.name not in self._providers:
            self._providers[site.name] = provider_for(site)
        return self._providers[site.name]

    def submit(self, site: SiteConfig, req: JobRequest, job_name: str) -> Submitted:
        from providers import submit

        provider = self.provider(site)
        job_id = submit(provider, site, req, job_name)
        return Submitted(job_id, *_stdio(provider, job_id))

    def query(self, site: SiteConfig, job_ids: Sequence[str]) -> dict[str, QueueStatus]:
        from providers import query

        return query(site, job_ids)

    def find(self, site: SiteConfig, workdir: str, job_name: str) -> str | None:
        from providers import find

        return find(site, workdir, job_name)

    def ended(self) -> None:
        """A batch job's end is learnt from its queue only (at the next poll)."""
        return None

    def found_by_name(self, site: SiteConfig, cluster: str) -> bool:  # noqa: ARG002 - the Backend's signature
        """Every cluster is a batch job of its own."""
        return True

    def cancel(self, site: SiteConfig, jobs: Sequence[JobRef]) -> list[str]:
        """Cancel what the queue has of ``jobs``; SubmitError(transient=True) naming what could not be cancelled
        (the queue could not be asked for a job in doubt, or the cancel command failed): a cancel that
        said nothing of a job it left running would let pilot cancel report a run ended that is not."""
        from providers import track

        provider = self.provider(site)
        known: list[tuple[str, str, str]] = []
        unknown: list[str] = []
        for job in jobs:
            job_id = job.job_id or self.find(site, job.workdir, job.job_name)
            if job_id:
                known.append((job_id, job.workdir, job.job_name))
            elif job_id is None:
                unknown.append(job.job_name)
        track(site, provider, known)  # a fresh provider cancels only jobs it knows
        resources = getattr(provider, "resources", None)
        if resources is not None:  # a job it could not take over (a local job whose script is gone) is not running
            known = [k for k in known if k[0] in resources]
        ids = [j for j, _, _ in known]
        try:
            done = provider.cancel(ids) if ids else []
        except Exception as exc:  # Parsl raises SubmitException, OSError, a timeout, ...
            raise SubmitError(f"{site.name}: cancelling job(s) {' '.join(ids)} failed: {exc}", transient=True) from exc
        refused = [j for j, ok in zip(ids, done or [True] * len(ids)) if not ok]
        if refused:  # scancel/qdel also fail for a job that has just ended: only one still in the queue is left
            try:
                statuses = self.query(site, refused)
                refused = [j for j in refused if statuses[j].state is not QueueState.FINISHED]
            except SubmitError:
                pass
        if unknown or refused:
            said = [f"the queue could not be asked for job(s) {' '.join(unknown)}"] if unknown else []
            said += [f"the cancel command failed for job(s) {' '.join(refused)}"] if refused else []
            raise SubmitError(f"{site.name}: {'; '.join(said)}", transient=True)
        return ids


def _stdio(provider: Any, job_id: str) -> tuple[str | None, str | None]:
    """Where Parsl sent the job's stdout/stderr (batch providers record it; LocalProvider uses <script>.out/.err)."""
    rec = getattr(provider, "resources", {}).get(job_id, {})
    if rec.get("job_stdout_path"):
        return rec["job_stdout_path"], rec.get("job_stderr_path")
    script = rec.get("script_path")
    if script:
        return script + ".out", script + ".err"
    return None, None
