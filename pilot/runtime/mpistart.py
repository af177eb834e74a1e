"""The settings MPI's own start is given, by launcher and MPI library.

``MpiTransport`` sets them just before MPI starts, unless the job set them
itself, and removes them again once it is up: tasks see the environment the
job was started with. Pure functions of the environment (and of the library's
version text), so they are tested without starting MPI.
"""

from __future__ import annotations

from collections.abc import Mapping

# UCX (the transport of many MPICH and Open MPI builds) patches the code of
# mmap/munmap/brk when it loads, to learn of unmapped memory for its RDMA
# registration cache: some 40 ms per rank, for a cache the pilot's small
# messages do not use. Without memory events UCX registers without a cache.
# MPICH's waits inside its own calls (MPI_Init's barrier among the ranks of a
# host, MPI_Finalize) spin on sched_yield: ranks that reach MPI_Init first
# burn a CPU each until the last one arrives, CPU the ranks still starting
# need when a host has fewer cores than ranks. Heavy yield sleeps instead;
# the pilot itself never blocks in MPI after the start.
MPI_START_ENV = {"UCX_MEM_EVENTS": "no", "MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"}

# Where the launcher says every rank is on this host, UCX needs no network:
# it otherwise opens its TCP transport on every interface, and in MPI_Init and
# again in MPI_Finalize probes each interface's speed through /sys and ethtool,
# some 10 ms of a one-task run on three ranks of a small host.
ONE_HOST_START_ENV = {"UCX_TLS": "self,sm"}

# Under Slurm's own PMI server (srun --mpi=pmi2) an MPICH whose network module
# is UCX starts with OFI over TCP instead, where it has OFI. MPICH speaks
# PMI-1 to that server unless it was built for PMI-2 (the mpich wheel is
# not), and publishes its UCX address as a 4096-byte card however short the
# address is: the rest is whatever heap follows it. Hex-encoded with its runs
# of zeros compressed, a piece of it is a request of up to about 1080 bytes;
# Slurm's PMI-1 server reads a request with one read of 1024 bytes, drops the
# value and takes the rest as a new request it never answers. MPI_Init then
# waits forever, or a rank later fails to unpack a peer's address: how often
# depends on the heap, so on what the rank imported before MPI_Init. An OFI
# address is a 16-byte socket address; libfabric's tcp provider rather than
# its default sockets provider, which also hung in MPI_Init there. TCP
# makes each message between hosts slower than UCX would; next to a task's
# process start that is little, next to a job that never starts nothing.
# Launched by MPICH's own mpiexec (Hydra), whose PMI server reads whole
# lines, UCX stays; so it does where the job sets MPIR_CVAR_CH4_NETMOD.
SLURM_PMI_START_ENV = {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}


def start_env(environ: Mapping[str, str]) -> dict[str, str]:
    """What MPI's start is given before the library loads (UCX reads its settings then), less what the job set."""
    return _unset(MPI_START_ENV | (ONE_HOST_START_ENV if _one_host(environ) else {}), environ)


def _unset(wanted: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """``wanted`` less the settings the job made itself: those win."""
    return {name: value for name, value in wanted.items() if name not in environ}


def _one_host(environ: Mapping[str, str]) -> bool:
    """The launcher's word that all ranks share this host: MPICH's Hydra, Open MPI's mpirun, or srun."""
    for local, everyone in (("MPI_LOCALNRANKS", "PMI_SIZE"), ("OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE")):
        if local in environ:
            return environ[local] == environ.get(everyone)
    return environ.get("SLURM_STEP_NUM_NODES") == "1" and "SLURM_STEP_ID" in environ


def network_env(library: str, environ: Mapping[str, str]) -> dict[str, str]:
    """``SLURM_PMI_START_ENV`` where MPI would start on UCX under Slurm's PMI server, less what the job set.

    ``library`` is MPI_Get_library_version's text (callable before MPI_Init).
    """
    if (
        not environ.get("SLURM_MPI_TYPE", "").startswith("pmi2")
        or "PMI_FD" not in environ
        or "MPIR_CVAR_CH4_NETMOD" in environ
    ):
        return {}
    device = next(
        (line.split(":", 1)[1].strip() for line in library.splitlines() if line.startswith("MPICH Device:")), ""
    )
    netmods = device.removeprefix("ch4:").replace(",", " ").split() if device.startswith("ch4:") else []
    if netmods[:1] != ["ucx"] or "ofi" not in netmods:
        return {}
    return _unset(SLURM_PMI_START_ENV, environ)
