"""What MPI starts with, by MPI library and launcher (no MPI started here)."""

from __future__ import annotations

import pytest

from pilot.runtime.mpistart import MPI_START_ENV, ONE_HOST_START_ENV, SLURM_PMI_START_ENV, network_env, start_env

MPICH_WHEEL = (
    "MPICH Version:      5.0.2\n"
    "MPICH Device:       ch4:ucx ofi\n"
    "MPICH configure:    --with-device=ch4:ucx,ofi --with-pm=hydra:gforker\n"
)
MPICH_OFI_FIRST = MPICH_WHEEL.replace("ch4:ucx ofi", "ch4:ofi ucx")
MPICH_UCX_ONLY = MPICH_WHEEL.replace("ch4:ucx ofi", "ch4:ucx")
OPEN_MPI = "Open MPI v5.0.5, package: Open MPI Distribution, ident: 5.0.5, repo rev: v5.0.5\n"
SRUN_PMI2 = {"SLURM_MPI_TYPE": "pmi2", "PMI_FD": "11", "PMI_RANK": "0", "PMI_SIZE": "6", "SLURM_JOB_ID": "7"}
# MPICH's mpiexec inside an allocation: its own PMI server, on top of a Slurm step.
HYDRA_IN_SLURM = {"PMI_FD": "5", "PMI_RANK": "0", "PMI_SIZE": "6", "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"}


def test_mpich_with_ucx_first_under_slurms_pmi_starts_on_ofi_tcp():
    assert network_env(MPICH_WHEEL, SRUN_PMI2) == SLURM_PMI_START_ENV
    assert SLURM_PMI_START_ENV == {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}


@pytest.mark.parametrize(
    "library,environ",
    [
        (MPICH_WHEEL, HYDRA_IN_SLURM),  # Hydra's PMI server reads whole requests
        (MPICH_WHEEL, {}),  # a singleton, no process manager
        (MPICH_WHEEL, {**SRUN_PMI2, "SLURM_MPI_TYPE": "pmix"}),
        (MPICH_OFI_FIRST, SRUN_PMI2),  # already on OFI
        (MPICH_UCX_ONLY, SRUN_PMI2),  # nothing to switch to
        (OPEN_MPI, SRUN_PMI2),
    ],
)
def test_other_libraries_and_launchers_keep_their_network(library, environ):
    assert network_env(library, environ) == {}


def test_network_settings_the_job_made_win():
    assert network_env(MPICH_WHEEL, {**SRUN_PMI2, "MPIR_CVAR_CH4_NETMOD": "ucx"}) == {}
    # The job chose its libfabric provider but not the network module: only the module is added.
    assert network_env(MPICH_WHEEL, {**SRUN_PMI2, "FI_PROVIDER": "verbs"}) == {"MPIR_CVAR_CH4_NETMOD": "ofi"}


@pytest.mark.parametrize(
    "environ,one_host",
    [
        ({"MPI_LOCALNRANKS": "3", "PMI_SIZE": "3"}, True),  # Hydra, all ranks here
        (
            {"MPI_LOCALNRANKS": "2", "PMI_SIZE": "6", "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_ID": "0"},
            False,
        ),  # Hydra's proxies in a Slurm step
        ({"OMPI_COMM_WORLD_LOCAL_SIZE": "4", "OMPI_COMM_WORLD_SIZE": "4"}, True),
        ({"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_SIZE": "4"}, False),
        ({**SRUN_PMI2, "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_ID": "0"}, True),
        ({**SRUN_PMI2, "SLURM_STEP_NUM_NODES": "3", "SLURM_STEP_ID": "0"}, False),
        ({"SLURM_STEP_NUM_NODES": "1"}, False),  # the batch script's own step, no launcher of ranks
        ({}, False),
    ],
)
def test_ucx_keeps_off_the_network_only_where_the_launcher_says_all_ranks_are_here(environ, one_host):
    assert start_env(environ) == MPI_START_ENV | (ONE_HOST_START_ENV if one_host else {})


def test_start_settings_the_job_made_win():
    mine = {"MPI_LOCALNRANKS": "3", "PMI_SIZE": "3", "UCX_TLS": "all", "UCX_MEM_EVENTS": "yes"}
    assert start_env(mine) == {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"}
