"""Parsl providers send what the planner's batch script asks for (nothing is submitted here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pilot.jobrequest import request_for, script_for
from pilot.sites import load_site, parse_walltime
from providers import provider_for, submit

pytest.importorskip("parsl")


def captured_script(tmp_path: Path, site, req) -> str:
    provider = provider_for(site)
    seen = {}

    def fake_execute_wait(cmd, timeout=None):
        seen["cmd"] = cmd
        return 0, "Submitted batch job 4242\n4242.server", ""

    provider.execute_wait = fake_execute_wait
    job_id = submit(provider, site, req, "pilot-test-merge_x-1")
    assert job_id.startswith("4242")
    script = seen["cmd"].split()[-1]  # sbatch/qsub [options] SCRIPT
    return seen["cmd"] + "\n" + Path(script).read_text()


def directives(text: str, prefix: str) -> list[str]:
    return [line.split(None, 1)[1] for line in text.splitlines() if line.startswith(prefix)]


def make(tmp_path, name, **sets):
    site = load_site(name, sets)
    workdir = tmp_path / "merge_x"
    workdir.mkdir()
    req = request_for(site, "merge_x", str(workdir), ["--max-wall-time", "25", "merge_x.dag"], ranks=64)
    return site, req


def test_slurm_provider_matches_planner_script(tmp_path):
    site, req = make(tmp_path, "perlmutter-cpu", account="m4242")
    parsl_script = captured_script(tmp_path, site, req)
    ours = script_for(site, req)[1]
    for key in ("--nodes", "--ntasks-per-node", "--time", "--account", "--qos", "--constraint"):
        ours_v = [d.split("=", 1)[1] for d in directives(ours, "#SBATCH") if d.startswith(key)]
        theirs = [d.split("=", 1)[1] for d in directives(parsl_script, "#SBATCH") if d.startswith(key)]
        if key == "--time":  # Parsl writes minutes, the planner HH:MM:SS
            ours_v, theirs = [parse_walltime(v) for v in ours_v], [parse_walltime(v) for v in theirs]
        assert ours_v and ours_v == theirs, key
    assert req.command_line() in parsl_script  # one MPI launch of all ranks, exactly as the planner writes it
    assert parsl_script.count("srun ") == 1 and "srun --cpu-bind=cores -c 2 -n 64 --ntasks-per-node 64" in parsl_script


def test_pbspro_provider_matches_planner_script(tmp_path):
    site, req = make(tmp_path, "polaris", account="proj42")
    parsl_script = captured_script(tmp_path, site, req)
    ours = script_for(site, req)[1]
    select = [d for d in directives(ours, "#PBS") if d.startswith("-l select")][0]
    nodes, mpiprocs = re.match(r"-l select=(\d+):mpiprocs=(\d+)", select).groups()
    theirs = " ".join(directives(parsl_script, "#PBS")) + " " + parsl_script.splitlines()[0]  # directives + qsub options
    assert f"select={nodes}" in theirs and f"mpiprocs={mpiprocs}" in theirs
    assert "walltime=00:30:00" in theirs and "-q debug" in theirs and "-A proj42" in theirs
    assert req.command_line() in parsl_script


def test_torque_provider_matches_planner_script(tmp_path):
    site, req = make(tmp_path, str(torque_site(tmp_path)))
    parsl_script = captured_script(tmp_path, site, req)
    ours = " ".join(directives(script_for(site, req)[1], "#PBS"))
    theirs = " ".join(directives(parsl_script, "#PBS"))
    for piece in ("nodes=1", "ppn=3", "walltime=00:05:00"):
        assert piece in ours and piece in theirs
    assert req.command_line() in parsl_script


def torque_site(tmp_path: Path) -> Path:
    p = tmp_path / "torque.yaml"
    p.write_text("scheduler: torque\nlauncher: mpiexec\nnodes: 1\nranks_per_node: 3\nwalltime: '00:05:00'\n")
    return p
