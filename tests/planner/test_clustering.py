"""Clustering as the Pegasus manual and pegasus-plan do it, on workflows written by Pegasus.api."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pilot.dag import read_dag
from pilot.errors import ConfigError
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site
from tests.planner.wf import api, jobs, transformations, write

SITE = "local"


def run_plan(tmp_path, paths, cluster, site="local", **kw):
    req = PlanRequest(
        workflow=paths["workflow"],
        site=load_site(site),
        cluster=cluster.split(",") if cluster else [],
        submit_dir=str(tmp_path / "submit"),
        conf=paths.get("conf"),
        tc=paths.get("tc"),
        sc=paths.get("sc"),
        **kw,
    )
    return plan(req)


def compute(result):
    """The clusters of the workflow's own jobs (each data job the planner adds is a cluster of its own)."""
    return [e for e in result.emitted if e.cluster.kind != "data"]


def sizes(result, tx="B"):
    """Task counts of the clusters holding jobs of transformation ``tx`` (a chunk of one stays a plain job)."""
    return sorted((len(e.cluster.jobs) for e in compute(result) if e.cluster.jobs[0].name == tx), reverse=True)


def four_b(tmp_path, **profiles):
    wf = api.Workflow("hz", infer_dependencies=False)
    a = api.Job("A", _id="A0")
    wf.add_jobs(a)
    bs = jobs(wf, "B", 4)
    wf.add_dependency(a, children=bs)
    tc = transformations(SITE, {"A": "/bin/echo", "B": "/bin/echo"}, {"B": profiles})
    return write(tmp_path, wf, tc)


def test_clusters_size_3_gives_3_plus_1(tmp_path):
    assert sizes(run_plan(tmp_path, four_b(tmp_path, **{"clusters.size": 3}), "horizontal")) == [3, 1]


def test_clusters_num_3_gives_2_1_1(tmp_path):
    assert sizes(run_plan(tmp_path, four_b(tmp_path, **{"clusters.num": 3}), "horizontal")) == [2, 1, 1]


def test_num_beats_size(tmp_path):
    assert sizes(run_plan(tmp_path, four_b(tmp_path, **{"clusters.num": 3, "clusters.size": 3}), "horizontal")) == [
        2,
        1,
        1,
    ]


def test_no_factor_no_clustering(tmp_path):
    res = run_plan(tmp_path, four_b(tmp_path), "horizontal")
    assert sizes(res) == [1, 1, 1, 1] and len(compute(res)) == 5


def test_levels_are_longest_paths(tmp_path):
    """X feeds B2 directly and through Y: B2 sits on level 3, so it is not clustered with B0, B1 (level 2)."""
    wf = api.Workflow("lv", infer_dependencies=False)
    x, y = api.Job("X", _id="X"), api.Job("Y", _id="Y")
    b = jobs(wf, "B", 3)
    wf.add_jobs(x, y)
    wf.add_dependency(x, children=[b[0], b[1], y, b[2]])
    wf.add_dependency(y, children=[b[2]])
    tc = transformations(SITE, {"X": "/bin/echo", "Y": "/bin/echo", "B": "/bin/echo"}, {"B": {"clusters.size": 5}})
    res = run_plan(tmp_path, write(tmp_path, wf, tc), "horizontal")
    clusters = {e.cluster.name: [j.id for j in e.cluster.jobs] for e in compute(res)}
    assert clusters["merge_B_L2_1"] == ["B0", "B1"] and "B_B2" in clusters


def runtime_wf(tmp_path, runtimes, tx_profiles, props=None):
    wf = api.Workflow("rt", infer_dependencies=False)
    for i, rt in enumerate(runtimes):
        j = api.Job("C", _id=f"C{i}")
        if rt is not None:
            j.add_profiles(api.Namespace.PEGASUS, key="runtime", value=rt)
        wf.add_jobs(j)
    tc = transformations(SITE, {"C": "/bin/echo"}, {"C": tx_profiles})
    return write(tmp_path, wf, tc, props=props or {"pegasus.clusterer.preference": "Runtime"})


