"""A cluster bound late (``Launch``), and starting or stopping it in a pilot job as an MPI run of its own.

Pilot-job mode feeds a cluster to its block's long-lived pilot run
(pilot.submit.feed); without feeding, each cluster starts a ``pilot run`` of
its own in the block on the slots the driver counted for it (``start_own_run``), and
is stopped through its launcher's process, named in the marker file its app
writes as it starts (``stop_own_run``).
"""

from __future__ import annotations

import os
import signal
import socket
from concurrent.futures import Future
from dataclasses import dataclass

from pilot.jobrequest import JobRequest
from pilot.sites import SiteConfig
from pilot.submit import blocks
from pilot.submit.blockapp import MARKER
from pilot.util.flock import held_elsewhere
from pilot.util.safeopen import read_at_most

MARKER_BYTES = 4096  # a launch marker (blockapp.MARKER): "<block id> <host> <launcher pid>"


@dataclass
class Launch:
    """A cluster bound late: waiting for a block, or running in one."""

    job_id: str
    site: str
    workdir: str
    dag: str  # the DAG's file name in workdir
    nodes: int
    ranks_per_node: int
    launcher: list[str]
    pilot: list[str]  # the pilot command (``pilot``, or ``python -m pilot``)
    run_args: list[str]  # its ``run`` options and DAG, without --max-wall-time (set where it starts)
    makespan: float  # seconds the plan's runtimes say it takes (0: unknown)
    block: blocks.Block | None = None
    future: Future | None = None  # its app, or (fed) its block's long-lived run
    fed: bool = False  # handed to its block's long-lived pilot run (pilot.submit.feed)

    @classmethod
    def of(cls, job_id: str, site: str, req: JobRequest, makespan: float) -> Launch:
        """The launch of a cluster's batch job request (its last pilot argument is its DAG); an earlier
        attempt's marker is removed, so that the marker found is this attempt's."""
        dag = req.pilot_args[-1]
        try:
            os.unlink(os.path.join(req.workdir, dag + MARKER))
        except FileNotFoundError:
            pass
        args = req.pilot_args
        at = args.index("--max-wall-time") if "--max-wall-time" in args else len(args)
        return cls(
            job_id,
            site,
            req.workdir,
            dag,
            req.nodes,
            req.ranks_per_node,
            req.launch_prefix(),
            list(req.pilot_command),
            args[:at] + args[at + 2 :],
            makespan,
        )

    @property
    def marker(self) -> str:
        return os.path.join(self.workdir, self.dag + MARKER)

    def still_running(self) -> bool:
        """Whether a pilot run holds the cluster's DAG lock (the flock ``pilot run`` keeps for its whole run)."""
        with held_elsewhere(os.path.join(self.workdir, self.dag)) as fd:
            return fd is not None


def start_own_run(
    launch: Launch, block: blocks.Block, site: SiteConfig, minutes: float, where: tuple[int, ...]
) -> None:
    """Start the cluster's own ``pilot run`` in ``block`` on its nodes ``where``, with ``minutes`` of wall time."""
    _, host_flag = blocks.mpi_launcher(site)
    pilot = [*launch.pilot, "run", "--max-wall-time", f"{minutes:g}", *launch.run_args]
    launch.future = blocks.launch(
        block,
        launch.job_id,
        where,
        launch.ranks_per_node,
        (launch.workdir, launch.dag, launch.launcher, host_flag, pilot),
    )
    launch.block = block


def stop_own_run(launch: Launch) -> None:
    """Stop the cluster's own run: its app if it has not started, else its launcher's process (on this host)."""
    if launch.future is None or launch.future.cancel() or not os.path.exists(launch.marker):
        return
    try:
        _, host, pid = read_at_most(launch.marker, MARKER_BYTES).decode("utf-8").split()
        if host == socket.gethostname():
            os.kill(int(pid), signal.SIGTERM)  # the launcher, which passes it to the cluster's ranks
    except (OSError, ValueError):
        pass  # gone already, or on another node: its block ends with the run
