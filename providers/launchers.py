"""The MPI launcher line: one MPI job of ``nodes x ranks_per_node`` ranks spread over the allocation.

Each launcher names its own flags for the total and the per-node count, so
ranks land on every node of a multi-node job (rank 0, the master, on the
first). ``mpiexec`` is MPICH's hydra (the mpich wheel) or HPE PALS (ALCF):
both take ``-ppn``. Open MPI's does not: name it ``mpirun``, which gets only
``-n``, and place the ranks with ``launcher_options`` (``--map-by ppr:N:node``).
"""

from __future__ import annotations

import functools
import os
import shlex
from collections.abc import Callable

LaunchLine = Callable[[str, list[str], int, int], list[str]]


def _srun(path: str, extra: list[str], ranks: int, per_node: int) -> list[str]:
    # The other ranks live on when one dies: the dead worker's watchdog tells the master, which runs its
    # task elsewhere and goes on without it (pilot.runtime.crashes), whatever the site's KillOnBadExit.
    return [path, *extra, "--kill-on-bad-exit=0", "-n", str(ranks), "--ntasks-per-node", str(per_node)]


def _mpiexec(path: str, extra: list[str], ranks: int, per_node: int) -> list[str]:
    return [path, *extra, "-n", str(ranks), "-ppn", str(per_node)]


def _aprun(path: str, extra: list[str], ranks: int, per_node: int) -> list[str]:
    return [path, *extra, "-n", str(ranks), "-N", str(per_node)]


def _ibrun(path: str, extra: list[str], ranks: int, per_node: int) -> list[str]:  # noqa: ARG001 - from #SBATCH
    return [path, *extra, "-n", str(ranks)]


def _mpirun(path: str, extra: list[str], ranks: int, per_node: int) -> list[str]:  # noqa: ARG001 - options vary
    return [path, *extra, "-n", str(ranks)]


LAUNCHERS: dict[str, LaunchLine] = {
    "srun": _srun,
    "mpiexec": _mpiexec,
    "aprun": _aprun,
    "ibrun": _ibrun,
    "mpirun": _mpirun,
}
# Launchers that belong to the batch system: always the site's own, found on the job's PATH.
SITE_LAUNCHERS = ("srun", "aprun", "ibrun")


def launch_line(launcher: str, options: str, nodes: int, ranks_per_node: int) -> list[str]:
    """argv prefix that starts ONE MPI job of all ranks (``launcher`` is a name or an absolute path)."""
    build = LAUNCHERS[os.path.basename(launcher)]
    return build(launcher, list(split(options)), nodes * ranks_per_node, ranks_per_node)


@functools.lru_cache(maxsize=256)
def split(text: str) -> tuple[str, ...]:
    """shlex.split, once per distinct site option string (a big plan asks for it per cluster)."""
    return tuple(shlex.split(text))
