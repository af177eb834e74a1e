"""What runs inside a pilot job (block) for one cluster: its MPI launch of ``pilot run`` on the nodes Parsl gives it.

The driver places each cluster on nodes of the block (by index, as it counts
their slots) and the app names them from the block's host list
(``PILOT_BLOCK_HOSTS``, written by the block's script; Parsl's own
``PARSL_MPI_NODELIST`` counts slots, not hosts). It starts the cluster's own
launcher (srun with pilot's options, so a lost worker costs only its task, or
the site's mpiexec) on exactly those nodes, in the cluster's directory, its
output appended to the cluster's stdout/stderr files. Before it starts it writes the marker
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
# The node lists Parsl's pool reads, Slurm's first: the block's script sets them aside as PILOT_<name>
# (pilot.submit.blocks.node_lines), and the launch gets them back.
SET_ASIDE = ("SLURM_NODELIST", "PBS_NODEFILE")


def host_words(flag: str, nodes: str, shared: bool = False) -> list[str]:
    """The launcher's words naming the app's nodes: srun ``--nodes=2 --nodelist=h1,h2`` (without --nodes, srun
    spreads the step over every node of the pilot job, waiting for those other clusters hold; on a node shared
    with other clusters ``--exact``, else the step takes every core of it and the next one waits), hydra
    mpiexec ``-hosts h1,h2``."""
    if flag.startswith("--"):
        return [f"--nodes={len(nodes.split(','))}", f"{flag}={nodes}", *(["--exact"] if shared else [])]
    return [flag, nodes]


def hosts_of(where: list[int]) -> str:
    """The block's hosts at the driver's node indices, comma-separated (Parsl's list where there is no other)."""
    path = os.environ.get("PILOT_BLOCK_HOSTS")
    if not path:
        return os.environ.get("PARSL_MPI_NODELIST", "localhost")
    with open(path, encoding="utf-8") as fh:
        hosts = fh.read().split()
    return ",".join(hosts[i] for i in where)


def launch_env() -> dict[str, str]:
    """The block's environment as its scheduler set it: the node list set aside for the pool put back."""
    env = dict(os.environ)
    for name in SET_ASIDE:
        if f"PILOT_{name}" in env:
            env[name] = env.pop(f"PILOT_{name}")
    return env


def run_agent(inbox: str, launcher: list[str], host_flag: str, pilot: list[str], where: list[int]) -> int:
    """Run the block's long-lived ``pilot run --inbox`` on its nodes ``where`` (every one), its output in the inbox
    directory; its exit status (128+N for signal N)."""
    os.makedirs(inbox, exist_ok=True)
    argv = [*launcher, *host_words(host_flag, hosts_of(where)), *pilot]
    with open(os.path.join(inbox, "pilot.out"), "ab") as out, open(os.path.join(inbox, "pilot.err"), "ab") as err:
        proc = subprocess.Popen(argv, cwd=inbox, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=launch_env())
        try:
            code = proc.wait()
        except BaseException:
            proc.terminate()
            raise
    return 128 - code if code < 0 else code


def run_cluster(
    workdir: str, dag: str, launcher: list[str], host_flag: str, pilot: list[str], where: list[int], shared: bool
) -> int:
    """Run one cluster's ``pilot run`` on the block's nodes ``where`` (``shared``: with other clusters on them);
    its exit status (128+N for signal N)."""
    argv = [*launcher, *host_words(host_flag, hosts_of(where), shared), *pilot]
    base = dag[:-4] if dag.endswith(".dag") else dag
    with (
        open(os.path.join(workdir, base + ".block.out"), "ab") as out,
        open(os.path.join(workdir, base + ".block.err"), "ab") as err,
    ):
        # In the worker pool's process group and session: whatever ends the pilot job (a local kill of its
        # group, OpenPBS ending its sessions, Slurm its cgroup) ends the launch with it. A cancel of this
        # cluster alone signals the launcher, which passes it to its ranks.
        proc = subprocess.Popen(argv, cwd=workdir, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=launch_env())
        with open(os.path.join(workdir, dag + MARKER), "w", encoding="utf-8") as fh:
            fh.write(f"{os.environ.get('PARSL_WORKER_BLOCK_ID', '')} {socket.gethostname()} {proc.pid}\n")
        try:
            code = proc.wait()
        except BaseException:
            proc.terminate()  # the worker is going: the launch goes with it
            raise
    return 128 - code if code < 0 else code
