"""One batch job's request, and the batch scripts made from it.

The planner writes these scripts for users to submit by hand, and ``pilot
submit`` hands the same request to a Parsl provider, so what one would
``sbatch`` and what is submitted cannot drift. Every value that reaches the
shell is quoted with shlex.quote; values in #SBATCH/#PBS directives are
checked to be plain words when the site config is loaded.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass, field

from pilot.sites import SiteConfig, format_walltime

_PLAIN_PATH = re.compile(r"[A-Za-z0-9_.,:=@+/%-]+\Z")

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
    opts = []
    if site.cores_per_node:
        opts += ["--host-cpus", str(site.cores_per_node)]
    if site.memory_per_node_mb:
        opts += ["--host-memory", str(site.memory_per_node_mb)]
    if site.gpus_per_node is not None:
        opts += ["--host-gpus", str(site.gpus_per_node)]
    return opts


def pilot_args(site: SiteConfig, dag_name: str) -> list[str]:
    """``pilot run`` options for a cluster's batch job on ``site`` (planner scripts and pilot submit alike)."""
    # -o/-e and the invocation records make <cluster>.out the job output pegasus-monitord reads (no file per task).
    base = dag_name[:-4] if dag_name.endswith(".dag") else dag_name
    return ["--max-wall-time", f"{pilot_wall_time(site.walltime_minutes):g}", "--jobstate-log", "--invocation-records",
            "-o", base + ".out", "-e", base + ".err", *host_options(site), *shlex.split(site.pilot_options), dag_name]


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
    scheduler_options: str = ""
    worker_init: str = ""
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
        """The MPI launcher that starts ONE job of ``ranks`` ranks."""
        extra = shlex.split(self.launcher_options)
        n = str(self.ranks)
        name = os.path.basename(self.launcher)
        if name == "srun":
            return ["srun", *extra, "-n", n, "--ntasks-per-node", str(self.ranks_per_node)]
        if name == "aprun":
            return ["aprun", *extra, "-n", n, "-N", str(self.ranks_per_node)]
        if name == "ibrun":
            return ["ibrun", *extra, "-n", n]
        return [self.launcher, *extra, "-n", n]

    def command(self) -> list[str]:
        return [*self.launch_prefix(), *self.pilot_command, "run", *self.pilot_args]

    def command_line(self) -> str:
        return " ".join(shlex.quote(a) for a in self.command())

    def body(self) -> str:
        """What the job runs: worker_init, then the pilot in its directory."""
        lines = []
        if self.worker_init.strip():
            lines.append(self.worker_init.rstrip())
        lines.append(f"cd {shlex.quote(self.workdir)} || exit 1")
        lines.append(self.command_line())
        return "\n".join(lines) + "\n"


def request_for(site: SiteConfig, name: str, workdir: str, pilot_args: list[str], ranks: int | None = None,
                walltime_minutes: float | None = None) -> JobRequest:
    """Size a job on ``site``: at most the site's nodes x ranks_per_node, fewer if ``ranks`` is smaller."""
    rpn = site.ranks_per_node
    nodes = site.nodes
    if ranks is not None:
        ranks = max(2, ranks)
        nodes = max(1, min(site.nodes, -(-ranks // rpn)))
        if nodes == 1:
            rpn = min(rpn, ranks)
    launcher, pilot_command = site.launcher, shlex.split(site.pilot_command)
    if site.scheduler == "local":
        # No batch system: run the pilot and the MPI launcher of this very environment.
        here = os.path.join(os.path.dirname(sys.executable), launcher)
        if os.path.exists(here):
            launcher = here
        if pilot_command == ["pilot"]:
            pilot_command = [sys.executable, "-m", "pilot"]
    return JobRequest(
        name=name,
        workdir=workdir,
        nodes=nodes,
        ranks_per_node=rpn,
        walltime_minutes=walltime_minutes or site.walltime_minutes,
        pilot_args=pilot_args,
        queue=site.batch_queue,
        account=site.account,
        qos=site.qos,
        constraint=site.constraint,
        exclusive=bool(site.exclusive),
        scheduler_options=site.scheduler_options,
        worker_init=site.worker_init,
        launcher=launcher,
        launcher_options=site.launcher_options,
        pilot_command=pilot_command,
    )


def _plain_workdir(req: JobRequest) -> bool:
    """Directives cannot quote: name the directory there only when it is a plain word."""
    return bool(_PLAIN_PATH.match(req.workdir))


def slurm_script(req: JobRequest) -> str:
    d = [
        f"#SBATCH --job-name={req.name}",
        f"#SBATCH --nodes={req.nodes}",
        f"#SBATCH --ntasks-per-node={req.ranks_per_node}",
        f"#SBATCH --time={req.walltime}",
    ]
    if _plain_workdir(req):
        d.append(f"#SBATCH --chdir={req.workdir}")  # output files land next to the DAG wherever sbatch runs
    d += [f"#SBATCH --output={req.name}.batch.out", f"#SBATCH --error={req.name}.batch.err"]
    for flag, value in (("partition", req.queue), ("account", req.account), ("qos", req.qos), ("constraint", req.constraint)):
        if value:
            d.append(f"#SBATCH --{flag}={value}")
    if req.exclusive:
        d.append("#SBATCH --exclusive")
    return _script(d, req)


def pbs_script(req: JobRequest, flavor: str = "pbspro") -> str:
    if flavor == "pbspro":
        d = [f"#PBS -N {req.name}", f"#PBS -l select={req.nodes}:mpiprocs={req.ranks_per_node}"]
    else:
        d = [f"#PBS -N {req.name}", f"#PBS -l nodes={req.nodes}:ppn={req.ranks_per_node}"]
    out = f"{req.workdir}/{req.name}" if _plain_workdir(req) else req.name
    d += [f"#PBS -l walltime={req.walltime}", f"#PBS -o {out}.batch.out", f"#PBS -e {out}.batch.err"]
    if req.queue:
        d.append(f"#PBS -q {req.queue}")
    if req.account:
        d.append(f"#PBS -A {req.account}")
    if req.constraint and flavor == "pbspro":
        d[1] += f":{req.constraint}"
    return _script(d, req)


def local_script(req: JobRequest) -> str:
    return _script([], req)


def _script(directives: list[str], req: JobRequest) -> str:
    head = ["#!/bin/bash", *directives]
    if req.scheduler_options.strip():
        head.append(req.scheduler_options.rstrip())
    head.append(f"# pilot job {req.name}: {req.ranks} MPI ranks, walltime {req.walltime}")
    return "\n".join(head) + "\n" + req.body()


def script_for(site: SiteConfig, req: JobRequest) -> tuple[str, str]:
    """(file suffix, script text) for the site's scheduler."""
    if site.scheduler == "slurm":
        return ".slurm", slurm_script(req)
    if site.scheduler in ("pbspro", "torque"):
        return ".pbs", pbs_script(req, site.scheduler)
    return ".sh", local_script(req)