def members(res):
    return sorted(sorted(j.id for j in e.cluster.jobs) for e in compute(res))


def test_runtime_maxruntime_first_fit_decreasing(tmp_path):
    # 100,100,100 under 300 fit one bin; 250 alone; 400 > 300 stays unclustered
    paths = runtime_wf(tmp_path, [100, 250, 100, 400, 100, 50], {"clusters.maxruntime": 300})
    res = run_plan(tmp_path, paths, "horizontal")
    assert members(res) == [["C0", "C2", "C4"], ["C1", "C5"], ["C3"]]
    assert all(e.cluster.runtime <= 300 for e in compute(res) if e.cluster.kind == "horizontal")


def test_runtime_num_balances(tmp_path):
    paths = runtime_wf(tmp_path, [100, 90, 80, 30, 20, 10], {"clusters.num": 2})
    res = run_plan(tmp_path, paths, "horizontal")
    loads = sorted(e.cluster.runtime for e in compute(res))
    assert loads == [160.0, 170.0]


def test_runtime_clustering_needs_runtime(tmp_path):
    paths = runtime_wf(tmp_path, [100, None], {"clusters.num": 2})
    with pytest.raises(
        ConfigError,
        match=r"workflow.yml: jobs\[1\] \(id C1\): runtime clustering .* needs the pegasus profile 'runtime'",
    ):
        run_plan(tmp_path, paths, "horizontal")


def test_runtime_without_maxruntime_or_num_merges_the_group(tmp_path, caplog):
    """pegasus-plan (Horizontal.java): a clustering factor but neither maxruntime nor num: one job, and a warning."""
    paths = runtime_wf(tmp_path, [10, 30, 20], {"clusters.size": 2})
    with caplog.at_level("INFO", logger="pilot.planner"):
        res = run_plan(tmp_path, paths, "horizontal")
    assert members(res) == [["C0", "C1", "C2"]]
    assert [j.id for j in compute(res)[0].cluster.jobs] == [
        "C1",
        "C2",
        "C0",
    ]  # decreasing runtime, as bin packing orders
    warned = [r for r in caplog.records if r.levelname == "WARNING"]
    assert (
        len(warned) == 1
        and "neither clusters.maxruntime nor clusters.num is set, so they become one clustered job" in warned[0].message
    )
    assert "3 C jobs on level 1, site local" in warned[0].message


def test_runtime_without_any_factor_leaves_jobs_single_and_says_why(tmp_path, caplog):
    paths = runtime_wf(tmp_path, [10, None, 20], {})
    with caplog.at_level("INFO", logger="pilot.planner"):
        res = run_plan(tmp_path, paths, "horizontal")
    assert members(res) == [["C0"], ["C1"], ["C2"]]  # no runtime needed for jobs that are not clustered
    assert any(
        "no clusters.maxruntime, clusters.num or clusters.size: not clustered" in r.message for r in caplog.records
    )


def test_pmc_arguments_is_pmc_task_arguments(tmp_path):
    """The PMC man page's name for the profile; and job.runtime, the older name of runtime."""
    wf = api.Workflow("pa", infer_dependencies=False)
    j = api.Job("T", _id="x").add_profiles(api.Namespace.PEGASUS, key="pmc_arguments", value="-t 4")
    j.add_profiles(api.Namespace.PEGASUS, key="job.runtime", value=12)
    wf.add_jobs(j)
    res = run_plan(tmp_path, write(tmp_path, wf, transformations(SITE, {"T": "/bin/echo"})), "whole")
    assert read_dag(compute(res)[0].dag)["T_x"].tries == 4
    assert compute(res)[0].cluster.runtime == 12.0


