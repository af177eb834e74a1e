"""The job's command line: launcher per launcher, pilot and mpiexec by absolute path."""

from __future__ import annotations

import os
import sys

from pilot.cli.run import parse_run_args
from pilot.jobrequest import pilot_args, request_for
from pilot.sites import load_site
from providers.launchers import launch_line

HERE = os.path.dirname(os.path.abspath(sys.executable))


def test_launch_lines_spread_ranks_over_nodes():
    assert launch_line("srun", "--mpi=pmi2", 2, 4) == [
        "srun",
        "--mpi=pmi2",
        "--kill-on-bad-exit=0",
        "-n",
        "8",
        "--ntasks-per-node",
        "4",
    ]
    assert launch_line("/opt/x/bin/mpiexec", "", 3, 2) == ["/opt/x/bin/mpiexec", "-n", "6", "-ppn", "2"]
    assert launch_line("aprun", "", 2, 4) == ["aprun", "-n", "8", "-N", "4"]
    assert launch_line("ibrun", "", 2, 4) == ["ibrun", "-n", "8"]
    assert launch_line("mpirun", "--map-by ppr:4:node", 2, 4) == ["mpirun", "--map-by", "ppr:4:node", "-n", "8"]


def site(tmp_path, text, scheduler="pbspro"):
    p = tmp_path / "s.yaml"
    p.write_text(f"scheduler: {scheduler}\nnodes: 2\ncores_per_node: 4\n" + text)
    return load_site(str(p))


def test_pilot_and_mpiexec_come_from_the_planning_environment(tmp_path):
    argv = request_for(site(tmp_path, "launcher: mpiexec\n"), "c", "/w", ["c.dag"]).command()
    wheel = os.path.join(HERE, "mpiexec")
    assert argv[0] == (wheel if os.access(wheel, os.X_OK) else "mpiexec")
    pilot = argv[argv.index("-ppn") + 2 : argv.index("run")]
    assert pilot in ([os.path.join(HERE, "pilot")], [os.path.abspath(sys.executable), "-m", "pilot"])


def test_site_mpi_from_the_job_path_and_scheduler_launchers_stay_bare(tmp_path):
    assert request_for(site(tmp_path, "launcher_from: path\n"), "c", "/w", ["c.dag"]).command()[0] == "mpiexec"
    assert request_for(site(tmp_path, "launcher: srun\n", "slurm"), "c", "/w", ["c.dag"]).command()[0] == "srun"
    argv = request_for(site(tmp_path, "pilot_command: /opt/pilot/bin/pilot --quiet\n"), "c", "/w", ["c.dag"]).command()
    assert argv[argv.index("run") - 2 : argv.index("run")] == ["/opt/pilot/bin/pilot", "--quiet"]


def test_one_worker_per_core_by_default(tmp_path):
    s = site(tmp_path, "")
    assert s.ranks_per_node == 4
    req = request_for(s, "c", "/w", ["c.dag"], ranks=100)
    assert (req.nodes, req.ranks_per_node) == (2, 4)
    small = request_for(s, "c", "/w", ["c.dag"], ranks=3)
    assert (small.nodes, small.ranks_per_node) == (1, 3)


def test_a_batch_jobs_pilot_run_starts_each_container_once_per_worker():
    args = pilot_args(load_site("local"), "merge_x.dag")
    assert args[args.index("--containers") + 1] == "once"
    assert parse_run_args(args).containers_once
    assert not parse_run_args(["x.dag"]).containers_once  # a plain PMC DAG runs its lines as written
