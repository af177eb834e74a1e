"""One batch job's request: what the planner's script and ``pilot submit`` both ask for.

The planner writes the script for users to submit by hand, and ``pilot
submit`` hands the same request to the site's scheduler plug-in, which
renders the same template (``providers.script``), so what one would
``sbatch`` and what is submitted cannot drift.

The job runs pilot and its MPI launcher from the environment it was planned
from, by absolute path, whatever the job's PATH (a PBS job does not inherit
the submitter's; ``module load`` lines may put another MPI first):
``pilot_command: pilot`` becomes this environment's ``pilot`` script (or
``python -m pilot``), and ``launcher: mpiexec``/``mpirun`` the one beside this
Python when there is one (the mpich wheel's). ``launcher_from: path`` keeps the
bare name for a site MPI module that ``worker_init`` loads; ``srun``, ``aprun``
and ``ibrun`` are always the batch system's own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from pilot.sites import SiteConfig
from pilot.siteschema import format_walltime
from pilot.util import safetext
from providers.launchers import SITE_LAUNCHERS, launch_line, split

# Below 10 minutes Pegasus' 5-minute margin would leave nothing: keep 10%, at
# least 30 s, at most half.
PEGASUS_MARGIN_MIN = 5.0


def pilot_wall_time(walltime_minutes: float) -> float:
    """Minutes given to ``pilot run --max-wall-time`` inside a batch job of this length."""
    if walltime_minutes > 10:
        return walltime_minutes - PEGASUS_MARGIN_MIN
    margin = min(max(walltime_minutes * 0.1, 0.5), walltime_minutes / 2)
    return round(walltime_minutes - margin, 3)


def host_options(site: SiteConfig) -> list[str]:
    """What one host offers the pilot's tasks; tasks' -c/-m/-g then pack the workers' slots."""
    opts = []
    if site.cores_per_node:
        opts += ["--host-cpus", str(site.cores_per_node)]
    if site.memory_per_node_mb:
        opts += ["--host-memory", str(site.memory_per_node_mb)]
    if site.gpus_per_node is not None:
        opts += ["--host-gpus", str(site.gpus_per_node)]
    if site.max_crashes is not None:
        opts += ["--max-crashes", str(site.max_crashes)]
    return opts


def pilot_args(
    site: SiteConfig, dag_name: str, walltime_minutes: float | None = None, extra: Sequence[str] = ()
) -> list[str]:
    """``pilot run`` options for a cluster's batch job on ``site`` (planner scripts and pilot submit alike), whose
    walltime is ``walltime_minutes`` (None: the site's); ``extra``: the cluster's own (its task files,
    ClusterSpec.run_options), before the DAG, which comes last."""
    # -o/-e and the invocation records make <cluster>.out the job output pegasus-monitord reads (no file per task);
    # a worker starts a job's container once and runs its tasks of that image in it (pilot.runtime.instances).
    base = dag_name[:-4] if dag_name.endswith(".dag") else dag_name
    return [
        "--max-wall-time",
        f"{pilot_wall_time(walltime_minutes or site.walltime_minutes):g}",
        "--jobstate-log",
        "--invocation-records",
        "-o",
        base + ".out",
        "-e",
        base + ".err",
        "--containers",
        "once",
        *host_options(site),
        *split(site.pilot_options),
        *extra,
        dag_name,
    ]


@dataclass
class JobRequest:
    name: str
    workdir: str
    nodes: int
    ranks_per_node: int
    walltime_minutes: float
    pilot_args: list[str]
    queue: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    exclusive: bool = False
    scheduler_options: list[str] = field(default_factory=list)
    worker_init: list[str] = field(default_factory=list)
    launcher: str = "mpiexec"
    launcher_options: str = ""
    pilot_command: list[str] = field(default_factory=lambda: ["pilot"])

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def walltime(self) -> str:
        return format_walltime(self.walltime_minutes)

    def launch_prefix(self) -> list[str]:
        """The MPI launcher that starts ONE job of ``ranks`` ranks over all nodes."""
        return launch_line(self.launcher, self.launcher_options, self.nodes, self.ranks_per_node)

    def command(self) -> list[str]:
        return [*self.launch_prefix(), *self.pilot_command, "run", *self.pilot_args]

    def command_line(self) -> str:
        return safetext.shell_line(self.command(), "the pilot's command")

    def body(self) -> str:
        """What the job runs: worker_init, then the pilot in its directory."""
        cd = f"cd {safetext.shell_word(self.workdir, 'the cluster directory')} || exit 1"
        return "\n".join([*self.worker_init, cd, self.command_line()]) + "\n"


def environment_bin() -> str:
    """The bin directory of the Python environment pilot runs in (not resolved: a venv's python is a link)."""
    return os.path.dirname(os.path.abspath(sys.executable))


def resolve_launcher(site: SiteConfig) -> str:
    """Absolute path of mpiexec/mpirun from the planning environment when it has one (see module doc)."""
    if os.path.isabs(site.launcher) or site.launcher in SITE_LAUNCHERS or site.launcher_from == "path":
        return site.launcher
    here = os.path.join(environment_bin(), site.launcher)
    return here if os.access(here, os.X_OK) else site.launcher


def resolve_pilot(site: SiteConfig) -> list[str]:
    command = list(split(site.pilot_command))
    if command != ["pilot"]:
        return command
    here = os.path.join(environment_bin(), "pilot")
    return [here] if os.access(here, os.X_OK) else [os.path.abspath(sys.executable), "-m", "pilot"]


def request_for(
    site: SiteConfig,
    name: str,
    workdir: str,
    pilot_args: list[str],
    ranks: int | None = None,
    walltime_minutes: float | None = None,
    queue: str | None = None,
    account: str | None = None,
    directives: tuple[str, ...] = (),
    nodes: int | None = None,
    ranks_per_node: int | None = None,
) -> JobRequest:
    """Size a job on ``site``: at most the site's nodes x ranks_per_node, fewer if ``ranks`` is smaller.
    ``queue``, ``account`` and ``directives`` (whole directive lines) are what the cluster's jobs ask for
    over the site's values, ``nodes``, ``ranks_per_node`` and ``walltime_minutes`` what the aggregator's entry
    sizes a clustered job with, as exactly as Pegasus asks for a PMC job (pilot.planner.batchopts; checked
    against the site there): ``nodes`` given, ``ranks`` is not read; ``ranks_per_node`` alone spreads ``ranks``
    over as many nodes as they need."""
    rpn = ranks_per_node or site.ranks_per_node or 2
    if nodes is None:
        nodes = site.nodes
        if ranks is not None:
            ranks = max(2, ranks)
            nodes = max(1, min(site.nodes, -(-ranks // rpn)))
            if nodes == 1 and ranks_per_node is None:
                rpn = min(rpn, ranks)
    return JobRequest(
        name=name,
        workdir=workdir,
        nodes=nodes,
        ranks_per_node=rpn,
        walltime_minutes=walltime_minutes or site.walltime_minutes,
        pilot_args=pilot_args,
        queue=queue or site.batch_queue,
        account=account or site.account,
        qos=site.qos,
        constraint=site.constraint,
        exclusive=bool(site.exclusive),
        scheduler_options=[*site.scheduler_options, *directives],
        worker_init=list(site.worker_init),
        launcher=resolve_launcher(site),
        launcher_options=site.launcher_options,
        pilot_command=resolve_pilot(site),
    )