def test_two_names_of_one_profile_are_an_error(tmp_path):
    wf = api.Workflow("pd", infer_dependencies=False)
    j = api.Job("T", _id="x").add_profiles(api.Namespace.PEGASUS, key="pmc_arguments", value="-t 4")
    wf.add_jobs(j.add_profiles(api.Namespace.PEGASUS, key="pmc_task_arguments", value="-t 5"))
    with pytest.raises(
        ConfigError,
        match=r"jobs\[0\].profiles.pegasus.pmc_task_arguments: pmc_task_arguments and "
        r"pmc_arguments name the same profile: keep one",
    ):
        run_plan(tmp_path, write(tmp_path, wf, transformations(SITE, {"T": "/bin/echo"})), "whole")


def test_pmc_arguments_in_properties(tmp_path):
    wf = api.Workflow("pp", infer_dependencies=False)
    wf.add_jobs(api.Job("T", _id="x"))
    paths = write(tmp_path, wf, transformations(SITE, {"T": "/bin/echo"}), props={"pegasus.pmc_arguments": "-t 2"})
    res = run_plan(tmp_path, paths, "whole")
    assert read_dag(compute(res)[0].dag)["T_x"].tries == 2


def label_wf(tmp_path, key="label", cycle=False, sites=None):
    wf = api.Workflow("lb", infer_dependencies=False)
    names = ["a", "b", "c", "d", "e"]
    made = {}
    for n in names:
        j = api.Job("T", _id=n).add_args(n)
        label = {"a": "one", "b": "one", "c": None if cycle else "two", "d": "two", "e": "one" if cycle else None}[n]
        if label:
            j.add_profiles(api.Namespace.PEGASUS, key=key, value=label)
        if sites and n in sites:
            j.add_profiles(api.Namespace.SELECTOR, key="execution.site", value=sites[n])
        made[n] = j
        wf.add_jobs(j)
    wf.add_dependency(made["a"], children=[made["b"], made["c"]])
    wf.add_dependency(made["b"], children=[made["d"]])
    wf.add_dependency(made["c"], children=[made["d"], made["e"]])
    props = {"pegasus.clusterer.label.key": key} if key != "label" else None
    tc = transformations(SITE, {"T": "/bin/echo"})
    if sites:
        tc.transformations[next(iter(tc.transformations))].add_sites(
            api.TransformationSite("other", "/bin/echo", is_stageable=False)
        )
    return write(tmp_path, wf, tc, props=props)


def test_label_clustering_keeps_every_cross_edge(tmp_path):
    res = run_plan(tmp_path, label_wf(tmp_path), "label")
    by = {e.cluster.name: e for e in compute(res)}
    assert [j.id for j in by["merge_one"].cluster.jobs] == ["a", "b"]
    assert [j.id for j in by["merge_two"].cluster.jobs] == ["c", "d"]
    assert "T_e" in by  # unlabelled: single
    assert [p.name for p in by["merge_two"].cluster.parents] == ["merge_one"]  # a->c and b->d both kept
    assert [p.name for p in by["T_e"].cluster.parents] == ["merge_two"]
    dag = read_dag(by["merge_one"].dag)
    assert [c.name for c in dag["T_a"].children] == ["T_b"]


def test_label_key_property(tmp_path):
    res = run_plan(tmp_path, label_wf(tmp_path, key="user_label"), "label")
    assert {e.cluster.name for e in compute(res)} == {"merge_one", "merge_two", "T_e"}


def test_label_cycle_names_labels(tmp_path):
    with pytest.raises(ConfigError, match=r"clusters form a cycle: .*one.*T_c.*"):
        run_plan(tmp_path, label_wf(tmp_path, cycle=True), "label")


def test_label_on_two_sites_is_an_error(tmp_path):
    paths = label_wf(tmp_path, sites={"b": "other"})
    with pytest.raises(ConfigError, match=r"jobs of label 'one' are on sites"):
        run_plan(tmp_path, paths, "label", site="local")


