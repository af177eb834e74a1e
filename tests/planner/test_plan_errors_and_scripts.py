"""Planner errors (one line, file and YAML path), batch scripts, site configs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pilot.errors import ConfigError
from pilot.jobrequest import JobRequest, pilot_wall_time
from pilot.sites import load_site
from pilot.siteschema import parse_walltime
from providers import SCHEDULERS
from providers.script import render
from tests.planner.test_clustering import run_plan
from tests.planner.wf import api, transformations, write


def simple(tmp_path, jobs=("a", "b"), deps=(("a", "b"),), tc_names=("T",), job_tx="T", **job_profiles):
    wf = api.Workflow("er", infer_dependencies=False)
    made = {}
    for n in jobs:
        j = api.Job(job_tx, _id=n)
        for k, v in job_profiles.items():
            j.add_profiles(api.Namespace.PEGASUS, key=k, value=v)
        made[n] = j
        wf.add_jobs(j)
    for p, c in deps:
        wf.add_dependency(made[p], children=[made[c]])
    return write(tmp_path, wf, transformations("local", {n: "/bin/echo" for n in tc_names}))


def pilot_plan(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "pilot", "plan", *args], capture_output=True, text=True, cwd=cwd)


def test_workflow_cycle_names_jobs(tmp_path):
    paths = simple(tmp_path, jobs=("a", "b", "c"), deps=(("a", "b"), ("b", "c"), ("c", "b")))
    with pytest.raises(ConfigError, match=r"workflow.yml: jobDependencies form a cycle: b -> c -> b"):
        run_plan(tmp_path, paths, "whole")


def test_two_jobs_whose_task_ids_collide_are_named(tmp_path):
    """Transformation a_b with job c and transformation a with job b_c both make the PMC task a_b_c."""
    wf = api.Workflow("er", infer_dependencies=False)
    wf.add_jobs(api.Job("a_b", _id="c"), api.Job("a", _id="b_c"))
    paths = write(tmp_path, wf, transformations("local", {"a_b": "/bin/echo", "a": "/bin/echo"}))
    with pytest.raises(
        ConfigError,
        match=r"workflow.yml: jobs\[1\] \(id b_c\): the PMC task made from this job is "
        r"invalid: duplicate task 'a_b_c' \(the task of job c has that id too\)",
    ):
        run_plan(tmp_path, paths, "whole")


def test_unknown_transformation(tmp_path):
    paths = simple(tmp_path, tc_names=("Other",))
    with pytest.raises(ConfigError, match=r"workflow.yml: jobs\[0\] \(id a\): unknown transformation T"):
        run_plan(tmp_path, paths, "whole")


def test_unknown_site_for_transformation(tmp_path):
    paths = simple(tmp_path)
    with pytest.raises(
        ConfigError,
        match=r"transformation T has no entry for site 'elsewhere' \(it has: local\); add one, "
        r"plan for another --site, or name the catalogs' site with --set pegasus_site=local",
    ):
        run_plan(tmp_path, paths, "whole", site=str(site_file(tmp_path, "pegasus_site: elsewhere\n")))


def test_bad_profile_value(tmp_path):
    paths = simple(tmp_path, runtime="soon")
    with pytest.raises(
        ConfigError, match=r"workflow.yml: jobs\[0\].profiles.pegasus.runtime: 'soon' is not a number of seconds"
    ):
        run_plan(tmp_path, paths, "whole")


def test_unsafe_job_id_is_rejected(tmp_path):
    wf = api.Workflow("inj", infer_dependencies=False)
    wf.add_jobs(api.Job("T", _id="x;rm -rf ~"))
    paths = write(tmp_path, wf, transformations("local", {"T": "/bin/echo"}))
    with pytest.raises(ConfigError, match=r"jobs\[0\].id: 'x;rm -rf ~': job ids may use letters"):
        run_plan(tmp_path, paths, "whole")


def test_cli_errors_are_one_line(tmp_path):
    paths = simple(tmp_path, tc_names=("Other",))
    res = pilot_plan(paths["workflow"], "--site", "local", "--tc", paths["tc"], "--dir", str(tmp_path / "s"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "unknown transformation T" in res.stderr
    res = pilot_plan(paths["workflow"], "--site", "locall")
    assert res.returncode == 2 and "unknown site 'locall' (did you mean 'local'?)" in res.stderr


def test_cli_summary(tmp_path):
    paths = simple(tmp_path)
    res = pilot_plan(
        paths["workflow"], "--site", "local", "--cluster", "whole", "--tc", paths["tc"], "--dir", str(tmp_path / "s")
    )
    assert res.returncode == 0, res.stderr
    assert (
        re.search(r"^merge_er\s+whole\s+4\s", res.stdout, re.M)
        and "4 tasks (2 of them data jobs) in 1 cluster," in res.stdout
    )
    again = pilot_plan(paths["workflow"], "--site", "local", "--tc", paths["tc"], "--dir", str(tmp_path / "s"))
    assert again.returncode == 2 and "not empty" in again.stderr


def _plan_pmc_dag(tmp_path: Path, text: str) -> tuple[subprocess.CompletedProcess, str]:
    """Plan a PMC .dag named mine.dag; return the run and the cluster's .sub text."""
    dag = tmp_path / "mine.dag"
    dag.write_text(text)
    res = pilot_plan(str(dag), "--site", "local", "--dir", str(tmp_path / "s"))
    assert res.returncode == 0, res.stderr
    return res, (tmp_path / "s" / "mine" / "mine.sub").read_text()


