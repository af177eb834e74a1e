"""Shared helpers: DAG files in tmp dirs, simulated runs, and the venv's MPI tools."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from pilot.runtime.master import Master
from pilot.runtime.options import RunOptions
from pilot.runtime.simulate import SimCluster, SimHost

DIAMOND_DAG = """# diamond.dag
TASK A /bin/echo "I am A"
TASK B /bin/echo "I am B"
TASK C /bin/echo "I am C"
TASK D /bin/echo "I am D"
EDGE A B
EDGE A C
EDGE B D
EDGE C D
"""


@pytest.fixture
def dagfile(tmp_path: Path):
    def make(text: str, name: str = "wf.dag") -> str:
        path = tmp_path / name
        path.write_text(text)
        return str(path)

    return make


def simulate(dag: str, hosts: list[SimHost] | None = None, events=None, **kw) -> tuple[int, SimCluster, Master]:
    """Run the real master against simulated workers; returns (exit code, cluster, master)."""
    cluster_kw = {k: kw.pop(k) for k in ("duration", "status", "hello_cpus", "timeouts") if k in kw}
    cluster_kw.setdefault("hold_on_failure", kw.get("max_failures", 0) > 0)
    cluster = SimCluster(hosts or [SimHost("h1", cpus=2, slots=2)], **cluster_kw)
    opts = RunOptions(dag=dag, **kw)
    master = Master(opts, cluster.transport, events, clock=cluster.now)
    return master.run(), cluster, master


def start_order(cluster: SimCluster) -> list[str]:
    """The tasks a simulated run started, in the order it started them (a task once per attempt)."""
    return [name for _, name, _ in cluster.started]


def mpiexec() -> str | None:
    """The mpiexec next to this interpreter (the mpich wheel's), else one on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    if here.exists():
        return str(here)
    return shutil.which("mpiexec")


@pytest.fixture(autouse=True, scope="session")
def _no_stale_mpich_segments_at_start():
    from tests.mpich_shm import remove_stale

    remove_stale()


@pytest.fixture(autouse=True)
def _no_stale_mpich_segments(request):
    """After a test that ran MPI jobs (and may have killed some), remove the segments they left."""
    yield
    if any(request.node.get_closest_marker(m) for m in ("mpi", "slurm", "pbs", "multinode", "monitord", "containers")):
        from tests.mpich_shm import remove_stale

        remove_stale()


@pytest.fixture(autouse=True)
def _home(tmp_path_factory, monkeypatch):
    """pilot submit starts pegasus-monitord where pegasus-wms is installed; it writes ~/.pegasus."""
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))


@pytest.fixture(autouse=True)
def _no_pmc_env(monkeypatch):
    for var in ("PMC_HOST_SCRIPT", "PMC_HOST_MEMORY", "PMC_HOST_CPUS", "PMC_HOST_GPUS", "PMC_MAX_WALL_TIME"):
        monkeypatch.delenv(var, raising=False)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longer property-based runs first: under pytest-xdist a worker that took one last would run on alone
    for most of a minute after the others had finished (xdist hands out tests in this order)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


_PYCACHE = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """Where PYTHONDONTWRITEBYTECODE is set, every interpreter the tests start (thousands: each pilot command, each
    MPI rank, each Pegasus tool) would compile pilot's modules from source again. The run keeps their bytecode in a
    directory of its own instead (PYTHONPYCACHEPREFIX), which nothing in the checkout holds and which goes when the
    run ends. Set before pytest-xdist starts its workers, so they and what they start share it."""
    if (
        hasattr(config, "workerinput")
        or not os.environ.get("PYTHONDONTWRITEBYTECODE")
        or os.environ.get("PYTHONPYCACHEPREFIX")
    ):
        return
    prefix = tempfile.mkdtemp(prefix="pilot-tests-pycache-")
    config.stash[_PYCACHE] = prefix
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = prefix


def pytest_unconfigure(config: pytest.Config) -> None:
    prefix = config.stash.get(_PYCACHE, None)
    if prefix is not None:
        shutil.rmtree(prefix, ignore_errors=True)