def test_whole_and_recursive(tmp_path):
    res = run_plan(tmp_path, label_wf(tmp_path), "whole")
    assert [len(e.cluster.jobs) for e in compute(res)] == [7]  # the workflow's 5, its create-dir and its cleanup
    assert [j.id for j in compute(res)[0].cluster.jobs] == [
        "create_dir_lb_0_local",
        "a",
        "b",
        "c",
        "d",
        "e",
        "cleanup_lb_0_local",
    ]


def test_recursive_label_then_horizontal(tmp_path):
    wf = api.Workflow("rc", infer_dependencies=False)
    top = api.Job("S", _id="s").add_profiles(api.Namespace.PEGASUS, key="label", value="head")
    top2 = api.Job("S", _id="s2").add_profiles(api.Namespace.PEGASUS, key="label", value="head")
    wf.add_jobs(top, top2)
    leaves = jobs(wf, "L", 4)
    wf.add_dependency(top, children=[top2])
    wf.add_dependency(top2, children=leaves)
    tc = transformations(SITE, {"S": "/bin/echo", "L": "/bin/echo"}, {"L": {"clusters.size": 2}})
    res = run_plan(tmp_path, write(tmp_path, wf, tc), "label,horizontal")
    got = sorted((e.cluster.kind, len(e.cluster.jobs)) for e in compute(res))
    assert got == [("horizontal", 2), ("horizontal", 2), ("label", 2)]


def test_unknown_technique(tmp_path):
    with pytest.raises(ConfigError, match="unknown clustering technique 'vertical'"):
        run_plan(tmp_path, four_b(tmp_path), "vertical")


def test_none_means_every_job_alone_and_stands_alone(tmp_path):
    paths = four_b(tmp_path, **{"clusters.size": 2})
    assert len(compute(run_plan(tmp_path, paths, "none"))) == 5
    with pytest.raises(ConfigError, match="none \\(no clustering\\) stands alone"):
        run_plan(tmp_path, paths, "label,none", force=True)


def test_library_default_is_the_cli_default(tmp_path):
    from pilot.planner.clustering import DEFAULT_CLUSTER

    paths = four_b(tmp_path)
    res = plan(
        PlanRequest(workflow=paths["workflow"], site=load_site(SITE), tc=paths["tc"], submit_dir=str(tmp_path / "s"))
    )
    assert DEFAULT_CLUSTER == "whole" and [e.cluster.kind for e in compute(res)] == ["whole"]


def test_profile_overloading_order(tmp_path):
    """transformation catalog > site catalog > job > properties."""
    wf = api.Workflow("ov", infer_dependencies=False)
    j1 = api.Job("T", _id="j1").add_profiles(api.Namespace.PEGASUS, key="pmc_priority", value=3)
    j1.add_profiles(api.Namespace.PEGASUS, key="pmc_request_cpus", value=2)
    j2 = api.Job("U", _id="j2").add_profiles(api.Namespace.PEGASUS, key="pmc_request_cpus", value=2)
    wf.add_jobs(j1, j2)
    tc = transformations(SITE, {"T": "/bin/echo", "U": "/bin/echo"}, {"T": {"pmc_request_cpus": 4}})
    sc = api.SiteCatalog().add_sites(
        api.Site(SITE)
        .add_profiles(api.Namespace.PEGASUS, key="pmc_priority", value=7)
        .add_profiles(api.Namespace.PEGASUS, key="pmc_request_memory", value=64)
    )
    res = run_plan(
        tmp_path,
        write(tmp_path, wf, tc, sc, props={"pegasus.pmc_request_memory": "10", "pegasus.pmc_priority": "1"}),
        "whole",
    )
    dag = read_dag(compute(res)[0].dag)
    t, u = dag["T_j1"], dag["U_j2"]
    assert (t.cpus, t.priority, t.memory) == (4, 7, 64)  # tc beats job (cpus); sc beats job (priority); sc beats props
    assert (u.cpus, u.priority, u.memory) == (2, 7, 64)