def test_pmc_dag_input_is_one_cluster(tmp_path):
    res, sub = _plan_pmc_dag(tmp_path, "TASK A -m 5 /bin/echo 'a b'\nTASK B /bin/echo b\nEDGE A B\n")
    text = (tmp_path / "s" / "mine" / "mine.dag").read_text()
    assert text == 'TASK A -m 5 /bin/echo "a b"\nTASK B /bin/echo b\nEDGE A B\n'
    assert re.search(r"^mine\s+whole\s+2\s+2\s", res.stdout, re.M)
    assert "+pegasus_cores = 1\n" in sub and "pegasus_memory_mb" not in sub  # A asks for 5 MB, B for none


def test_pmc_dag_input_of_a_planned_cluster_keeps_its_data_jobs_out_of_the_tasks(tmp_path):
    """A cluster's DAG as pilot plan writes it, planned again: its data job (annotated null) is no task."""
    _plan_pmc_dag(
        tmp_path,
        "#@ 1 pegasus::dirmanager null\nTASK create_dir_w_0_local /bin/true\n"
        "#@ 2 cp j1\nTASK cp_j1 /bin/cp a b\nEDGE create_dir_w_0_local cp_j1\n",
    )
    bp = (tmp_path / "s" / "mine-0.static.bp").read_text()
    assert re.findall(r'event=task.info \S+ task.id="([^"]+)"', bp) == ["j1"] and "event=task.edge" not in bp
    assert re.search(r'job.id="mine" .* task_count="1"', bp)


def test_pmc_dag_input_sub_has_the_request_of_each_task(tmp_path):
    _, sub = _plan_pmc_dag(
        tmp_path, "TASK A -m 4.5 -c 2 -g 1 /bin/echo a\nTASK B --request-memory 5 -c 2 --request-gpus=1 /bin/echo b\n"
    )
    assert "+pegasus_cores = 2\n+pegasus_memory_mb = 5\n+pegasus_gpus = 1\n" in sub


def site_file(tmp_path: Path, extra: str) -> Path:
    p = tmp_path / "site.yaml"
    p.write_text(
        "scheduler: slurm\nlauncher: srun\nlauncher_options: --mpi=pmi2\npartition: debug\nnodes: 2\nranks_per_node: 4\n"
        + extra
    )
    return p


def test_site_unknown_key_suggests(tmp_path):
    with pytest.raises(ConfigError, match=r"site.yaml:7: unknown key 'acount' \(did you mean 'account'\?\)"):
        load_site(str(site_file(tmp_path, "acount: m123\n")))


