"""Pilot jobs (blocks) through Parsl: one MPIExecutor per block, driven by pilot's driver.

Parsl's HighThroughputExecutor in MPI mode (``MPIExecutor``) is the engine: its
provider submits the block through the site's scheduler, its worker pool runs
inside the block, its interchange hands an app to the pool, and the pool
reserves room for the app in the block and fails it back when the block is
lost. Measured against what late binding needs, four things of it do
not fit, and the driver does them instead:

- placement: one executor serves all its blocks and picks the block itself
  (two clusters can queue inside one busy block while another is idle), so
  each block gets an executor of its own, and the driver picks the block by
  free slots and time left;
- scaling: Parsl's strategy counts apps, not nodes, and resubmits blocks that
  fail at start without end, so no strategy runs: the driver adds and ends
  blocks (``start_block``/``end_block``);
- restart: a new executor cannot take over a running block, so each block's
  batch job id is recorded (pilot.submit.pilots) and a restarted driver ends
  the blocks it finds there;
- sharing a node: the pool gives an app whole nodes, so a node of 32 cores
  would run one cluster of 3 ranks. The driver places each cluster on slots
  (cores) of named nodes of the block instead (``Block.fit``), the pool sees
  each node once per slot (so its count of free "nodes" is the count of free
  slots, and it never holds back an app the driver placed), and the app
  starts its launch on the nodes the driver chose.

Each executor is used directly (no DataFlowKernel): the driver polls, and an
app is a plain function (pilot.submit.blockapp.run_cluster).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from pilot.jobrequest import JobRequest, environment_bin
from pilot.sites import SiteConfig
from pilot.submit.blockapp import SET_ASIDE

log = logging.getLogger("pilot.submit")
HEARTBEAT = (5, 20)  # seconds: a pool silent this long is lost, and its apps are failed back


Placement = tuple[tuple[int, ...], int]  # the block's nodes (indices) an app runs on, and the slots it takes on each


@dataclass
class Block:
    """One pilot job: its executor, its batch job, its nodes (each of ``slots`` cores) and the clusters in it."""

    label: str
    site: str
    nodes: int
    walltime_s: float
    slots: int = 1  # per node: the ranks it can run at once
    executor: Any = None
    job_id: str = ""
    script_dir: str = ""
    job_name: str = ""  # the batch job's name (LocalProvider: its script's name): a local job id is checked against it
    interchange_pid: int = 0
    submitted: float = 0.0
    running_since: float | None = None  # when its worker pool was first seen connected
    idle_since: float = field(default_factory=time.monotonic)
    apps: dict[str, Placement] = field(default_factory=dict)  # job id -> where it runs
    used: list[int] = field(default_factory=list)  # slots taken on each node
    agent: Future | None = None  # its long-lived pilot run, fed clusters through ``inbox`` (pilot.submit.feed)

    def __post_init__(self) -> None:
        self.used = self.used or [0] * self.nodes

    @property
    def free_slots(self) -> int:
        return self.nodes * self.slots - sum(self.used)

    def fit(self, nodes: int, per_node: int) -> tuple[int, ...] | None:
        """``nodes`` nodes with ``per_node`` free slots each, the fullest first (so whole nodes stay free for
        clusters that need them); None when the block has no room for it now."""
        room = sorted(
            (i for i in range(self.nodes) if self.slots - self.used[i] >= per_node),
            key=lambda i: (self.slots - self.used[i], i),
        )
        return tuple(sorted(room[:nodes])) if len(room) >= nodes else None

    def take(self, job_id: str, where: tuple[int, ...], per_node: int) -> None:
        self.apps[job_id] = (where, per_node)
        for i in where:
            self.used[i] += per_node

    def give(self, job_id: str) -> None:
        """Free what an app held (nothing when it held nothing here)."""
        where, per_node = self.apps.pop(job_id, ((), 0))
        for i in where:
            self.used[i] -= per_node

    @property
    def inbox(self) -> str:
        return os.path.join(self.script_dir, "inbox")

    @property
    def margin(self) -> float:
        """Seconds of its end no cluster starts in: a minute, less for a short block (a tenth of it)."""
        return min(60.0, self.walltime_s / 10)

    def time_left(self, now: float) -> float:
        """Seconds of wall time left (the whole of it while it waits in the queue)."""
        start = self.running_since if self.running_since is not None else now
        return self.walltime_s - (now - start)

    def record(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "site": self.site,
            "job_id": self.job_id,
            "script_dir": self.script_dir,
            "job_name": self.job_name,
            "interchange_pid": self.interchange_pid,
            "nodes": self.nodes,
        }


def mpi_launcher(site: SiteConfig) -> tuple[str, str]:
    """(Parsl's mpi_launcher, the flag naming hosts) for the site's launcher; srun and hydra's mpiexec only."""
    name = os.path.basename(site.launcher)
    if name == "srun":
        return "srun", "--nodelist"
    if name == "mpiexec":
        return "mpiexec", "-hosts"
    raise ValueError(f"launcher {site.launcher!r}: pilot jobs start clusters with srun or mpiexec (hydra)")


def node_slots(site: SiteConfig) -> int:
    """The ranks a block's node runs at once: its cores when the site says, else the site's ranks per node."""
    return max(site.cores_per_node or 0, site.ranks_per_node or 1)


def block_request(site: SiteConfig, nodes: int, slots: int, walltime_minutes: float, workdir: str) -> JobRequest:
    """How the scheduler plug-in sizes a block's batch job: ``nodes`` nodes of ``slots`` tasks each (wall time,
    queue and account from the site)."""
    from pilot.jobrequest import request_for

    req = request_for(site, "pilot-block", workdir, [], walltime_minutes=walltime_minutes)
    return dataclasses.replace(req, nodes=nodes, ranks_per_node=slots)


def node_lines(site: SiteConfig, block_dir: str, nodes: int, slots: int) -> list[str]:
    """Shell lines of the block's script, before its worker pool starts: the block's hosts, once each, into
    ``hosts`` (what the app names its nodes by, in ``PILOT_BLOCK_HOSTS``; the scheduler plug-in says how to
    list them), and each host once per slot into the node file the pool counts (``PBS_NODEFILE``). The
    scheduler's own node list is set aside (``PILOT_<name>``), as the pool would read Slurm's first; the app
    puts it back for its launcher."""
    from providers import scheduler_for

    scheduler = scheduler_for(site)
    hosts, units = (shlex.quote(os.path.join(block_dir, f)) for f in ("hosts", "units"))
    if scheduler.single_host:  # the "nodes" of this machine
        with open(os.path.join(block_dir, "hosts"), "w", encoding="utf-8") as fh:
            fh.write("localhost\n" * nodes)
        lines = []
    else:
        lines = [f"{scheduler.hosts_command} > {hosts}"]
    for name in SET_ASIDE:
        lines.append(f'[ -z "${{{name}+x}}" ] || export PILOT_{name}="${name}"')
    return [
        *lines,
        "unset SLURM_NODELIST",
        f"awk '{{for (i = 0; i < {slots}; i++) print}}' {hosts} > {units}",
        f"export PBS_NODEFILE={units} PILOT_BLOCK_HOSTS={hosts}",
    ]


def add_site_directives(provider: Any, site: SiteConfig) -> None:
    """The site's ``scheduler_options`` lines (a constraint, a reservation, a start time) into the script Parsl
    writes for a pilot job, as a cluster's own batch job carries them: a pilot job asks for what its clusters'
    jobs would. A provider without directives (the local one) takes none."""
    if site.scheduler_options and hasattr(provider, "scheduler_options"):
        provider.scheduler_options += "".join(f"{line}\n" for line in site.scheduler_options)


def start_block(
    site: SiteConfig, label: str, nodes: int, walltime_minutes: float, run_dir: str, apps: int = 0
) -> Block:
    """A new executor with its interchange, and its one block submitted to the site's scheduler; ``apps``:
    the most clusters it may run at once (its pool's workers; default one per node)."""
    from parsl.executors import MPIExecutor
    from parsl.executors.high_throughput.executor import DEFAULT_LAUNCH_CMD

    from providers import provider_for, scheduler_for

    bin_dir = environment_bin()
    block_dir = os.path.join(run_dir, label)
    os.makedirs(block_dir, exist_ok=True)
    slots = node_slots(site)
    scheduler, provider = scheduler_for(site), provider_for(site)
    scheduler.size(provider, block_request(site, nodes, slots, walltime_minutes, block_dir))
    provider.nodes_per_block = nodes
    provider.init_blocks, provider.min_blocks, provider.max_blocks = 0, 0, 1
    provider.script_dir = block_dir
    provider.block_ranks = slots
    add_site_directives(provider, site)
    provider.worker_init = "\n".join([*site.worker_init, *node_lines(site, block_dir, nodes, slots)])
    launcher, _ = mpi_launcher(site)
    executor = MPIExecutor(
        label=label,
        provider=provider,
        max_workers_per_block=max(apps, nodes),
        mpi_launcher=launcher,
        launch_cmd=os.path.join(bin_dir, DEFAULT_LAUNCH_CMD),
        address="127.0.0.1" if scheduler.single_host else None,
        interchange_launch_cmd=os.path.join(bin_dir, "interchange.py"),  # a list in HTEX
        heartbeat_period=HEARTBEAT[0],
        heartbeat_threshold=HEARTBEAT[1],
        block_error_handler=False,
    )
    executor.run_dir = block_dir
    executor.start()
    assert executor.interchange_proc is not None  # start() launched it, or raised
    block = Block(
        label,
        site.name,
        nodes,
        walltime_minutes * 60,
        slots,
        executor,
        script_dir=block_dir,
        interchange_pid=executor.interchange_proc.pid,
        submitted=time.monotonic(),
    )
    try:
        executor.scale_out_facade(1)
    except Exception:
        executor.shutdown()
        raise
    block.job_id = str(next(iter(executor.blocks_to_job_id.values())))
    record = getattr(provider, "resources", {}).get(block.job_id, {})
    script = record.get("script_path") or ""
    # Parsl names the job parsl.<label>.block-<n>.<time>: without the time, as a local job is looked up by name
    # (only LocalProvider records its script).
    name, suffix = os.path.basename(script), scheduler.parsl_suffix
    block.job_name = name[: len(name) - len(suffix)].rsplit(".", 2)[0] if script and name.endswith(suffix) else ""
    return block


def connected(block: Block) -> bool:
    """Whether the block's worker pool has reached its interchange (the block runs and can take apps)."""
    try:
        return any(m.get("active") for m in block.executor.connected_managers())
    except Exception:  # noqa: BLE001 - an interchange that does not answer: not (yet) connected
        return False


def launch(block: Block, job_id: str, where: tuple[int, ...], per_node: int, args: tuple) -> Future:
    """Start one cluster's app in ``block`` on its nodes ``where``, ``per_node`` slots on each (the pool counts
    slots as its nodes: the app asks for as many as it takes, which the driver made sure are free)."""
    from pilot.submit.blockapp import run_cluster

    units = len(where) * per_node
    spec = {"num_nodes": units, "num_ranks": units, "ranks_per_node": 1}
    future = block.executor.submit(run_cluster, spec, *args, list(where), per_node < block.slots)
    block.take(job_id, where, per_node)
    return future


def launch_agent(block: Block, launcher: list[str], host_flag: str, pilot: list[str]) -> Future:
    """Start the block's one long-lived ``pilot run --inbox`` on all of its nodes, every slot of each (the pool's
    only app: it counts them all)."""
    from pilot.submit.blockapp import run_agent

    units = block.nodes * block.slots
    spec = {"num_nodes": units, "num_ranks": units, "ranks_per_node": 1}
    return block.executor.submit(run_agent, spec, block.inbox, launcher, host_flag, pilot, list(range(block.nodes)))


def end_block(block: Block) -> None:
    """Cancel the block's batch job and stop its interchange."""
    ex = block.executor
    if ex is None:
        return
    try:
        ex.provider.cancel([block.job_id])
    except Exception as exc:  # noqa: BLE001 - the caller checks the queue afterwards
        log.warning("pilot job %s: cancelling it failed (%s)", block.job_id, exc)
    ex.shutdown(timeout=5)
    block.executor = None
