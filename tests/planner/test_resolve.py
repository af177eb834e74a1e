"""The resolve step: a job's template, shared by the jobs of its transformation that add nothing of their own;
and the clusters written by forked workers exactly as in the plan's own process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pilot.errors import ConfigError
from pilot.planner import datalayout, emit
from pilot.planner.plan import PlanRequest, load, plan
from pilot.planner.profiles import ProfileResolver
from pilot.planner.resolve import Resolved, job_sites
from pilot.sites import load_site
from tests.planner.wf import api, transformations, write


def resolved_jobs(tmp_path: Path) -> tuple[Resolved, dict[str, int]]:
    wf = api.Workflow("resolve")
    wf.add_jobs(api.Job("tool", _id="a").add_args("a"), api.Job("tool", _id="c").add_args("c"))
    for job_id in ("b", "b2"):
        wf.add_jobs(
            api.Job("tool", _id=job_id)
            .add_args(job_id)
            .add_profiles(api.Namespace.PEGASUS, key="pmc_request_memory", value=64)
        )
    wf.add_jobs(api.Job("tool", _id="d").add_args("d").add_env(X="1"), api.Job("other", _id="e").add_args("e"))
    tc = transformations("local", {"tool": "/bin/tool", "other": "/bin/other"}, profiles={"tool": {"runtime": "5"}})
    paths = write(tmp_path, wf, tc)
    site = load_site("local")
    planned = load(PlanRequest(workflow=paths["workflow"], site=site, tc=paths["tc"]))
    lay = datalayout.layout(planned.catalogs, site, str(tmp_path / "submit"), planned.name, None)
    resolver = ProfileResolver(planned.catalogs, "label")
    resolved = Resolved(planned, resolver, site, lay.workdir, job_sites(planned.jobs, site.handle))
    return resolved, {job.id: job.index for job in planned.jobs}


def test_jobs_without_profiles_of_their_own_share_their_transformations_template(tmp_path):
    resolved, at = resolved_jobs(tmp_path)
    a, c, b, b2, d, e = (resolved.by_index[at[k]] for k in ("a", "c", "b", "b2", "d", "e"))
    assert a is c
    assert (a.head, a.pfn, a.label, a.runtime, a.request, a.env, a.retry) == (
        "/bin/tool",
        "/bin/tool",
        "tool",
        5.0,
        (1, 0, 0),
        None,
        None,
    )
    assert b is b2 and b is not a  # equal templates of jobs with profiles are one object
    assert (b.head, b.request) == ("-m 64 /bin/tool", (1, 64, 0))
    assert d.env == (("X", "1"),) and d.head == a.head
    assert e.head == "/bin/other" and e.runtime is None and e.label == "other"


def test_a_job_whose_task_the_dag_parser_refuses_is_named_when_it_is_resolved(tmp_path):
    wf = api.Workflow("refused")
    wf.add_jobs(
        api.Job("tool", _id="a")
        .add_args("a")
        .add_profiles(api.Namespace.PEGASUS, key="pmc_task_arguments", value="-q nonsense")
    )
    paths = write(tmp_path, wf, transformations("local", {"tool": "/bin/tool"}))
    with pytest.raises(ConfigError, match=r"\(id a\): the PMC task made from this job is invalid"):
        plan(
            PlanRequest(
                workflow=paths["workflow"],
                site=load_site("local"),
                cluster=["none"],
                submit_dir=str(tmp_path / "submit"),
                tc=paths["tc"],
            )
        )


def many_clusters(tmp_path: Path, name: str, parallel: emit.Parallelism, monkeypatch) -> Path:
    """A plan of 70 independent jobs, one cluster each, written as ``parallel`` says."""
    wf = api.Workflow("many")
    wf.add_jobs(*(api.Job("tool", _id=f"j{k}").add_args(f"{k}") for k in range(70)))
    paths = write(tmp_path, wf, transformations("local", {"tool": "/bin/tool"}))
    monkeypatch.setattr(emit, "PARALLELISM", parallel)
    submit = tmp_path / name / "submit"  # the same name: the workflow's scratch directory is named after it
    plan(
        PlanRequest(
            workflow=paths["workflow"],
            site=load_site("local"),
            cluster=["none"],
            submit_dir=str(submit),
            tc=paths["tc"],
            cleanup="none",
            output_site=None,
        )
    )
    return submit


def files_of(submit: Path) -> dict[str, str]:
    """The text of clusters.yml and each cluster's DAG and batch script, the path of the submit directory's
    parent (where the scratch directory is too) taken out (its monitoring files carry the run's ids and times)."""
    return {
        str(p.relative_to(submit)): p.read_text().replace(str(submit.parent), "HERE")
        for p in sorted(submit.rglob("*"))
        if p.suffix in (".dag", ".sh") or p.name == "clusters.yml"
    }


def test_forked_workers_write_the_clusters_as_the_plans_own_process_does(tmp_path, monkeypatch):
    if os.cpu_count() == 1 or not hasattr(os, "fork"):
        pytest.skip("forked workers need fork and two CPUs")
    forked = many_clusters(tmp_path, "forked", emit.Parallelism(from_clusters=2, workers=2), monkeypatch)
    alone = many_clusters(tmp_path, "alone", emit.Parallelism(from_clusters=10**9, workers=2), monkeypatch)
    assert len(list(forked.glob("tool_j*/tool_j*.dag"))) == 70
    assert files_of(forked) == files_of(alone)


def test_an_error_in_a_forked_worker_reaches_the_plan(tmp_path, monkeypatch):
    wf = api.Workflow("many")
    wf.add_jobs(*(api.Job("tool", _id=f"j{k}").add_args(f"{k}") for k in range(8)))
    paths = write(tmp_path, wf, transformations("local", {"tool": "/bin/tool"}))
    monkeypatch.setattr(emit, "PARALLELISM", emit.Parallelism(from_clusters=2, workers=2))
    submit = tmp_path / "submit"
    submit.mkdir()
    (submit / "tool_j5").write_text("a file where the cluster's directory goes\n")
    with pytest.raises(ConfigError, match="tool_j5"):
        plan(
            PlanRequest(
                workflow=paths["workflow"],
                site=load_site("local"),
                cluster=["none"],
                submit_dir=str(submit),
                tc=paths["tc"],
                cleanup="none",
                output_site=None,
                force=True,
            )
        )


def test_a_template_carries_what_clustering_and_the_node_fit_warning_read(tmp_path):
    wf = api.Workflow("clustering-values")
    wf.add_jobs(
        api.Job("tool", _id="a").add_args("a"),
        api.Job("tool", _id="b")
        .add_args("b")
        .add_profiles(api.Namespace.PEGASUS, key="label", value="stage1")
        .add_profiles(api.Namespace.PEGASUS, key="cores", value="2"),
    )
    tc = transformations(
        "local",
        {"tool": "/bin/tool"},
        profiles={"tool": {"clusters.size": "3", "clusters.num": "2", "clusters.maxruntime": "60", "memory": "512"}},
    )
    paths = write(tmp_path, wf, tc)
    site = load_site("local")
    planned = load(PlanRequest(workflow=paths["workflow"], site=site, tc=paths["tc"]))
    lay = datalayout.layout(planned.catalogs, site, str(tmp_path / "submit"), planned.name, None)
    resolved = Resolved(planned, ProfileResolver(planned.catalogs, "label"), site, lay.workdir, ["local", "local"])
    a, b = (resolved.by_index[job.index] for job in planned.jobs)
    assert (a.cluster_label, b.cluster_label) == (None, "stage1")
    assert (b.clusters_num, b.clusters_size, b.clusters_maxruntime) == (2, 3, 60.0)
    assert (a.cpus_asked, b.cpus_asked, b.memory_asked) == (None, ("2", "cores"), ("512", "memory"))


def test_a_plain_job_after_other_transformations_jobs_still_gets_its_transformations_template(tmp_path):
    wf = api.Workflow("runs")
    wf.add_jobs(
        api.Job("tool", _id="a").add_args("a"),
        api.Job("tool", _id="a2").add_args("a2"),
        api.Job("other", _id="e").add_args("e"),
        api.Job("tool", _id="b").add_args("b").add_env(X="1"),
        api.Job("tool", _id="c").add_args("c"),
        api.Job("other", _id="e2").add_args("e2"),
    )
    paths = write(tmp_path, wf, transformations("local", {"tool": "/bin/tool", "other": "/bin/other"}))
    site = load_site("local")
    planned = load(PlanRequest(workflow=paths["workflow"], site=site, tc=paths["tc"]))
    lay = datalayout.layout(planned.catalogs, site, str(tmp_path / "submit"), planned.name, None)
    sites = job_sites(planned.jobs, site.handle)
    resolved = Resolved(planned, ProfileResolver(planned.catalogs, "label"), site, lay.workdir, sites)
    a, a2, e, b, c, e2 = resolved.by_index
    assert a is a2 is c and e is e2 and a.head == "/bin/tool" and e.head == "/bin/other"
    assert b is not a and b.env == (("X", "1"),)
