"""What a scheduler plug-in provides: the interface every ``providers/<scheduler>.py`` implements.

A scheduler is one subclass of ``Scheduler`` registered in ``providers.SCHEDULERS``:

- ``template``: its batch-script template, a file in ``providers/templates/``
  shipped as package data (rendered by ``providers.script.render``);
- ``directives(req)``: the values that go into that template's directive lines;
- ``make_provider(site)``: the Parsl provider that submits that very script;
- ``query_command(ids)`` and ``parse_query(ids, output)``: asking the queue about
  our own job ids only, and a pure parser of its answer (tested on captured output);
- ``pending_reasons``: what the scheduler's pending reasons mean, and which of them
  waiting cannot cure (the driver fails such a job instead of waiting forever);
- ``find`` and ``track``: finding a job after a restart.

The MPI launcher line (ranks over all nodes of the job) belongs to the launcher a
site names, not to its scheduler: ``srun`` under Slurm, ``mpiexec`` under PBS,
Slurm or none alike. ``providers/launchers.py`` holds one builder per launcher.

docs/new-scheduler.md walks through adding one.
"""

from __future__ import annotations

import abc
import glob
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

from providers.commands import Output, run_command
from providers.queue import QueueStatus

if TYPE_CHECKING:
    from pilot.jobrequest import JobRequest
    from pilot.sites import SiteConfig


@dataclass(frozen=True)
class PendingReason:
    """What one of the scheduler's pending reasons means, and whether waiting can cure it."""

    meaning: str
    never_starts: bool = False


class Scheduler(abc.ABC):
    """One batch system. Subclasses are stateless: one instance serves every site of that scheduler."""

    name: ClassVar[str]
    template: ClassVar[str]  # file name in providers/templates/
    suffix: ClassVar[str]  # the batch script's file suffix in a submit directory
    directive_prefix: ClassVar[str] = ""  # "#SBATCH", "#PBS": lines the site's scheduler_options may add
    pending_reasons: ClassVar[Mapping[str, PendingReason]] = {}

    @abc.abstractmethod
    def directives(self, req: "JobRequest") -> dict[str, str | None]:
        """Template values for the directive lines (None leaves the line out)."""

    @abc.abstractmethod
    def make_provider(self, site: "SiteConfig") -> Any:
        """The Parsl provider for ``site``; it submits the script ``providers.script.render`` writes."""

    def size(self, provider: Any, req: "JobRequest") -> None:
        """Tell the provider one cluster's size (Parsl keeps nodes and walltime per provider)."""
        provider.nodes_per_block = req.nodes
        provider.walltime = req.walltime
        # The cluster's own queue and account (its jobs' profiles) over the site's, as in its script.
        for attr, value in (("partition", req.queue), ("queue", req.queue), ("account", req.account)):
            if value is not None and hasattr(provider, attr):
                setattr(provider, attr, value)

    @abc.abstractmethod
    def query_command(self, job_ids: Sequence[str]) -> list[str]:
        """The command that asks about exactly these jobs."""

    @abc.abstractmethod
    def parse_query(self, job_ids: Sequence[str], out: Output) -> dict[str, QueueStatus]:
        """A status for every id in ``job_ids`` from the command's output; a job the scheduler no
        longer knows is FINISHED. Raises ``SubmitError(transient=True)`` (``out.failure()``) when
        the output says the command itself failed."""

    def query(self, site: "SiteConfig", job_ids: Sequence[str]) -> dict[str, QueueStatus]:
        if not job_ids:
            return {}
        return self.parse_query(job_ids, run_command(self.query_command(job_ids), site.cmd_timeout))

    def reason(self, code: str) -> PendingReason | None:
        """The entry of ``pending_reasons`` for a reason as the scheduler printed it."""
        return self.pending_reasons.get(code)

    @abc.abstractmethod
    def find(self, site: "SiteConfig", workdir: str, job_name: str) -> str | None:
        """The id of the job submitted as ``job_name`` (Parsl appends ``.<timestamp>``): "" when the
        queue has none; None when the queue could not be asked."""

    def track(self, provider: Any, jobs: Sequence[tuple[str, str, str]]) -> None:
        """Let a fresh provider follow (job id, cluster directory, job name) jobs an earlier process submitted."""
        from parsl.jobs.states import JobState, JobStatus

        for job_id, workdir, job_name in jobs:
            # Parsl names the output <script_dir>/<job name>.<timestamp>.stdout/.stderr
            found = sorted(glob.glob(os.path.join(glob.escape(workdir), glob.escape(job_name) + ".*.stdout")))
            out = found[-1] if found else os.devnull
            err = out[: -len(".stdout")] + ".stderr" if found else os.devnull
            provider.resources.setdefault(job_id, {"job_id": job_id, "status": JobStatus(JobState.PENDING),
                                                   "job_stdout_path": out, "job_stderr_path": err})
