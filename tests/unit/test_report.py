"""pilot report on a submit directory laid out as pilot plan / pilot run / pilot submit leave it.

The run's files are written here with pilot's own writers (pilot.contracts), so
every number below is computed by hand from known start times and durations.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pilot.contracts.clusters import ClusterKind, ClusterSpec, PlanInfo, write_clusters
from pilot.contracts.result import RunOutcome, RunResult, result_path, write_result
from pilot.contracts.submitstate import ClusterRecord, ClusterState, SubmitState, state_path
from pilot.contracts.taskrecord import cluster_task

T = 1_800_000_000.0


def task(
    folder: Path,
    name: str,
    start: float,
    duration: float,
    status: int,
    slot: int,
    host: str,
    cpus: int = 1,
    app: str = "/bin/sleep",
    n: int = 0,
) -> None:
    (folder / f"{name}.out.{n:03d}").write_text(
        "output\n" + cluster_task(name, T + start, duration, status, app, host, slot, cpus, 0)
    )


def jobstate(folder: Path, *frames: tuple[float, float, int]) -> None:
    lines = []
    for start, end, code in frames:
        lines += [
            f"{T + start:.6f} INTERNAL *** PMC_STARTED ***",
            f"{T + end:.6f} INTERNAL *** PMC_FINISHED {code} ***",
        ]
    (folder / "jobstate.log").write_text("\n".join(lines) + "\n")


@pytest.fixture
def submit_dir(tmp_path: Path) -> Path:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    write_clusters(
        str(tmp_path),
        PlanInfo("w", "local", "/dev/null", "local"),
        [
            ClusterSpec("first", ClusterKind.LABEL, str(first), str(first / "first.dag"), tasks=3, ranks=3, parents=()),
            ClusterSpec(
                "second",
                ClusterKind.LABEL,
                str(second),
                str(second / "second.dag"),
                tasks=2,
                ranks=3,
                parents=("first",),
            ),
        ],
    )
    (first / "first.dag").write_text(
        "#@ 1 pre a\nTASK a /bin/sleep 1\n#@ 2 pre b\nTASK b -c 2 /bin/sleep 2\n" "TASK c -t 2 /bin/false\nEDGE a b\n"
    )
    task(first, "a", 0, 1, 0, 1, "h1")
    task(first, "b", 1, 2, 0, 1, "h1", cpus=2)
    task(first, "c", 0, 0.5, 1, 2, "h1", app="/bin/false")
    task(first, "c", 0.5, 0.5, 0, 2, "h1", app="/bin/false", n=1)
    jobstate(first, (-1, 3.5, 0))
    (first / "first.dag.resource").write_text(f"{T - 1:.6f},2,4,1000,h1\n{T:.6f},0,2,1000,h1\n")
    (first / f"pilot-abc-first-1.{T - 10}").write_text("#!/bin/bash\n")  # SlurmProvider's name: no suffix
    (second / "second.dag").write_text("TASK d /bin/sleep 5\nTASK e /bin/sleep 1\n")
    task(second, "d", 6, 2, -15, 1, "h2")  # killed at the wall-time abort of the first job
    task(second, "e", 6, 1, 0, 2, "h2")
    task(second, "d", 10, 5, 0, 1, "h2", n=1)  # the resubmitted job runs it again
    jobstate(second, (6, 8.2, 1), (10, 15.1, 0))
    write_result(result_path(str(second / "second.dag")), RunResult(RunOutcome.DONE, 2, 2, [], 0, end=T + 15.1))
    (second / "second.dag.resource").write_text(f"{T + 6:.6f},2,2,1000,h2\n")
    (second / f"parsl.pilot-abc-second-1.{T + 4}.submit").write_text("")
    # the first job's stderr says why its run ended (its result file was replaced by the second run's)
    (second / f"parsl.pilot-abc-second-1.{T + 4}.submit.stderr").write_text(
        "[error] Aborting workflow: max wall time of 0.03 minutes reached\n"
    )
    (second / f"parsl.pilot-abc-second-2.{T + 9}.submit").write_text("")
    state = SubmitState(state_path(str(tmp_path)), plan_id="abc")
    for record in (
        ClusterRecord("first", ClusterState.DONE, attempts=1, job_ids=["11"], job_name="pilot-abc-first-1"),
        ClusterRecord("second", ClusterState.DONE, attempts=2, job_ids=["12", "13"], job_name="pilot-abc-second-2"),
    ):
        state.clusters[record.name] = record
    state.save()
    return tmp_path


def report(*args):
    return subprocess.run([sys.executable, "-m", "pilot", "report", *map(str, args)], capture_output=True, text=True)


def test_numbers_of_a_submit_directory(submit_dir):
    out = report(submit_dir, "--json", "--png", submit_dir / "t.png")
    assert out.returncode == 0, out.stderr
    n = json.loads(out.stdout)
    assert n["makespan"] == pytest.approx(15.0, abs=1e-3)
    assert n["end_to_end"] == pytest.approx(25.0, abs=1e-3)  # from the first submission
    # busy 4 + 8; available: first 2 slots x 3 s, second 2 slots x (2 s + 5 s)
    assert n["busy_slot_seconds"] == pytest.approx(12.0, abs=1e-3)
    assert n["available_slot_seconds"] == pytest.approx(20.0, abs=1e-3)
    assert n["utilisation"] == pytest.approx(0.6, abs=1e-4)
    # CPU-seconds 1 + 2x2 + 0.5 + 0.5 + 8 over 4 CPUs x 3 s + 2 CPUs x 7 s
    assert n["cpu_utilisation"] == pytest.approx(14 / 26, abs=1e-4)
    assert n["critical_path"] == ["first/a", "first/b", "second/d"]
    assert n["critical_path_length"] == pytest.approx(10.0, abs=1e-3)  # 1 + 2 + both tries of d (2 + 5)
    assert (n["tasks"], n["succeeded"], n["tries"], n["failures"], n["killed"]) == (5, 5, 7, 2, 1)
    tx = n["transformations"]
    assert tx["pre"] == pytest.approx({"tasks": 2, "tries": 2, "failures": 0, "mean": 1.5, "p95": 2.0, "total": 3.0})
    assert tx["false"] == pytest.approx({"tasks": 1, "tries": 2, "failures": 1, "mean": 0.5, "p95": 0.5, "total": 1.0})
    assert tx["sleep"] == pytest.approx(
        {"tasks": 2, "tries": 3, "failures": 1, "mean": 8 / 3, "p95": 5.0, "total": 8.0}
    )
    second = n["clusters"][1]
    assert [r["queue_wait"] for r in second["runs"]] == pytest.approx([2.0, 1.0])
    assert [r["job_id"] for r in second["runs"]] == ["12", "13"]
    assert [r["reason"] for r in second["runs"]] == ["walltime", "done"]
    assert n["clusters"][0]["runs"][0]["queue_wait"] == pytest.approx(9.0)
    assert (submit_dir / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_text_report_of_one_cluster(submit_dir):
    out = report(submit_dir / "first", "--no-png")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:4] == [
        "makespan: 3.000 s",
        "utilisation: 66.7% of slot-seconds (4.000 busy / 6.000 available), 50.0% CPU-weighted",
        "critical path: 3.000 s: a -> b",
        "tasks: 3, succeeded 3; tries: 4, failed 1",
    ]
    assert not (submit_dir / "first" / "report.png").exists()


def test_a_directory_with_no_run_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "x.dag").write_text("TASK a /bin/true\n")
    for path in (tmp_path, tmp_path / "x.dag", tmp_path / "missing"):
        out = report(path)
        assert out.returncode == 2
        assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "no run found in this directory" in report(tmp_path).stderr
    assert "missing: no such file or directory" in report(tmp_path / "missing").stderr


def test_records_from_a_captured_stdout_and_no_matplotlib(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "w.dag").write_text("TASK a /bin/sleep 1\nTASK b /bin/sleep 1\n")
    captured = tmp_path / "pilot.out"
    captured.write_text(
        "hello\n"
        + cluster_task("a", T, 1.0, 0, "/bin/sleep", "h", 1, 1, 0)
        + cluster_task("b", T + 0.5, 1.0, 0, "/bin/sleep", "h", 2, 1, 0)
        + cluster_task("other", T, 9.0, 0, "/bin/sleep", "h", 2, 1, 0)
    )  # not a task of this DAG
    assert report(run / "w.dag").returncode == 2
    # matplotlib made unimportable: the text report still comes, with a one-line hint
    code = (
        "import sys; sys.modules['matplotlib'] = None; from pilot.cli.main import main; "
        f"sys.exit(main(['report', {str(run / 'w.dag')!r}, '--stdout', {str(captured)!r}]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("makespan: 1.500 s\nutilisation: 66.7% of slot-seconds (2.000 busy / 3.000 available)")
    assert out.stderr == "pilot report: no timeline: matplotlib is not installed (pip install 'pilot-hpc[plot]')\n"
    assert not list(run.glob("*.png"))


@pytest.mark.parametrize(
    "text, says",
    [
        ("format: 1\nclusters: 5\n", "clusters.yml: clusters: must be a list of clusters; re-plan with pilot plan"),
        ("format: 1\nclusters:\n- name: x\n", "clusters.yml: cluster #1: bad or missing field"),
        ("format: 1\nclusters: [\n", "clusters.yml:3: not valid YAML"),
        ("format: 1\nclusters: *a\n", "clusters.yml:2: alias *a names no anchor"),
        (
            "format: 1\nclusters: !!python/object:os.system x\n",
            "clusters.yml:2: tag !!python/object:os.system is not allowed",
        ),
        ("clusters: []\n", "clusters.yml: cluster DAG format None, this pilot reads format 1"),
    ],
)
def test_a_broken_clusters_file_is_one_line(tmp_path, text, says):
    (tmp_path / "clusters.yml").write_text(text)
    out = report(tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert says in out.stderr


def test_a_png_path_that_cannot_be_written_is_one_line_and_exit_2(submit_dir, tmp_path):
    pytest.importorskip("matplotlib")
    out = report(submit_dir, "--png", tmp_path / "missing" / "x.png")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "cannot write the timeline" in out.stderr


def test_lines_no_pilot_wrote_are_skipped_not_a_crash(submit_dir):
    """A jobstate.log time that is not a time (inf, nan) and a record whose duration is not a number."""
    from pilot.report.runs import load

    first = submit_dir / "first"
    with open(first / "jobstate.log", "a") as fh:
        fh.write("inf INTERNAL *** PMC_STARTED ***\nnan INTERNAL *** PMC_FINISHED 0 ***\n")
    with open(first / "a.out.000", "a") as fh:
        fh.write(cluster_task("a", T, 1, 0, "/bin/sleep", "h1", 3, 1, 0).replace("duration=1.000", "duration=1.2.3"))
        fh.write(
            cluster_task("a", T, 1, 0, "/bin/sleep", "h1", 4, 1, 0).replace("duration=1.000", "duration=" + "9" * 400)
        )
    runs = {c.name: c for c in load(str(submit_dir))}
    assert [(r.start, r.end) for r in runs["first"].runs] == [(T - 1, T + 3.5)]
    assert len(runs["first"].attempts) == 4