def test_site_required_field(tmp_path):
    with pytest.raises(ConfigError, match=r"site site needs account: pass --set account=VALUE"):
        load_site(str(site_file(tmp_path, "required: [account]\n")))
    assert load_site(str(site_file(tmp_path, "required: [account]\n")), {"account": "m42"}).account == "m42"


def test_site_rejects_unsafe_directive_values(tmp_path):
    with pytest.raises(ConfigError, match="cannot go into a batch directive"):
        load_site(str(site_file(tmp_path, "account: 'm1; rm -rf /'\n")))


def test_walltime_parsing_and_pilot_margin():
    assert parse_walltime("01:30:00") == 90 and parse_walltime("2-00:00:00") == 2880 and parse_walltime("45") == 45
    assert (
        pilot_wall_time(60) == 55
        and pilot_wall_time(10) == 9
        and pilot_wall_time(2) == 1.5
        and pilot_wall_time(0.5) == 0.25
    )


def request(**kw):
    base = dict(
        name="merge_x",
        workdir="/scratch/my dir/merge_x",
        nodes=2,
        ranks_per_node=4,
        walltime_minutes=90,
        pilot_args=["--max-wall-time", "85", "merge_x.dag"],
        queue="regular",
        account="m42",
        launcher="srun",
        launcher_options="--mpi=pmi2",
        worker_init=["module load python"],
    )
    base.update(kw)
    return JobRequest(**base)


def test_slurm_script():
    text = render(
        SCHEDULERS["slurm"],
        request(qos="debug", constraint="cpu", exclusive=True, scheduler_options=["#SBATCH --gpus-per-node=4"]),
    )
    assert text == (
        "#!/bin/bash\n#SBATCH --job-name=merge_x\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n#SBATCH --time=01:30:00\n"
        "#SBATCH --output=merge_x.batch.out\n#SBATCH --error=merge_x.batch.err\n#SBATCH --partition=regular\n"
        "#SBATCH --account=m42\n#SBATCH --qos=debug\n#SBATCH --constraint=cpu\n#SBATCH --exclusive\n"
        "#SBATCH --gpus-per-node=4\n"
        "# pilot job merge_x: 8 MPI ranks on 2 node(s), walltime 01:30:00\nmodule load python\n"
        "cd '/scratch/my dir/merge_x' || exit 1\n"
        "srun --mpi=pmi2 --kill-on-bad-exit=0 -n 8 --ntasks-per-node 4 pilot run --max-wall-time 85 merge_x.dag\n"
    )
    plain = render(SCHEDULERS["slurm"], request(workdir="/scratch/x", account=None, queue=None))
    assert "#SBATCH --chdir=/scratch/x\n#SBATCH --output=/scratch/x/merge_x.batch.out\n" in plain
    assert "--account" not in plain and "--partition" not in plain and "--exclusive" not in plain


def test_pbs_scripts():
    text = render(
        SCHEDULERS["pbspro"],
        request(launcher="mpiexec", launcher_options="", exclusive=True, constraint="system=polaris"),
    )
    assert "#PBS -l select=2:ncpus=4:mpiprocs=4:system=polaris\n" in text and "#PBS -q regular\n#PBS -A m42\n" in text
    assert "#PBS -l place=scatter:excl\n" in text
    assert "mpiexec -n 8 -ppn 4 pilot run --max-wall-time 85 merge_x.dag\n" in text
    assert "#PBS -l nodes=2:ppn=4\n" in render(SCHEDULERS["torque"], request())


def test_values_are_quoted_in_the_shell_part():
    text = render(SCHEDULERS["slurm"], request(pilot_args=["--max-wall-time", "85", "odd name$(x).dag"]))
    assert "'odd name$(x).dag'" in text


def test_directive_values_must_be_plain_words():
    with pytest.raises(ConfigError, match="cannot go into a batch directive"):
        render(SCHEDULERS["pbspro"], request(account="m42 -l x"))
