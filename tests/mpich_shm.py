"""Remove the shared-memory segments of MPICH jobs that were killed.

MPICH names a job's intra-node segment after its job (``/dev/shm/mpich_shm_<world id>_<node>``)
and unlinks it only once every local rank attached; a job killed during MPI_Init or
a rank killed without MPI_Finalize leaves it behind. Under Slurm's pmi2 the world id
comes from the job and step ids, which start again with every fresh Slurm, and the
single-node and three-node test clusters share this /dev/shm: a later job with the same
ids opens the stale segment as if its local root had made it, and fails in MPI_Init
("failed to unpack address", "Message truncated"). The tests kill MPI jobs on
purpose, so they clean up after themselves.
"""

from __future__ import annotations

import os

SHM_DIR = "/dev/shm"
PREFIXES = ("mpich_shm_", "mpich_vci_")


def _mapped() -> set[str]:
    """Paths under /dev/shm that some live process has mapped."""
    paths: set[str] = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps") as fh:
                for line in fh:
                    at = line.find(SHM_DIR + "/")
                    if at >= 0:
                        paths.add(line[at:].split(" (deleted)")[0].rstrip("\n"))
        except OSError:  # gone, or not ours to read
            continue
    return paths


def remove_stale() -> list[str]:
    """Unlink MPICH segments no live process maps; return their names."""
    try:
        names = [n for n in os.listdir(SHM_DIR) if n.startswith(PREFIXES)]
    except OSError:
        return []
    if not names:
        return []
    live = _mapped()
    removed = []
    for name in names:
        path = os.path.join(SHM_DIR, name)
        if path in live:
            continue
        try:
            os.unlink(path)
            removed.append(name)
        except OSError:
            pass
    return removed
