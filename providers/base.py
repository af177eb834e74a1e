"""What a scheduler plug-in provides: the interface every ``providers/<scheduler>.py`` implements.

A scheduler is one subclass of ``Scheduler`` registered in ``providers.SCHEDULERS``.
Every fact about its batch system lives there, and nowhere else in pilot:

- ``template`` and ``directives(req)``: its batch-script template, a file in
  ``providers/templates/`` shipped as package data (rendered by
  ``providers.script.render``), and the values of its directive lines;
- ``suffix`` and ``parsl_suffix``: the file names of the scripts the planner
  and Parsl's provider write in a cluster's directory;
- ``directive_prefix`` and ``memory_directive``: the directive lines a site's
  ``scheduler_options`` and a workflow's profiles may add;
- ``single_host`` and ``pegasus_name``: whether its jobs run on this machine,
  and the batch system Pegasus' site catalog calls it;
- ``hosts_command``: the shell command, run inside a job, that prints the job's
  hosts once each (a pilot job names its nodes by it);
- ``make_provider(site)`` and ``size(provider, req)``: the Parsl provider that submits
  that very script, and one cluster's size and queue given to it;
- ``query_command(ids)`` and ``parse_query(ids, output)``: asking the queue about
  our own job ids only, and a pure parser of its answer (tested on captured output);
- ``pending_reasons`` (with ``reason_code``, the key in a reason as the scheduler
  prints it): what the scheduler's pending reasons mean, and whether waiting cures
  each; the parser judges a job by them (``status``), and the driver fails a job
  that never starts instead of waiting forever;
- ``find`` and ``track``: finding a job after a restart.

The MPI launcher line (ranks over all nodes of the job) belongs to the launcher a
site names, not to its scheduler: ``srun`` under Slurm, ``mpiexec`` under PBS,
Slurm or none alike. ``providers/launchers.py`` holds one builder per launcher.

docs/new-scheduler.md walks through adding one.
"""

from __future__ import annotations

import abc
import enum
import glob
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pilot.contracts.queue import QueueState, QueueStatus
from providers.commands import Output, run_command
from providers.inputs import Request, Site


class Outlook(enum.Enum):
    """What waiting does for a job pending for a reason."""

    STARTS = "starts"  # it starts once what it waits for comes: free nodes, its turn, a dependency, a limit's room
    HELD = "held"  # it waits until its owner or an administrator releases it
    NEVER = "never"  # it never starts: the request exceeds what the scheduler will ever give


@dataclass(frozen=True)
class PendingReason:
    """What one of the scheduler's pending reasons means, and what waiting does for it."""

    meaning: str
    outlook: Outlook = Outlook.STARTS

    @property
    def never_starts(self) -> bool:
        return self.outlook is Outlook.NEVER


class Scheduler(abc.ABC):
    """One batch system. Subclasses are stateless: one instance serves every site of that scheduler."""

    name: ClassVar[str]  # a site's ``scheduler:`` value
    template: ClassVar[str]  # file name in providers/templates/
    suffix: ClassVar[str]  # the planner's batch script in a cluster's directory: <cluster><suffix>
    # the script Parsl's provider writes there: <job name>.<time><suffix> ("": Slurm's and PBSPro's have none)
    parsl_suffix: ClassVar[str] = ".submit"
    directive_prefix: ClassVar[str] = ""  # "#SBATCH", "#PBS": lines the site's scheduler_options may add
    memory_directive: ClassVar[str | None] = None  # the line a job's memory request (MB) becomes: "#SBATCH --mem={}"
    single_host: ClassVar[bool] = False  # jobs run on this machine: one node, more ranks are more ranks per node
    pegasus_name: ClassVar[str]  # its name among the schedulers of Pegasus' site catalog (grids[].scheduler)
    hosts_command: ClassVar[str] = ""  # inside a job: prints its hosts, once each, in order ("": single_host)
    pending_reasons: ClassVar[Mapping[str, PendingReason]] = {}

    @abc.abstractmethod
    def directives(self, req: Request) -> dict[str, str | None]:
        """Template values for the directive lines (None leaves the line out)."""

    @abc.abstractmethod
    def make_provider(self, site: Site) -> Any:
        """The Parsl provider for ``site``; it submits the script ``providers.script.render`` writes."""

    def size(self, provider: Any, req: Request) -> None:
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
        """A status for every id in ``job_ids`` from the command's output (no I/O); a job the scheduler no
        longer knows is FINISHED; a job it lists with a state and a reason gets ``status(state, reason)``.
        Raises ``SubmitError(transient=True)`` (``out.failure()``) when the output says the command itself
        failed."""

    def query(self, site: Site, job_ids: Sequence[str]) -> dict[str, QueueStatus]:
        if not job_ids:
            return {}
        return self.parse_query(job_ids, run_command(self.query_command(job_ids), site.cmd_timeout))

    def reason_code(self, reason: str) -> str:
        """The key of ``pending_reasons`` in a reason as the scheduler printed it: the whole text, unless the
        scheduler puts details after its code."""
        return reason.strip()

    def pending(self, reason: str) -> PendingReason | None:
        """The entry of ``pending_reasons`` for a reason as the scheduler printed it (None: not one it lists)."""
        return self.pending_reasons.get(self.reason_code(reason))

    def status(self, state: QueueState, reason: str) -> QueueStatus:
        """A listed job's status, judged by ``pending_reasons``: a pending job whose reason holds it is HELD, one
        whose reason waiting cannot cure never starts; the reason's meaning goes with it."""
        known = self.pending(reason) if state in (QueueState.PENDING, QueueState.HELD) else None
        if known is None:
            return QueueStatus(state, reason)
        if state is QueueState.PENDING and known.outlook is Outlook.HELD:
            state = QueueState.HELD
        return QueueStatus(state, reason, state is QueueState.PENDING and known.never_starts, known.meaning)

    @abc.abstractmethod
    def find(self, site: Site, workdir: str, job_name: str) -> str | None:
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
            provider.resources.setdefault(
                job_id,
                {
                    "job_id": job_id,
                    "status": JobStatus(JobState.PENDING),
                    "job_stdout_path": out,
                    "job_stderr_path": err,
                },
            )
