"""Pilot jobs (blocks) through Parsl: one MPIExecutor per block, driven by pilot's driver.

Parsl's HighThroughputExecutor in MPI mode (``MPIExecutor``) is the engine: its
provider submits the block through the site's scheduler, its worker pool runs
inside the block, its interchange hands an app to the pool, and the pool gives
the app nodes of the block (``PARSL_MPI_NODELIST``) and fails it back when the
block is lost. Measured against what late binding needs, three things of it do
not fit, and the driver does them instead:

- placement: one executor serves all its blocks and picks the block itself
  (two clusters can queue inside one busy block while another is idle), so
  each block gets an executor of its own, and the driver picks the block by
  free nodes and time left;
- scaling: Parsl's strategy counts apps, not nodes, and resubmits blocks that
  fail at start without end, so no strategy runs: the driver adds and ends
  blocks (``add``/``end``);
- restart: a new executor cannot take over a running block, so each block's
  batch job id is recorded (pilot.submit.pilots) and a restarted driver ends
  the blocks it finds there.

Each executor is used directly (no DataFlowKernel): the driver polls, and an
app is a plain function (pilot.submit.blockapp.run_cluster).
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from pilot.jobrequest import JobRequest, environment_bin
from pilot.sites import SiteConfig

log = logging.getLogger("pilot.submit")
HEARTBEAT = (5, 20)  # seconds: a pool silent this long is lost, and its apps are failed back


@dataclass
class Block:
    """One pilot job: its executor, its batch job, its nodes and the clusters running in it."""

    label: str
    site: str
    nodes: int
    walltime_s: float
    executor: Any = None
    job_id: str = ""
    script_dir: str = ""
    job_name: str = ""  # the batch job's name (LocalProvider: its script's name): a local job id is checked against it
    interchange_pid: int = 0
    submitted: float = 0.0
    running_since: float | None = None  # when its worker pool was first seen connected
    idle_since: float = field(default_factory=time.monotonic)
    apps: dict[str, int] = field(default_factory=dict)  # job id -> nodes it holds

    @property
    def free(self) -> int:
        return self.nodes - sum(self.apps.values())

    def time_left(self, now: float) -> float:
        """Seconds of wall time left (the whole of it while it waits in the queue)."""
        start = self.running_since if self.running_since is not None else now
        return self.walltime_s - (now - start)

    def record(self) -> dict[str, Any]:
        return {"label": self.label, "site": self.site, "job_id": self.job_id, "script_dir": self.script_dir,
                "job_name": self.job_name, "interchange_pid": self.interchange_pid, "nodes": self.nodes}


def mpi_launcher(site: SiteConfig) -> tuple[str, str]:
    """(Parsl's mpi_launcher, the flag naming hosts) for the site's launcher; srun and hydra's mpiexec only."""
    name = os.path.basename(site.launcher)
    if name == "srun":
        return "srun", "--nodelist"
    if name == "mpiexec":
        return "mpiexec", "-hosts"
    raise ValueError(f"launcher {site.launcher!r}: pilot jobs start clusters with srun or mpiexec (hydra)")


def block_request(site: SiteConfig, nodes: int, walltime_minutes: float, workdir: str) -> JobRequest:
    """How the scheduler plug-in sizes a block's batch job (nodes, wall time, queue, account)."""
    from pilot.jobrequest import request_for

    return request_for(site, "pilot-block", workdir, [], ranks=nodes * (site.ranks_per_node or 1),
                       walltime_minutes=walltime_minutes)


def start_block(site: SiteConfig, label: str, nodes: int, walltime_minutes: float, run_dir: str) -> Block:
    """A new executor with its interchange, and its one block submitted to the site's scheduler."""
    from parsl.executors import MPIExecutor
    from parsl.executors.high_throughput.executor import DEFAULT_LAUNCH_CMD

    from providers import provider_for, scheduler_for

    bin_dir = environment_bin()
    block_dir = os.path.join(run_dir, label)
    os.makedirs(block_dir, exist_ok=True)
    scheduler, provider = scheduler_for(site), provider_for(site)
    scheduler.size(provider, block_request(site, nodes, walltime_minutes, block_dir))
    provider.nodes_per_block = nodes
    provider.init_blocks, provider.min_blocks, provider.max_blocks = 0, 0, 1
    provider.script_dir = block_dir
    provider.block_ranks = site.ranks_per_node or 1
    init = list(site.worker_init)
    if scheduler.single_host:  # the pool reads its nodes from a node file: the "nodes" of this machine
        nodefile = os.path.join(block_dir, "nodefile")
        with open(nodefile, "w", encoding="utf-8") as fh:
            fh.write("localhost\n" * nodes)
        init.append(f"export PBS_NODEFILE={nodefile}")
    provider.worker_init = "\n".join(init)
    launcher, _ = mpi_launcher(site)
    executor = MPIExecutor(
        label=label, provider=provider, max_workers_per_block=nodes, mpi_launcher=launcher,
        launch_cmd=os.path.join(bin_dir, DEFAULT_LAUNCH_CMD), address="127.0.0.1" if scheduler.single_host else None,
        interchange_launch_cmd=os.path.join(bin_dir, "interchange.py"),  # type: ignore[arg-type] # a list in HTEX
        heartbeat_period=HEARTBEAT[0], heartbeat_threshold=HEARTBEAT[1], block_error_handler=False)
    executor.run_dir = block_dir
    executor.start()
    block = Block(label, site.name, nodes, walltime_minutes * 60, executor, script_dir=block_dir,
                  interchange_pid=executor.interchange_proc.pid, submitted=time.monotonic())
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
    suffix = scheduler.parsl_suffix
    block.job_name = os.path.basename(script)[: -len(suffix)].rsplit(".", 2)[0] if script.endswith(suffix) else ""
    return block


def connected(block: Block) -> bool:
    """Whether the block's worker pool has reached its interchange (the block runs and can take apps)."""
    try:
        return any(m.get("active") for m in block.executor.connected_managers())
    except Exception:  # noqa: BLE001 - an interchange that does not answer: not (yet) connected
        return False


def launch(block: Block, nodes: int, ranks_per_node: int, args: tuple) -> Future:
    """Start one cluster's app in ``block`` on ``nodes`` of its nodes."""
    from pilot.submit.blockapp import run_cluster

    spec = {"num_nodes": nodes, "num_ranks": nodes * ranks_per_node, "ranks_per_node": ranks_per_node}
    return block.executor.submit(run_cluster, spec, *args)


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
