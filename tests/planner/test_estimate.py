"""Plan-time makespan estimates: the real master on simulated workers, in virtual time."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from pilot.dag.parser import read_dag
from pilot.planner.estimate import DISPATCH_OVERHEAD, estimate_cluster, layout_for, simulate
from pilot.sites import load_site
from tests.planner.wf import api, transformations, write

# prep (1 s) -> six work jobs -> join (1 s)
WORK = [2, 1, 3, 1, 2, 1.5]


def mixed(tmp_path, runtimes=True):
    wf = api.Workflow("mix", infer_dependencies=False)

    def job(tx, jid, seconds):
        j = api.Job(tx, _id=jid).add_args(str(seconds))
        if runtimes:
            j.add_profiles(api.Namespace.PEGASUS, key="runtime", value=str(seconds))
        wf.add_jobs(j)
        return j

    prep = job("prep", "p0", 1)
    works = [job("work", f"w{i}", s) for i, s in enumerate(WORK)]
    join = job("join", "j0", 1)
    wf.add_dependency(prep, children=works)
    wf.add_dependency(join, parents=works)
    return write(
        tmp_path, wf, transformations("local", {"prep": "/bin/sleep", "work": "/bin/sleep", "join": "/bin/sleep"})
    )


def pilot_plan(tmp_path, paths, *extra):
    """Planned without cleanup jobs: the estimates below count the workflow's jobs and its create-dir job, a
    pegasus-transfer call of 2 s (TRANSFER_SECONDS) that every other job waits for."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "plan",
            paths["workflow"],
            "--tc",
            paths["tc"],
            "--site",
            "local",
            "--dir",
            str(tmp_path / "submit"),
            "--cleanup",
            "none",
            *extra,
        ],
        capture_output=True,
        text=True,
    )


def test_plan_prints_the_estimate_of_the_master_in_virtual_time(tmp_path):
    out = pilot_plan(tmp_path, mixed(tmp_path), "--cluster", "whole")
    assert out.returncode == 0, out.stderr
    # 2 workers, FIFO: create-dir 0-2, prep 2-3; w0 3-5, w1 3-4, w2 4-7, w3 5-6, w4 6-8, w5 7-8.5; join 8.5-9.5
    # (+4 ms a task)
    assert "merge_mix  3 ranks  9.5 s" in out.stdout
    assert "workflow end to end: 9.5 s" in out.stdout
    assert "warning" not in out.stdout
    dag = read_dag(str(tmp_path / "submit" / "merge_mix" / "merge_mix.dag"))
    assert [t.runtime for t in dag] == [2.0, 1.0, *WORK, 1.0]
    assert simulate(dag, layout_for(load_site("local"), 3)) == pytest.approx(9.5 + 6 * DISPATCH_OVERHEAD)


def test_end_to_end_follows_the_longest_chain_of_clusters(tmp_path):
    out = pilot_plan(tmp_path, mixed(tmp_path), "--cluster", "horizontal")
    assert out.returncode == 0, out.stderr
    assert re.search(r"^  work_w2 +2 ranks  3.0 s$", out.stdout, re.M)
    assert "workflow end to end: 7.0 s" in out.stdout  # create-dir, prep, the 3 s work job, join


def test_a_cluster_longer_than_the_walltime_gets_a_fix(tmp_path):
    # walltime 18 s: the pilot gets 9 s; after the 2 s create-dir, 4 ranks (3 workers) finish in 6.0 s + overheads
    out = pilot_plan(tmp_path, mixed(tmp_path), "--cluster", "whole", "--set", "walltime=00:00:18")
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("warning"))
    assert "cluster merge_mix: estimated 9.5 s with 3 ranks exceeds the 9 s the pilot gets on local" in line
    assert "Fix: more ranks: 4, e.g. --set ranks_per_node=4;" in line
    assert "clusters.maxruntime <= 9" in line


def test_no_runtimes_no_estimate(tmp_path):
    out = pilot_plan(tmp_path, mixed(tmp_path, runtimes=False), "--cluster", "whole")
    assert out.returncode == 0, out.stderr
    assert "estimated" not in out.stdout


