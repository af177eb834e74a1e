"""What a workflow says about its batch jobs beyond its jobs: the profiles of Pegasus' data jobs
(pegasus::transfer, pegasus::dirmanager, pegasus::rc-client, pegasus::cleanup) and the aggregator
(pegasus::mpiexec), as pegasus-isi's 1000genome writes them for a Slurm site, and DAGMan's throttles, which the
plan keeps for pilot submit."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import yaml

from pilot.contracts.clusters import read_clusters
from pilot.dag import read_dag
from pilot.errors import ConfigError
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site
from tests.planner.data_wf import data_workflow
from tests.planner.wf import api, jobs, transformations, write

XFER = {"queue": "@escori", "runtime": "300", "glite.arguments": "--qos=xfer --licenses=SCRATCH"}


def with_entries(paths: dict, *entries: dict) -> dict:
    """The workflow with more transformation catalog entries, as 1000genome's catalog has them."""
    data = yaml.safe_load(Path(paths["workflow"]).read_text())
    data["transformationCatalog"]["transformations"].extend(entries)
    Path(paths["workflow"]).write_text(yaml.safe_dump(data))
    return paths


def entry(name: str, pegasus: dict, env: dict | None = None, site: str = "local") -> dict:
    profiles: dict = {"pegasus": pegasus}
    if env:
        profiles["env"] = env
    return {
        "namespace": "pegasus",
        "name": name,
        "sites": [{"name": site, "pfn": f"/opt/pegasus/bin/{name}", "type": "installed", "profiles": profiles}],
    }


def planned(tmp_path: Path, paths: dict, cluster: str, site: str = "perlmutter-cpu", **overrides: str):
    req = PlanRequest(
        workflow=paths["workflow"],
        site=load_site(site, {"pegasus_site": "local", **overrides}),
        cluster=[cluster],
        submit_dir=str(tmp_path / "submit"),
        conf=paths.get("conf"),
        tc=paths.get("tc"),
    )
    return plan(req)


def run(tmp_path: Path, paths: dict, cluster: str, site: str = "perlmutter-cpu", **overrides: str):
    return {e.cluster.name: e for e in planned(tmp_path, paths, cluster, site, **overrides).emitted}


def script(emitted, name: str) -> list[str]:
    return Path(emitted[name].script).read_text().splitlines()


def test_data_jobs_take_their_transformations_profiles_into_their_batch_job(tmp_path):
    paths = with_entries(
        data_workflow(tmp_path),
        entry("transfer", XFER, env={"XFER_TRACE": "on"}),
        entry("dirmanager", {"queue": "dirq", "project": "m2187"}),
        entry("rc-client", {"glite.arguments": "--qos=shared"}),
    )
    emitted = run(tmp_path, paths, "label")
    for name in ("stage_in_local_local_0_0", "stage_out_local_local_1_0"):
        lines = script(emitted, name)
        assert "#SBATCH --partition=@escori" in lines and "#SBATCH --qos=xfer --licenses=SCRATCH" in lines, lines
        dag = Path(emitted[name].dag).read_text()
        assert "#pilot env XFER_TRACE=on" in dag
        assert read_dag(emitted[name].dag).tasks[name].env == (("XFER_TRACE", "on"),)
    mkdir = script(emitted, "create_dir_data_0_local")
    assert "#SBATCH --partition=dirq" in mkdir and "#SBATCH --account=m2187" in mkdir
    assert "#SBATCH --qos=shared" in script(emitted, "register_local_1_0")
    compute = script(emitted, "cp_j1")  # the compute jobs' batch jobs are the site's
    assert not any("@escori" in line or "--qos=xfer" in line or "dirq" in line for line in compute), compute
    assert "XFER_TRACE" not in Path(emitted["cp_j1"].dag).read_text()