def test_pmc_profiles_and_task_arguments(tmp_path):
    wf = api.Workflow("pm", infer_dependencies=False)
    j = api.Job("T", _id="ID0000001").add_args("-a", "1", "two words")
    for key, value in (
        ("pmc_request_memory", 1024),
        ("pmc_request_cpus", 4),
        ("pmc_priority", 10),
        ("pmc_task_arguments", "-t 3 -f A=/tmp/a"),
    ):
        j.add_profiles(api.Namespace.PEGASUS, key=key, value=value)
    wf.add_jobs(j)
    res = run_plan(tmp_path, write(tmp_path, wf, transformations(SITE, {"T": "/path/to/mytask"})), "whole")
    text = Path(compute(res)[0].dag).read_text()
    # Pegasus joins the argument list into one line, which PMC splits: "two words" is two words
    assert (
        "#@ 2 T ID0000001\nTASK T_ID0000001 -m 1024 -c 4 -p 10 -t 3 -f A=/tmp/a /path/to/mytask -a 1 two words\n"
        in text
    )
    t = read_dag(compute(res)[0].dag)["T_ID0000001"]
    assert (t.memory, t.cpus, t.priority, t.tries, t.pipe_forwards) == (1024, 4, 10, 3, [("A", "/tmp/a")])
    assert t.argv == ["/path/to/mytask", "-a", "1", "two", "words"]


def test_sub_file_has_the_request_of_each_task(tmp_path):
    """+pegasus_cores/_memory_mb/_gpus: what each task of the cluster asks for, pmc_task_arguments included."""
    wf = api.Workflow("req", infer_dependencies=False)
    for ident, label, profiles in (
        ("s1", "same", {"pmc_request_memory": "1 GB", "pmc_request_cpus": 2, "pmc_task_arguments": "-g 1"}),
        ("s2", "same", {"pmc_request_memory": "1 GB", "pmc_request_cpus": 2, "pmc_task_arguments": "-t 2 -g 1"}),
        ("m1", "mixed", {"pmc_request_memory": "300 MB", "pmc_task_arguments": "-c 3 -m 250.5"}),
        ("m2", "mixed", {"pmc_request_cpus": 3}),
    ):
        job = api.Job("T", _id=ident).add_pegasus_profile(label=label, **profiles)
        wf.add_jobs(job)
    run_plan(tmp_path, write(tmp_path, wf, transformations(SITE, {"T": "/bin/echo"})), "label")
    same = (tmp_path / "submit" / "merge_same" / "merge_same.sub").read_text()
    assert "+pegasus_cores = 2\n+pegasus_memory_mb = 1024\n+pegasus_gpus = 1\n" in same
    mixed = (tmp_path / "submit" / "merge_mixed" / "merge_mixed.sub").read_text()
    # -c 3 in pmc_task_arguments wins as it does in pilot run; m1 asks for 251 MB (-m rounded up), m2 for none
    assert "+pegasus_cores = 3\n" in mixed and "pegasus_memory_mb" not in mixed and "pegasus_gpus" not in mixed


def test_cluster_dag_file_and_monitoring_files(tmp_path):
    """A cluster's braindump always; its own static.bp only when asked for (the root static.bp maps every task)."""
    paths = label_wf(tmp_path)
    bare = run_plan(tmp_path / "bare", paths, "label")
    assert not list(Path(bare.submit_dir).glob("*/*.static.bp"))
    assert all((Path(e.dag).parent / "braindump.yml").exists() for e in compute(bare))
    res = run_plan(tmp_path, paths, "label", cluster_static_bp=True)
    data = yaml.safe_load((tmp_path / "submit" / "clusters.yml").read_text())
    assert {c["name"]: c["parents"] for c in data["clusters"]} == {
        "create_dir_lb_0_local": [],
        "merge_one": ["create_dir_lb_0_local"],
        "merge_two": ["merge_one"],
        "T_e": ["merge_two"],
        "cleanup_lb_0_local": ["merge_two", "T_e"],
    }
    assert {c["name"]: c["kind"] for c in data["clusters"]}["create_dir_lb_0_local"] == "data"
    for e in compute(res):
        d = tmp_path / "submit" / e.cluster.name
        assert (d / "braindump.yml").exists() and (d / f"{e.cluster.name}.static.bp").exists()
        bd = yaml.safe_load((d / "braindump.yml").read_text())
        assert bd["wf_uuid"] == bd["root_wf_uuid"] and bd["dag"] == f"{e.cluster.name}.dag"


