"""pilot report and the plan-time estimate against real runs of sleep tasks under mpiexec."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mpi.helpers import run_pilot

pytestmark = pytest.mark.mpi

# 2 workers on one host of 4 CPUs. F fails twice (0.5 s each) while A runs; then B (2 CPUs) and C.
KNOWN = """\
#@ 1 sleeper A
TASK A /bin/sleep 1
#@ 2 sleeper B
TASK B -c 2 /bin/sleep 2
#@ 3 sleeper C
TASK C /bin/sleep 1
TASK F -t 2 /bin/sh -c "sleep 0.5; exit 3"
EDGE A B
EDGE A C
"""


def report(*args):
    return subprocess.run([sys.executable, "-m", "pilot", "report", *map(str, args)], capture_output=True, text=True)


@pytest.mark.timing
def test_report_numbers_equal_the_hand_computed_ones(tmp_path):
    dag = tmp_path / "known.dag"
    dag.write_text(KNOWN)
    res = run_pilot(["--per-task-stdio", "--jobstate-log", "--host-cpus", "4", str(dag)])
    assert res.returncode == 1, res.stderr  # F failed for good
    out = report(dag, "--json")
    assert out.returncode == 0, out.stderr
    n = json.loads(out.stdout)
    approx = lambda v: pytest.approx(v, abs=0.3)  # noqa: E731 - process start-up around each sleep
    assert n["makespan"] == approx(3.0)  # A, then B
    assert n["busy_slot_seconds"] == approx(5.0)  # 1 + 2 + 1 + 0.5 + 0.5
    assert n["available_slot_seconds"] == approx(6.0)  # 2 slots x 3 s
    assert n["utilisation"] == pytest.approx(5 / 6, abs=0.05)
    assert n["cpu_utilisation"] == pytest.approx(7 / 12, abs=0.05)  # B holds 2 of the 4 CPUs for 2 s
    assert n["critical_path"] == ["A", "B"]
    assert n["critical_path_length"] == approx(3.0)
    assert (n["tasks"], n["succeeded"], n["tries"], n["failures"]) == (4, 3, 5, 2)
    sleeper, sh = n["transformations"]["sleeper"], n["transformations"]["sh"]
    assert (sleeper["tasks"], sleeper["tries"], sleeper["failures"]) == (3, 3, 0)
    assert sleeper["mean"] == approx(4 / 3) and sleeper["p95"] == approx(2.0) and sleeper["total"] == approx(4.0)
    assert (sh["tasks"], sh["tries"], sh["failures"]) == (1, 2, 2)
    assert sh["mean"] == approx(0.5) and sh["total"] == approx(1.0)
    png = Path(n["png"])
    assert png == dag.with_name("known.dag.report.png") and png.read_bytes()[:4] == b"\x89PNG"
    text = report(dag, "--no-png")
    assert "critical path: " in text.stdout and " A -> B" in text.stdout


@pytest.mark.timing
def test_estimate_within_ten_percent_of_the_measured_makespan(tmp_path):
    api = pytest.importorskip("Pegasus.api")
    from tests.planner.wf import transformations, write

    wf = api.Workflow("mixed", infer_dependencies=False)

    def job(jid, seconds, parents=()):
        j = api.Job("sleep", _id=jid).add_args(str(seconds))
        j.add_profiles(api.Namespace.PEGASUS, key="runtime", value=str(seconds))
        wf.add_jobs(j)
        if parents:
            wf.add_dependency(j, parents=list(parents))
        return j

    prep = job("prep", 1)
    works = [job(f"w{i}", s, [prep]) for i, s in enumerate([2, 1, 3, 1, 2, 1.5, 0.5, 2.5])]
    side = job("x2", 1.5, [job("x1", 2)])
    job("join", 1, [*works, side])
    paths = write(tmp_path, wf, transformations("local", {"sleep": "/bin/sleep"}))
    plan = subprocess.run(
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
            "--cluster",
            "whole",
            "--dir",
            str(tmp_path / "submit"),
        ],
        capture_output=True,
        text=True,
    )
    assert plan.returncode == 0, plan.stderr
    m = re.search(r"merge_mixed  3 ranks  ([0-9.]+) s", plan.stdout)
    assert m, plan.stdout
    estimate = float(m.group(1))
    cluster = tmp_path / "submit" / "merge_mixed"
    run = subprocess.run(["bash", str(cluster / "merge_mixed.sh")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    out = report(cluster, "--json", "--no-png")
    assert out.returncode == 0, out.stderr
    measured = json.loads(out.stdout)["makespan"]
    print(f"estimated {estimate:.3f} s, measured {measured:.3f} s, error {(estimate - measured) / measured:+.2%}")
    assert abs(estimate - measured) <= 0.10 * measured


def test_a_wall_time_abort_and_the_rerun_show_in_the_report(tmp_path):
    dag = tmp_path / "chain.dag"
    dag.write_text("TASK A /bin/sleep 2\nTASK B /bin/sleep 3\nEDGE A B\n")
    cut = run_pilot(["--per-task-stdio", "--jobstate-log", "--max-wall-time", "0.05", str(dag)])  # 3 s: B is killed
    assert cut.returncode == 1, cut.stderr
    first = json.loads(report(dag, "--json", "--no-png").stdout)
    assert first["clusters"][0]["runs"][0]["reason"] == "walltime"
    assert (first["tries"], first["failures"], first["killed"]) == (2, 1, 1)
    again = run_pilot(["--per-task-stdio", "--jobstate-log", str(dag)])  # resumes from the rescue log: B only
    assert again.returncode == 0, again.stderr
    out = report(dag, "--json")
    assert out.returncode == 0, out.stderr
    n = json.loads(out.stdout)
    assert [r["reason"] for r in n["clusters"][0]["runs"]] == ["ended early", "done"]
    assert (n["tries"], n["failures"], n["killed"], n["succeeded"]) == (3, 1, 1, 2)
    assert Path(n["png"]).exists()