def test_a_hand_written_dag_with_runtimes_is_estimated(tmp_path):
    dag = tmp_path / "hand.dag"
    dag.write_text("#pilot runtime=4\nTASK a /bin/true\n#pilot runtime=1\nTASK b /bin/true\nTASK c /bin/true\n")
    est = estimate_cluster("hand", str(dag), 3, load_site("local"))
    assert est.makespan is None and "1 task(s) without a runtime, e.g. c" in est.note
    dag.write_text(
        "#pilot runtime=4\nTASK a /bin/true\n#pilot runtime=1\nTASK b /bin/true\n#pilot runtime=2\nTASK c /bin/true\n"
    )
    assert estimate_cluster("hand", str(dag), 3, load_site("local")).makespan == pytest.approx(4 + DISPATCH_OVERHEAD)
    out = subprocess.run(
        [sys.executable, "-m", "pilot", "plan", str(dag), "--site", "local", "--dir", str(tmp_path / "s")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "hand  3 ranks  4.0 s" in out.stdout


@pytest.mark.parametrize("value", ["soon", "-3", "nan"])
def test_bad_runtime_profile_is_one_line(tmp_path, value):
    wf = api.Workflow("bad", infer_dependencies=False)
    wf.add_jobs(api.Job("T", _id="a").add_profiles(api.Namespace.PEGASUS, key="runtime", value=value))
    paths = write(tmp_path, wf, transformations("local", {"T": "/bin/true"}))
    out = pilot_plan(tmp_path, paths)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1
    assert "workflow.yml: jobs[0].profiles.pegasus.runtime: " in out.stderr
    assert ("number of seconds" in out.stderr) or ("must not be negative" in out.stderr)


def test_pilot_submit_shows_the_estimate_before_submitting(tmp_path):
    # pilot submit plans with plan_request and prints the plan's lines before the first submission
    from pilot.cli.plan import build_parser, plan_request
    from pilot.planner.plan import plan
    from pilot.sites import load_site

    paths = mixed(tmp_path)
    argv = [
        paths["workflow"],
        "--tc",
        paths["tc"],
        "--site",
        "local",
        "--cluster",
        "whole",
        "--dir",
        str(tmp_path / "s"),
        "--cleanup",
        "none",
    ]
    text = "\n".join(plan(plan_request(build_parser().parse_args(argv), argv, load_site("local"))).lines())
    assert "merge_mix  3 ranks  9.5 s" in text and "workflow end to end: 9.5 s" in text


def test_a_task_that_fits_no_node_is_named_in_the_estimate(tmp_path):
    import dataclasses

    dag = tmp_path / "big.dag"
    dag.write_text("#pilot runtime=1\nTASK small /bin/true\n#pilot runtime=1\nTASK huge -m 5000 /bin/true\n")
    site = dataclasses.replace(load_site("local"), memory_per_node_mb=1000)
    est = estimate_cluster("big", str(dag), 3, site)
    assert est.makespan is None
    assert est.note.startswith(f"{dag}:4: FATAL ERROR: No host is capable of running task huge")
    assert "5000 MB memory" in est.note


def test_on_a_batch_site_more_ranks_means_more_nodes(tmp_path):
    import dataclasses

    dag = tmp_path / "wide.dag"
    dag.write_text("".join(f"#pilot runtime=2\nTASK t{i} /bin/true\n" for i in range(6)))
    site = dataclasses.replace(load_site("local"), scheduler="slurm", nodes=1, ranks_per_node=3, walltime="00:00:12")
    est = estimate_cluster("wide", str(dag), 3, site)  # 2 workers: 3 rounds of 2 s > the 6 s the pilot gets
    assert est.too_long and est.makespan == pytest.approx(6 + 3 * DISPATCH_OVERHEAD)
    # 4 ranks take 2 nodes of 3 ranks: 5 workers, 2 rounds
    assert est.note.startswith("more ranks: 4, e.g. --set nodes=2; clusters.maxruntime <= 6")


def test_a_simulated_run_under_a_wall_time_limit_ends_when_nothing_left_fits(tmp_path):
    """The master reads the virtual clock: on one worker, a (4 s) runs, b (3 s) no longer fits in 6 s, c (1 s) does."""
    dag = tmp_path / "cut.dag"
    dag.write_text(
        "#pilot runtime=4\nTASK a /bin/true\n#pilot runtime=3\nTASK b /bin/true\n#pilot runtime=1\nTASK c /bin/true\n"
    )
    layout = layout_for(load_site("local"), 2)
    assert simulate(read_dag(str(dag)), layout, max_wall_time=0.1) == pytest.approx(5 + 2 * DISPATCH_OVERHEAD)
    assert simulate(read_dag(str(dag)), layout) == pytest.approx(8 + 3 * DISPATCH_OVERHEAD)