def test_a_data_transformation_without_profiles_leaves_the_batch_job_as_it_was(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = run(tmp_path / "a", data_workflow(tmp_path / "a"), "label")
    again = run(tmp_path / "b", with_entries(data_workflow(tmp_path / "b"), entry("transfer", {})), "label")
    name = "stage_in_local_local_0_0"
    assert [line.replace(str(tmp_path / "a"), "") for line in script(first, name)] == [
        line.replace(str(tmp_path / "b"), "") for line in script(again, name)
    ]


def test_in_a_cluster_of_both_the_compute_jobs_values_win_and_the_data_jobs_fill_the_rest(tmp_path):
    paths = with_entries(data_workflow(tmp_path), entry("transfer", {"queue": "xferq", "project": "m2187"}))
    data = yaml.safe_load(Path(paths["workflow"]).read_text())
    data["jobs"][0]["profiles"] = {"pegasus": {"queue": "regular"}}
    Path(paths["workflow"]).write_text(yaml.safe_dump(data))
    (whole,) = [e for e in run(tmp_path, paths, "whole").values()]
    lines = Path(whole.script).read_text().splitlines()
    assert "#SBATCH --partition=regular" in lines and "#SBATCH --account=m2187" in lines, lines


def test_a_data_transformations_key_that_acts_on_nothing_is_said_once_per_plan(tmp_path):
    """1000genome's pegasus::transfer runtime: the batch job keeps the site's walltime, and the plan says so."""
    paths = with_entries(data_workflow(tmp_path), entry("transfer", XFER), entry("cleanup", {"runtime": "60"}))
    warnings = planned(tmp_path, paths, "label").warnings
    said = [w for w in warnings if w.startswith("warning: pegasus::runtime (")]
    assert len(said) == 1 and "transformation pegasus::transfer" in said[0] and "walltime" in said[0], warnings
    assert not any(w.startswith(("warning: pegasus::queue", "warning: pegasus::glite")) for w in warnings), warnings


def test_data_transformations_without_such_keys_plan_without_a_warning(tmp_path):
    paths = with_entries(data_workflow(tmp_path), entry("transfer", {"queue": "xfer", "transfer.threads": "4"}))
    assert planned(tmp_path, paths, "label").warnings == []


def aggregator_wf(tmp_path: Path, cluster_size: int = 4, globus: dict | None = None, **size) -> dict:
    wf = api.Workflow("agg", infer_dependencies=False)
    jobs(wf, "T", 4)
    tc = transformations("local", {"T": "/bin/true"}, {"T": {"clusters.size": str(cluster_size)}})
    mpi = api.Transformation(
        "mpiexec", namespace="pegasus", site="local", pfn="/opt/pegasus/bin/pegasus-mpi-cluster", is_stageable=False
    )
    mpi.add_pegasus_profile(queue="regular", glite_arguments="--nodes=2 --ntasks-per-node=1", project="m2187")
    for key, value in size.items():
        mpi.add_profiles(api.Namespace.PEGASUS, key=key, value=value)
    for key, value in (globus or {}).items():
        mpi.add_profiles(api.Namespace.GLOBUS, key=key, value=value)
    tc.add_transformations(mpi)
    return write(tmp_path, wf, tc)


def test_a_clustered_job_takes_the_aggregators_profiles(tmp_path):
    """1000genome's pegasus::mpiexec entry: its queue, project and glite.arguments size the PMC job."""
    emitted = run(tmp_path, aggregator_wf(tmp_path), "horizontal")
    (name,) = [n for n in emitted if n.startswith("merge_")]
    lines = script(emitted, name)
    for line in ("#SBATCH --partition=regular", "#SBATCH --account=m2187", "#SBATCH --nodes=2 --ntasks-per-node=1"):
        assert line in lines, lines


def test_a_job_left_unclustered_is_not_the_aggregators(tmp_path):
    emitted = run(tmp_path, aggregator_wf(tmp_path, cluster_size=1), "horizontal")
    for e in emitted.values():
        assert "#SBATCH --partition=regular" not in Path(e.script).read_text()


def merge_cluster(emitted) -> str:
    (name,) = [n for n in emitted if n.startswith("merge_")]
    return name


@pytest.mark.parametrize(
    "pegasus, globus",
    [
        ({"nodes": "2", "ppn": "4", "runtime": "5400"}, {}),
        ({}, {"hostcount": "2", "xcount": "4", "maxwalltime": "90"}),  # Globus.java's names of the same three
        ({"nodes": "2", "cores": "8", "runtime": "5341"}, {}),  # cores with nodes gives ppn; seconds rounded up
    ],
    ids=["pegasus", "globus", "cores"],
)
def test_the_aggregators_nodes_ppn_and_runtime_size_the_clustered_batch_job(tmp_path, pegasus, globus):
    """As Pegasus' glite style sizes a PMC job from pegasus-mpi-cluster's entry (NODES, PROCS, WALLTIME): the
    script asks for 2 nodes of 4 ranks for 90 minutes, its MPI launch starts 8 ranks, the pilot stops before the
    walltime, clusters.yml keeps the size for pilot submit, and no line says the keys act on nothing."""
    result = planned(tmp_path, aggregator_wf(tmp_path, globus=globus, **pegasus), "horizontal", nodes="4")
    emitted = {e.cluster.name: e for e in result.emitted}
    name = merge_cluster(emitted)
    lines = script(emitted, name)
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=4", "#SBATCH --time=01:30:00"):
        assert line in lines, lines
    launch = next(line for line in lines if " run " in line and "srun" in line)
    assert "-n 8 --ntasks-per-node 4" in launch and "--max-wall-time 85 " in launch, launch
    (spec,) = [s for s in read_clusters(result.submit_dir) if s.name == name]
    assert (spec.nodes, spec.ranks_per_node, spec.walltime_minutes, spec.ranks) == (2, 4, 90.0, 8)
    assert not [w for w in result.warnings if "mpiexec" in w], result.warnings
    single = [s for s in read_clusters(result.submit_dir) if not s.name.startswith("merge_")]
    assert all((s.nodes, s.ranks_per_node, s.walltime_minutes) == (None, None, None) for s in single)


def test_the_estimate_measures_a_clustered_job_against_the_aggregators_walltime(tmp_path):
    from pilot.planner.estimate import estimate_plan

    result = planned(tmp_path, aggregator_wf(tmp_path, runtime="5400"), "horizontal")
    limits = {est.name: est.limit for est in estimate_plan(result.emitted, load_site("perlmutter-cpu")).clusters}
    assert limits[merge_cluster({e.cluster.name: e for e in result.emitted})] == 85 * 60.0  # 90 minutes less 5
    assert limits["create_dir_agg_0_local"] == 25 * 60.0  # the site config's 30 minutes less 5


def test_the_aggregators_size_reaches_a_pbs_script(tmp_path):
    emitted = run(
        tmp_path,
        aggregator_wf(tmp_path, nodes="2", ppn="4", runtime="1800"),
        "horizontal",
        "polaris",
        nodes="2",
        account="m1",
    )
    lines = script(emitted, merge_cluster(emitted))
    assert "#PBS -l select=2:ncpus=4:mpiprocs=4" in lines and "#PBS -l walltime=00:30:00" in lines, lines
    assert any("-n 8 -ppn 4" in line for line in lines), lines


def test_ppn_alone_spreads_the_clusters_ranks_over_the_nodes_it_needs(tmp_path):
    emitted = run(tmp_path, aggregator_wf(tmp_path, ppn="2"), "horizontal", nodes="8")  # 4 tasks: 5 ranks
    lines = script(emitted, merge_cluster(emitted))
    assert "#SBATCH --nodes=3" in lines and "#SBATCH --ntasks-per-node=2" in lines, lines
    assert "#SBATCH --time=00:30:00" in lines  # no runtime: the site config's walltime


@pytest.mark.parametrize(
    "size, site, said",
    [
        (
            {"nodes": "3"},
            {"nodes": "2"},
            r"transformation pegasus::mpiexec: pegasus::nodes = 3: site perlmutter-cpu has 2 "
            r"node\(s\) per batch job \(.*perlmutter-cpu.yaml: nodes\): ask for at most 2, or "
            r"raise the site config's nodes \(--set nodes=3\)$",
        ),
        (
            {"runtime": "180000"},
            {},
            r"pegasus::runtime = '180000' \(50:00:00\) is longer than site perlmutter-cpu's " r"max_walltime 48:00:00",
        ),
        ({"nodes": "4", "cores": "10"}, {"nodes": "4"}, r"pegasus::cores = 10 is not a multiple of nodes 4"),
        ({"nodes": "2", "ppn": "4", "cores": "6"}, {"nodes": "2"}, r"pegasus::cores = 6 is not nodes x ppn \(2 x 4\)"),
        ({"nodes": "1", "ppn": "1"}, {}, r"ask for 1 MPI rank: a clustered job needs at least 2"),
    ],
    ids=["nodes", "walltime", "cores-nodes", "cores-all", "one-rank"],
)
def test_a_size_the_site_cannot_give_is_refused_in_one_line(tmp_path, size, site, said):
    with pytest.raises(ConfigError, match=said) as info:
        planned(tmp_path, aggregator_wf(tmp_path, **size), "horizontal", **site)
    assert "\n" not in str(info.value) and "transformations.yml: transformations[1]" in str(info.value)


def test_on_a_site_without_batch_system_the_aggregators_size_is_named_not_used(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="pilot"):
        emitted = run(tmp_path, aggregator_wf(tmp_path, nodes="2", ppn="4", runtime="60"), "horizontal", "local")
    assert any(
        "nodes, ppn, runtime" in r.getMessage() and "has no batch system" in r.getMessage() for r in caplog.records
    ), caplog.text
    assert "-n 3 -ppn 3" in Path(emitted[merge_cluster(emitted)].script).read_text()  # the site config's


def test_ppn_on_a_jobs_transformation_is_still_refused(tmp_path):
    import pytest

    from pilot.errors import ConfigError

    wf = api.Workflow("ppn", infer_dependencies=False)
    jobs(wf, "T", 1)
    with pytest.raises(ConfigError, match=r"ppn: pilot asks for a task's CPUs with cores"):
        planned(
            tmp_path,
            write(tmp_path, wf, transformations("local", {"T": "/bin/true"}, {"T": {"ppn": "2"}})),
            "horizontal",
        )


def test_dagman_maxjobs_and_maxidle_are_kept_for_pilot_submit_without_a_warning(tmp_path):
    from pilot.submit.throttle import Throttle, plan_throttle

    paths = data_workflow(tmp_path, props={"dagman.maxjobs": "3", "dagman.maxidle": "0"})
    result = planned(tmp_path, paths, "label", site="local")
    assert not [w for w in result.warnings if "dagman" in w], result.warnings
    assert plan_throttle(str(tmp_path / "submit")) == Throttle(maxjobs=3, maxidle=None)


def test_a_dagman_maxjobs_that_is_no_number_is_refused_at_plan_time(tmp_path):
    import pytest

    from pilot.errors import ConfigError

    paths = data_workflow(tmp_path, props={"dagman.maxjobs": "lots"})
    with pytest.raises(ConfigError, match=r"pegasus.properties:\d+: dagman.maxjobs = 'lots' is not a whole number"):
        planned(tmp_path, paths, "label", site="local")


def test_the_aggregators_env_and_a_data_transformations_cpus_are_said_not_dropped(tmp_path):
    """Pegasus' PMC tasks inherit the environment of pegasus-mpi-cluster's entry; pilot's tasks have their own
    transformation's, and the plan says so. A data task gets no CPUs of condor request_cpus."""
    paths = aggregator_wf(tmp_path)
    data = yaml.safe_load(Path(paths["tc"]).read_text())
    mpi = next(t for t in data["transformations"] if t["name"] == "mpiexec")
    mpi["profiles"]["env"] = {"OMP_NUM_THREADS": "1"}
    Path(paths["tc"]).write_text(yaml.safe_dump(data))
    warnings = planned(tmp_path / "agg", paths, "horizontal").warnings
    assert [
        w for w in warnings if w.startswith("warning: env::OMP_NUM_THREADS (") and "pegasus::mpiexec" in w
    ], warnings
    (tmp_path / "data").mkdir()
    xfer = entry("transfer", {"queue": "xfer"}, site="local")
    xfer["sites"][0]["profiles"]["condor"] = {"request_cpus": "4", "request_memory": "2048"}
    paths = with_entries(data_workflow(tmp_path / "data"), xfer)
    warnings = planned(tmp_path / "data", paths, "label").warnings
    assert [w[:30] for w in warnings] == ["warning: condor::request_cpus "], warnings


def test_a_data_transformations_batch_option_that_cannot_be_a_directive_names_the_transformation(tmp_path):
    import pytest

    from pilot.errors import ConfigError

    paths = with_entries(data_workflow(tmp_path), entry("transfer", {"glite.arguments": "--comment=$(reboot)"}))
    with pytest.raises(
        ConfigError,
        match=r"stage_in_local_local_0_0 .*transformation pegasus::transfer's profiles: "
        r"glite.arguments .* cannot go into a batch directive",
    ):
        planned(tmp_path, paths, "label")


def test_pilot_submits_driver_hands_the_aggregators_size_to_the_slurm_provider(tmp_path, monkeypatch):
    """The driver's request for a planned cluster, through Parsl's SlurmProvider with an sbatch that records what it
    is given: the provider's nodes_per_block and walltime, and the script sbatch reads, are the aggregator's."""
    from pilot.contracts.submitstate import ClusterState
    from pilot.submit.backend import SchedulerBackend
    from pilot.submit.driver import Driver
    from pilot.submit.options import Options

    sub = planned(
        tmp_path, aggregator_wf(tmp_path, nodes="2", ppn="4", runtime="5400"), "horizontal", nodes="4"
    ).submit_dir
    site = load_site("perlmutter-cpu", {"pegasus_site": "local", "nodes": "4"})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(f'#!/bin/sh\ncp "$1" {tmp_path}/submitted.$$\necho "Submitted batch job $$"\n')
    (bin_dir / "sacct").write_text("#!/bin/sh\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    backend = SchedulerBackend()
    driver = Driver.load(sub, [site], backend, Options(poll=0.01))
    driver.recover()
    merge = next(s for s in read_clusters(sub) if s.name.startswith("merge_"))
    for record in driver.state.clusters.values():  # the others done: the clustered job is the one submitted
        if record.name != merge.name:
            record.state = ClusterState.DONE
    driver.step()
    assert driver.state.clusters[merge.name].state is ClusterState.QUEUED, driver.state.clusters[merge.name].reason
    provider = backend.provider(site)
    assert (provider.nodes_per_block, provider.walltime) == (2, "01:30:00")
    (submitted,) = tmp_path.glob("submitted.*")
    lines = submitted.read_text().splitlines()
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=4", "#SBATCH --time=01:30:00"):
        assert line in lines, lines
    assert any("-n 8 --ntasks-per-node 4" in line and "--max-wall-time 85 " in line for line in lines), lines
