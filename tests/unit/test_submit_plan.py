"""What the planner hands the driver: dagman.retry per cluster in clusters.yml, and node-fit warnings."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pilot.contracts.clusters import ClusterKind, read_clusters
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import SiteConfig

api = pytest.importorskip("Pegasus.api")


def workflow(tmp_path: Path, props: dict[str, str] | None = None) -> str:
    wf = api.Workflow("retries", infer_dependencies=False)
    tc = api.TransformationCatalog()
    tc.add_transformations(api.Transformation("true", site="local", pfn="/bin/true", is_stageable=False))
    wf.add_transformation_catalog(tc)
    a = (
        api.Job("true", _id="a1")
        .add_profiles(api.Namespace.PEGASUS, key="label", value="A")
        .add_dagman_profile(retry="2")
    )
    b = (
        api.Job("true", _id="a2")
        .add_profiles(api.Namespace.PEGASUS, key="label", value="A")
        .add_dagman_profile(retry="5")
    )
    c = api.Job("true", _id="b1").add_profiles(api.Namespace.PEGASUS, key="label", value="B")
    wide = [
        api.Job("true", _id=f"w{i}")
        .add_profiles(api.Namespace.PEGASUS, key="label", value="W")
        .add_profiles(api.Namespace.PEGASUS, key="pmc_request_cpus", value="1")
        for i in range(6)
    ]
    wf.add_jobs(a, b, c, *wide)
    path = tmp_path / "wf.yml"
    wf.write(str(path))
    if props:
        p = api.Properties()
        for k, v in props.items():
            p[k] = v
        p.write(str(tmp_path / "pegasus.properties"))
    return str(path)


def test_largest_dagman_retry_of_a_cluster_reaches_clusters_yml(tmp_path):
    site = SiteConfig(name="local", scheduler="local")
    result = plan(PlanRequest(workflow(tmp_path), site, ["label"], submit_dir=str(tmp_path / "sub")))
    specs = {s.name: s for s in read_clusters(result.submit_dir)}
    assert specs["merge_A"].retry == 5 and specs["true_b1"].retry is None and specs["merge_A"].kind is ClusterKind.LABEL
    assert (tmp_path / "sub" / "clusters.yml").read_text().startswith("format: 1\n")


def test_dagman_retry_from_properties_is_the_lowest_layer(tmp_path):
    wf = workflow(tmp_path, {"dagman.retry": "3"})
    site = SiteConfig(name="local", scheduler="local")
    result = plan(
        PlanRequest(wf, site, ["label"], submit_dir=str(tmp_path / "sub"), conf=str(tmp_path / "pegasus.properties"))
    )
    specs = {s.name: s for s in read_clusters(result.submit_dir)}
    assert specs["merge_A"].retry == 5 and specs["true_b1"].retry == 3


def test_plan_warns_when_a_cluster_asks_for_more_than_a_node_has(tmp_path, caplog):
    site = SiteConfig(
        name="small",
        scheduler="slurm",
        ranks_per_node=8,
        cores_per_node=4,
        pegasus_site="local",
        path="/sites/small.yaml",
    )
    with caplog.at_level(logging.WARNING, logger="pilot.plan"):
        plan(PlanRequest(workflow(tmp_path), site, ["label"], submit_dir=str(tmp_path / "sub")))
    assert [r.getMessage() for r in caplog.records] == [
        "cluster merge_W asks for 7 MPI ranks per node, but a node of site small has 4 cores "
        "(/sites/small.yaml: cores_per_node): its batch job may never start; lower ranks_per_node"
    ]
    caplog.clear()
    fits = SiteConfig(name="big", scheduler="slurm", ranks_per_node=8, cores_per_node=8, pegasus_site="local")
    with caplog.at_level(logging.WARNING, logger="pilot.plan"):
        plan(PlanRequest(workflow(tmp_path), fits, ["label"], submit_dir=str(tmp_path / "sub2")))
    assert caplog.records == []


def test_clusters_yml_counts_the_root_tasks_of_each_cluster(tmp_path):
    """A cluster's roots (no parent inside it) are what pilot status counts READY before it starts."""
    site = SiteConfig(name="local", scheduler="local")
    result = plan(
        PlanRequest(
            str(Path(__file__).parents[2] / "examples" / "diamond.yml"),
            site,
            ["whole"],
            submit_dir=str(tmp_path / "sub"),
        )
    )
    (spec,) = read_clusters(result.submit_dir)
    assert (spec.tasks, spec.roots) == (13, 1)  # create-dir first, all else below it