def test_cores_memory_and_gpus_profiles_become_the_task_request_unless_pmc_keys_say_otherwise(tmp_path):
    """As Pegasus' PMC code generator: -c from cores and -m from memory (MB) where pmc_request_* are unset, so
    three 8-core jobs never run at once on a 2-core host; gpus becomes pilot's -g."""
    wf = api.Workflow("res", infer_dependencies=False)
    a = api.Job("T", _id="a").add_pegasus_profile(cores=8, memory=4096, gpus=1)
    b = api.Job("T", _id="b").add_pegasus_profile(cores=8, memory=4096, pmc_request_cpus=2, pmc_request_memory=100)
    wf.add_jobs(a, b)
    res = run_plan(tmp_path, write(tmp_path, wf, transformations(SITE, {"T": "/bin/true"})), "whole")
    tasks = read_dag(compute(res)[0].dag)
    assert (tasks["T_a"].cpus, tasks["T_a"].memory, tasks["T_a"].gpus) == (8, 4096, 1)
    assert (tasks["T_b"].cpus, tasks["T_b"].memory, tasks["T_b"].gpus) == (2, 100, 0)


def test_an_argument_list_reaches_the_task_as_pegasus_passes_it(tmp_path):
    """Pegasus joins the list with spaces into one command line, which PMC splits: rosetta's "-database
    ./database" and casa-wind's "-q 235 -z 11.176,38" are several words; quotes group words, as in PMC."""
    wf = api.Workflow("args", infer_dependencies=False)
    fa = api.File("f.a")
    wf.add_jobs(
        api.Job("T", _id="rosetta").add_args("-database ./database", "-in:file:s", fa),
        api.Job("T", _id="casa").add_args("-q 235 -z 11.176,38"),
        api.Job("T", _id="quoted").add_args("--title", "'two words'", "a\\ b"),
    )
    res = run_plan(tmp_path, write(tmp_path, wf, transformations(SITE, {"T": "/bin/prog"})), "whole")
    tasks = read_dag(compute(res)[0].dag)
    assert tasks["T_rosetta"].argv == ["/bin/prog", "-database", "./database", "-in:file:s", "f.a"]
    assert tasks["T_casa"].argv == ["/bin/prog", "-q", "235", "-z", "11.176,38"]
    assert tasks["T_quoted"].argv == ["/bin/prog", "--title", "two words", "a b"]


@pytest.mark.parametrize(
    "arg, message",
    [
        ("it's", r"jobs\[0\].arguments: unterminated quote in .*close the quote, or escape it with a backslash"),
        ("a\nTASK evil /bin/rm -rf /", r"jobs\[0\].arguments\[0\]: an argument cannot hold a newline or NUL"),
    ],
)
def test_an_argument_that_cannot_be_one_command_line_is_refused(tmp_path, arg, message):
    wf = api.Workflow("bad", infer_dependencies=False).add_jobs(api.Job("T", _id="j").add_args(arg))
    with pytest.raises(ConfigError, match=message):
        run_plan(tmp_path, write(tmp_path, wf, transformations(SITE, {"T": "/bin/prog"})), "whole")


def batch_wf(tmp_path):
    wf = api.Workflow("batch", infer_dependencies=False)
    a = api.Job("T", _id="a").add_pegasus_profile(
        queue="debug", project="m1234", glite_arguments='--qos=regular --constraint="haswell" --licenses=SCRATCH'
    )
    b = api.Job("T", _id="b").add_profiles(api.Namespace.CONDOR, key="request_memory", value="4096")
    b.add_pegasus_profile(project="m9999")  # the later job of the cluster wins, as Pegasus merges clustered jobs
    return write(tmp_path, wf.add_jobs(a, b), transformations(SITE, {"T": "/bin/true"}))


