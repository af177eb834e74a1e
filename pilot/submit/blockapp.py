"""What runs inside a pilot job (block) for one cluster: its MPI launch of ``pilot run`` on the nodes Parsl gives it.

Parsl's MPIExecutor hands each app the nodes it reserved for it in
``PARSL_MPI_NODELIST``; the app starts the cluster's own launcher (srun with
pilot's options, so a lost worker costs only its task, or the site's mpiexec)
on exactly those nodes, in the cluster's directory, its output appended to
the cluster's stdout/stderr files. Before it starts it writes the marker
file the driver reads (``<dag>.block``): the block, the host and the
launcher's pid, so ``pilot status`` names the block and a cancel can stop
the launch.

This module is imported by the worker pool inside the block, so it imports
nothing of pilot beyond itself.
"""

from __future__ import annotations

import os
import socket
import subprocess

MARKER = ".block"  # <dag>.block: "<block id> <host> <launcher pid>"


def host_words(flag: str, nodes: str) -> list[str]:
    """The launcher's words naming the app's nodes: srun ``--nodes=2 --nodelist=h1,h2`` (without --nodes, srun
    spreads the step over every node of the pilot job, waiting for those other clusters hold), hydra mpiexec
    ``-hosts h1,h2``."""
    if flag.startswith("--"):
        return [f"--nodes={len(nodes.split(','))}", f"{flag}={nodes}"]
    return [flag, nodes]


def run_cluster(workdir: str, dag: str, launcher: list[str], host_flag: str, pilot: list[str]) -> int:
    """Run one cluster's ``pilot run`` on this app's nodes; its exit status (128+N for signal N)."""
    nodes = os.environ.get("PARSL_MPI_NODELIST", "localhost")
    argv = [*launcher, *host_words(host_flag, nodes), *pilot]
    base = dag[:-4] if dag.endswith(".dag") else dag
    with open(os.path.join(workdir, base + ".block.out"), "ab") as out, \
            open(os.path.join(workdir, base + ".block.err"), "ab") as err:
        # In the worker pool's process group and session: whatever ends the pilot job (a local kill of its
        # group, OpenPBS ending its sessions, Slurm its cgroup) ends the launch with it. A cancel of this
        # cluster alone signals the launcher, which passes it to its ranks.
        proc = subprocess.Popen(argv, cwd=workdir, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        with open(os.path.join(workdir, dag + MARKER), "w", encoding="utf-8") as fh:
            fh.write(f"{os.environ.get('PARSL_WORKER_BLOCK_ID', '')} {socket.gethostname()} {proc.pid}\n")
        try:
            code = proc.wait()
        except BaseException:
            proc.terminate()  # the worker is going: the launch goes with it
            raise
    return 128 - code if code < 0 else code