@pytest.mark.parametrize(
    "site, sets, lines",
    [
        (
            "container",
            {"pegasus_site": "local"},
            [
                "#SBATCH --partition=debug",
                "#SBATCH --account=m9999",
                "#SBATCH --mem=4096",
                "#SBATCH --qos=regular --constraint=haswell --licenses=SCRATCH",
            ],
        ),
        (
            "polaris",
            {"account": "site-acct", "pegasus_site": "local"},
            [
                "#PBS -q debug",
                "#PBS -A m9999",
                "#PBS -l mem=4096mb",
                "#PBS --qos=regular --constraint=haswell --licenses=SCRATCH",
            ],
        ),
    ],
)
def test_queue_project_glite_arguments_and_request_memory_reach_the_batch_script(tmp_path, site, sets, lines):
    """Pegasus' glite mapping for Slurm and PBS; the script pilot plan writes and the one pilot submit renders
    from clusters.yml are the same."""
    from pilot.contracts.clusters import read_clusters
    from pilot.jobrequest import pilot_args, request_for
    from providers import script_for

    paths = batch_wf(tmp_path)
    req = PlanRequest(
        workflow=paths["workflow"],
        site=load_site(site, sets),
        cluster=["whole"],
        submit_dir=str(tmp_path / "submit"),
        tc=paths.get("tc"),
    )
    (e,) = compute(plan(req))
    script = Path(e.script).read_text().splitlines()
    assert all(line in script for line in lines), script
    (spec,) = [s for s in read_clusters(str(tmp_path / "submit")) if s.name == e.cluster.name]
    again = request_for(
        req.site,
        spec.name,
        spec.dir,
        pilot_args(req.site, Path(spec.dag).name),
        ranks=spec.ranks,
        queue=spec.queue,
        account=spec.account,
        directives=spec.directives,
    )
    assert script_for(req.site, again)[1].splitlines() == script


def test_a_batch_option_that_cannot_be_a_directive_is_refused(tmp_path):
    wf = api.Workflow("bad", infer_dependencies=False)
    wf.add_jobs(api.Job("T", _id="a").add_pegasus_profile(glite_arguments="--comment=$(reboot)"))
    with pytest.raises(ConfigError, match=r"jobs\[0\].*glite.arguments .* cannot go into a batch directive"):
        run_plan(tmp_path, write(tmp_path, wf, transformations(SITE, {"T": "/bin/true"})), "whole", site="local")


@pytest.mark.parametrize("cluster", ["none", "horizontal"])
def test_jobs_whose_names_and_ids_join_alike_get_two_clusters(tmp_path, cluster):
    """Jobs a_b + c and a + b_c both make a_b_c: the second cluster is counted (a_b_c_2), as merge_ clusters
    are, and each has its own directory and DAG with its own job (one shared directory ran one of them)."""
    wf = api.Workflow("coll", infer_dependencies=False)
    wf.add_jobs(api.Job("a_b", _id="c").add_args("first"), api.Job("a", _id="b_c").add_args("second"))
    paths = write(tmp_path, wf, transformations(SITE, {"a_b": "/bin/echo", "a": "/bin/echo"}))
    res = run_plan(tmp_path, paths, cluster, output_site=None)
    clusters = {e.cluster.name: e for e in compute(res)}
    assert sorted(clusters) == ["a_b_c", "a_b_c_2"]
    argv = {name: [t.argv[1:] for t in read_dag(e.dag).tasks.values()] for name, e in clusters.items()}
    assert argv == {"a_b_c": [["first"]], "a_b_c_2": [["second"]]}
    assert clusters["a_b_c"].dag != clusters["a_b_c_2"].dag
