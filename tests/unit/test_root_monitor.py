"""Root monitoring files without pegasus-wms: what the planner writes, what the driver's events write."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pilot.contracts.result import RunOutcome, RunResult, result_path, write_result
from pilot.contracts.rootfiles import RootJob, RootTask, write_root_files
from pilot.errors import ConfigError
from pilot.monitor import joboutput
from pilot.monitor.kickstart import xml_invocation
from pilot.monitor.root import Phase, RootMonitor
from pilot.submit.monitord import RECOVER, Monitord, require_root_files


def make_dir(tmp_path: Path) -> Path:
    """a -> b, a -> c; a has two tasks (one asks for 100 MB), b one (with 2 CPUs, 512 MB, 1 GPU), c one."""
    sub = tmp_path / "sub"
    jobs = [
        RootJob(
            "a",
            "siteA",
            [RootTask("ID1", "ns::t:1", "x 'y z'", ["ID2"], memory=100), RootTask("ID2", "t", "", ["ID3", "ID4"])],
            [],
            ["mpiexec", "-n", "3", "pilot", "run", "a.dag"],
        ),
        RootJob(
            "b",
            "siteA",
            [RootTask("ID3", "t", "3", cpus=2, memory=512, gpus=1)],
            ["a"],
            ["mpiexec", "pilot", "run", "b.dag"],
        ),
        RootJob("c", "siteB", [RootTask("ID4", "t", "4")], ["a"], ["mpiexec", "pilot", "run", "c.dag"]),
    ]
    for j in jobs:
        (sub / j.name).mkdir(parents=True)
    write_root_files(str(sub), "wf", jobs, "--site x wf.yml", wf_uuid="u-1")
    return sub


def test_plan_time_files(tmp_path):
    sub = make_dir(tmp_path)
    dag = (sub / "wf-0.dag").read_text()
    assert "JOB a a/a.sub\n" in dag and "PARENT a CHILD b\n" in dag and "PARENT a CHILD c\n" in dag
    assert re.search(r"^SCRIPT POST b \S+ -m pilot.monitor.joboutput \S+/b b$", dag, re.M)
    bp = (sub / "wf-0.static.bp").read_text()
    assert bp.count("event=task.info") == 4 and bp.count("event=wf.map.task_job") == 4
    assert 'event=wf.map.task_job xwf.id=u-1 job.id="a" task.id="ID2"' in bp
    assert 'event=task.edge xwf.id=u-1 parent.task.id="ID2" child.task.id="ID4"' in bp  # edges between clusters too
    assert 'job.id="a" submit_file="a/a.sub"' in bp and 'clustered="1"' in bp and 'task_count="2"' in bp
    assert 'event=job.edge xwf.id=u-1 parent.job.id="a" child.job.id="c"' in bp
    assert "argv=\"x 'y z'\"" in bp and 'transformation="ns::t:1"' in bp
    sub_b = (sub / "b" / "b.sub").read_text()
    assert (
        f"output = {sub}/b/b.out\n" in sub_b and '+pegasus_site = "siteA"' in sub_b and "+pegasus_cores = 2\n" in sub_b
    )
    # what each task asks for, as Pegasus' planner writes a job's request (monitord: req_memory_mb, req_gpus)
    assert "+pegasus_memory_mb = 512\n" in sub_b and "+pegasus_gpus = 1\n" in sub_b
    sub_a, sub_c = (sub / "a" / "a.sub").read_text(), (sub / "c" / "c.sub").read_text()
    assert "+pegasus_cores = 1\n" in sub_a and "+pegasus_cores = 1\n" in sub_c
    # a's tasks disagree on memory, c asks for none: no line rather than a number no task asked for
    for text in (sub_a, sub_c):
        assert "pegasus_memory_mb" not in text and "pegasus_gpus" not in text
    brain = (sub / "braindump.yml").read_text()
    assert 'dag: "wf-0.dag"' in brain and 'wf_uuid: "u-1"' in brain and 'root_wf_uuid: "u-1"' in brain


def test_older_submit_directory_is_one_line_error(tmp_path):
    (tmp_path / "clusters.yml").write_text("clusters: []\n")
    with pytest.raises(ConfigError, match=r"older pilot .* plan it again"):
        RootMonitor(str(tmp_path))
    with pytest.raises(ConfigError, match=r"^\S+: planned by an older pilot"):
        require_root_files(str(tmp_path))


def finish_attempt(sub: Path, name: str, ok: bool, reason: str = "done") -> None:
    (sub / name / f"{name}.out").write_text(xml_invocation("t", "ID", 0.0, 1.0, 0 if ok else 3, ["/bin/true"], "h"))
    write_result(
        result_path(str(sub / name / f"{name}.dag")),
        RunResult(RunOutcome(reason), 1, 1 if ok else 0, [], 0 if ok else 1),
    )


def lines(sub: Path) -> list[str]:
    return [line[18:] for line in (sub / "wf-0.dag.dagman.out").read_text().splitlines()]


def test_events_write_dagman_out_jobstate_and_job_outputs(tmp_path):
    sub = make_dir(tmp_path)
    m = RootMonitor(str(sub))
    m.start()
    m.submitted("a", "777", "siteA")
    assert m.counts() == {"done": 0, "queued": 1, "ready": 0, "failed": 0, "unready": 2}
    m.running("a")
    finish_attempt(sub, "a", ok=True)
    m.ended("a", retry=False, retry_limit=3)
    assert m.counts()["ready"] == 2
    m.submitted("b", "778", "siteA")
    finish_attempt(sub, "b", ok=False, reason="walltime")
    m.ended("b", retry=True, retry_limit=3)  # resubmitted: a retry of the same node
    m.submitted("b", "779", "siteA")
    m.running("b")
    finish_attempt(sub, "b", ok=True)
    m.ended("b", retry=False, retry_limit=3)
    m.submitted("c", "780", "siteB")
    finish_attempt(sub, "c", ok=False, reason="failed")
    m.ended("c", retry=False, retry_limit=3)
    m.finished(1)
    m.close()

    out = lines(sub)
    assert "Submitting HTCondor Node b job(s)..." in out and out.count("Submitting HTCondor Node b job(s)...") == 2
    assert "Event: ULOG_EXECUTE for HTCondor Node b (2.0.0) {" in "\n".join(out)  # added when never seen running
    assert "Node b job proc (2.0.0) failed with status 1." in out
    assert "POST Script of Node b failed with status 1." in out and "Retrying node b (retry #1 of 3)..." in out
    assert "Node b job proc (3.0.0) completed successfully." in out
    assert "POST Script of Node c failed with status 1." in out
    assert out[-1].endswith("EXITING WITH STATUS 1")
    assert out[-2].split() == ["2", "0", "0", "0", "0", "0", "1"]  # Done Pre Queued Post Ready Un-Ready Failed
    assert (
        (sub / "b" / "b.out.000").exists() and (sub / "b" / "b.out.001").exists() and (sub / "b" / "b.err.001").exists()
    )
    assert not (sub / "b" / "b.out").exists()
    js = [line.split()[1:] for line in (sub / "jobstate.log").read_text().splitlines()]
    assert ["a", "SUBMIT", "777", "siteA", "-", "1"] in js
    assert ["b", "SUBMIT", "779", "siteA", "-", "2"] in js and ["b", "POST_SCRIPT_FAILURE", "1", "-", "-", "1"] in js
    assert js[-1] == ["INTERNAL", "***", "DAGMAN_FINISHED", "1", "***"]


def test_restart_reads_back_its_dagman_out(tmp_path):
    sub = make_dir(tmp_path)
    m = RootMonitor(str(sub))
    m.start()
    m.submitted("a", "1", "siteA")
    m.running("a")
    finish_attempt(sub, "a", ok=True)
    m.ended("a", retry=False, retry_limit=3)
    m.submitted("b", "2", "siteA")
    m.running("b")
    m.finished(2)  # stopped: b's batch job goes on
    m.close()

    again = RootMonitor(str(sub))
    assert again.nodes["a"].phase == Phase.DONE and again.nodes["b"].phase == Phase.RUNNING
    assert again.nodes["b"].attempts == 1 and again.nodes["c"].phase == Phase.WAITING
    again.start()
    again.submitted("b", "2", "siteA")  # the driver adopting its job: nothing repeated
    again.running("b")
    finish_attempt(sub, "b", ok=True)
    again.ended("b", retry=False, retry_limit=3)
    again.submitted("c", "3", "siteB")  # a new submission continues the numbering
    again.close()
    text = "\n".join(lines(sub))
    assert text.count("Submitting HTCondor Node b") == 1 and text.count("ULOG_EXECUTE for HTCondor Node b") == 1
    assert "ULOG_SUBMIT for HTCondor Node c (3.0.0)" in text and text.count("STARTING UP") == 2
    assert (sub / "b" / "b.out.000").exists()


def test_post_step_command(tmp_path):
    cdir = tmp_path / "x"
    cdir.mkdir()
    (cdir / "x.out").write_text("records\n")
    write_result(result_path(str(cdir / "x.dag")), RunResult(RunOutcome.DONE, 1, 1, [], 0))
    assert joboutput.main([str(cdir), "x"]) == 0
    assert (cdir / "x.out.000").read_text() == "records\n" and (cdir / "x.err.000").exists()
    write_result(result_path(str(cdir / "x.dag")), RunResult(RunOutcome.FAILED, 1, 0, ["t"], 1))
    assert joboutput.main([str(cdir), "x"]) == 1 and (cdir / "x.out.001").exists()


def test_monitord_restart_rebuilds_from_the_start(tmp_path, monkeypatch):
    """On a dagman.out with lines, monitord is told to recover: it drops its DB rows and reads it all again."""
    monkeypatch.setattr("pilot.submit.monitord.pegasus_cli", lambda tool: None)
    out = tmp_path / "wf-0.dag.dagman.out"
    assert not Monitord(str(tmp_path), str(out)).start(recover=False)  # no pegasus-wms: nothing started
    monkeypatch.setattr("pilot.submit.monitord.pegasus_cli", lambda tool: ["/bin/true"])
    mon = Monitord(str(tmp_path), str(out))
    assert mon.start(recover=False) and mon.finish(window=30) == 0
    assert not (tmp_path / RECOVER).exists()  # a first run starts monitord plainly
    mon = Monitord(str(tmp_path), str(out))
    assert mon.start(recover=True) and mon.finish(window=30) == 0
    assert (tmp_path / RECOVER).read_text() == "line_processed 1\n"
    assert os.path.exists(tmp_path / "monitord.out")


def test_a_pmc_dag_is_one_cluster_of_the_root_workflow(tmp_path):
    """PMC-only mode: the root workflow has one job, the DAG's tasks are its tasks (ids from #@ when given)."""
    from pilot.planner.plan import PlanRequest, plan
    from pilot.sites import load_site

    dag = tmp_path / "wf.dag"
    dag.write_text("#@ 1 ns::a:1 ID1\nTASK A -c 2 /bin/echo a\nTASK B /bin/echo 'b c'\nEDGE A B\n")
    result = plan(PlanRequest(workflow=str(dag), site=load_site("local"), submit_dir=str(tmp_path / "sub")))
    sub = Path(result.submit_dir)
    assert [line.split()[:2] for line in (sub / "wf-0.dag").read_text().splitlines() if line.startswith("JOB")] == [
        ["JOB", "wf"]
    ]
    bp = (sub / "wf-0.static.bp").read_text()
    assert 'task.id="ID1" type="1" type_desc="compute" transformation="ns::a:1" argv="a"' in bp
    assert 'task.id="B"' in bp
    assert re.search(r'event=task.edge xwf.id=\S+ parent.task.id="ID1" child.task.id="B"', bp)
    assert 'job.id="wf"' in bp and 'task_count="2"' in bp
    assert "--invocation-records -o wf.out -e wf.err" in (sub / "wf" / "wf.sub").read_text()
    monitor = RootMonitor(str(sub))  # reading the files writes nothing
    assert monitor.counts() == {"done": 0, "queued": 0, "ready": 1, "failed": 0, "unready": 0} and not monitor.restarted
    assert not (sub / "wf-0.dag.dagman.out").exists()


def test_cancel_logs_the_removed_jobs_as_aborted(tmp_path):
    sub = make_dir(tmp_path)
    m = RootMonitor(str(sub))
    m.start()
    m.submitted("a", "1", "siteA")
    m.aborted("a")
    m.aborted("b")  # never submitted: nothing to abort
    m.finished(2)
    m.close()
    out = lines(sub)
    assert [line.split("{")[0] for line in out if "ABORTED" in line] == [
        "Event: ULOG_JOB_ABORTED for HTCondor Node a (1.0.0) "
    ]
    assert out[-2].split() == ["0", "0", "0", "0", "0", "2", "1"]  # a failed, b and c unready
    assert RootMonitor(str(sub)).nodes["a"].phase == Phase.FAILED  # read back after a restart


def test_root_monitoring_attaches_to_the_driver_and_ends_the_log(tmp_path, monkeypatch):
    """--no-monitord: the root files all the same, no monitord; the exit status says how the run ended."""
    from types import SimpleNamespace

    from pilot.contracts.submitstate import ClusterRecord, ClusterState
    from pilot.submit.monitord import root_monitoring

    started = []
    monkeypatch.setattr("pilot.submit.monitord.Monitord.start", lambda self, recover: started.append(recover) or True)
    sub = make_dir(tmp_path)
    clusters = {n: ClusterRecord(n) for n in "abc"}
    driver = SimpleNamespace(
        submit_dir=str(sub),
        state=SimpleNamespace(clusters=clusters),
        monitor=None,
        specs={n: SimpleNamespace(retry=None) for n in "abc"},
        opts=SimpleNamespace(retry=1, max_resubmits=3),
    )
    with root_monitoring(driver, run_monitord=False):
        driver.monitor.submitted("a", "5", "siteA")
        clusters["a"].state = ClusterState.QUEUED
    assert started == [] and lines(sub)[-1].endswith("EXITING WITH STATUS 2")  # stopped with a job queued
    monkeypatch.setattr("pilot.submit.monitord.Monitord.finish", lambda self, timeout=0: 0)
    with root_monitoring(driver, run_monitord=True):
        finish_attempt(sub, "a", ok=False, reason="failed")
        driver.monitor.ended("a", retry=False, retry_limit=3)
        clusters["a"].state = ClusterState.FAILED
    assert started == [True] and lines(sub)[-1].endswith("EXITING WITH STATUS 1")  # a restart: monitord recovers
    with root_monitoring(driver, run_monitord=False, removed=True):  # pilot cancel, after a cluster had failed
        pass
    assert lines(sub)[-1].endswith("EXITING WITH STATUS 2")  # a removed DAGMan exits 2 whatever its nodes did


def test_a_restart_logs_what_the_earlier_driver_saved_but_did_not_log(tmp_path):
    """The driver saves its state, then logs: a crash in between is caught up at the next start."""
    from types import SimpleNamespace

    from pilot.contracts.submitstate import ClusterRecord, ClusterState
    from pilot.submit.monitord import root_monitoring

    sub = make_dir(tmp_path)
    clusters = {n: ClusterRecord(n) for n in "abc"}
    clusters["a"].state, clusters["a"].job_ids, clusters["a"].site = ClusterState.QUEUED, ["41"], "siteA"
    driver = SimpleNamespace(
        submit_dir=str(sub),
        state=SimpleNamespace(clusters=clusters),
        monitor=None,
        specs={n: SimpleNamespace(retry=None) for n in "abc"},
        opts=SimpleNamespace(retry=1, max_resubmits=3),
    )
    with root_monitoring(driver, run_monitord=False):
        pass  # a was saved as queued, never logged
    assert "Submitting HTCondor Node a job(s)..." in lines(sub)
    clusters["a"].state = ClusterState.DONE
    finish_attempt(sub, "a", ok=True)
    with root_monitoring(driver, run_monitord=False):
        pass  # a was saved as done, its end never logged
    assert "POST Script of Node a completed successfully." in lines(sub)
    assert (sub / "a" / "a.out.000").exists() and lines(sub)[-1].endswith("EXITING WITH STATUS 2")  # b, c never ran


def test_a_rerun_counts_the_failed_cluster_it_tries_again_as_not_failed(tmp_path):
    """A rerun (DAGMan's rescue DAG) submits the failed cluster again: until then it is ready, not failed."""
    from types import SimpleNamespace

    from pilot.contracts.submitstate import ClusterRecord
    from pilot.submit.monitord import root_monitoring

    sub = make_dir(tmp_path)
    m = RootMonitor(str(sub))
    m.start()
    m.submitted("a", "1", "siteA")
    finish_attempt(sub, "a", ok=False, reason="failed")
    m.ended("a", retry=False, retry_limit=3)
    m.finished(1)
    m.close()
    clusters = {n: ClusterRecord(n) for n in "abc"}  # the driver's recovery made the failed cluster waiting again
    driver = SimpleNamespace(
        submit_dir=str(sub),
        state=SimpleNamespace(clusters=clusters),
        monitor=None,
        specs={n: SimpleNamespace(retry=None) for n in "abc"},
        opts=SimpleNamespace(retry=1, max_resubmits=3),
    )
    with root_monitoring(driver, run_monitord=False) as again:
        assert again.counts() == {"done": 0, "queued": 0, "ready": 1, "failed": 0, "unready": 2}
        again.submitted("a", "2", "siteA")
    assert "ULOG_SUBMIT for HTCondor Node a (2.0.0)" in "\n".join(lines(sub))


@pytest.mark.timing
def test_monitord_making_progress_is_never_stopped_and_a_stuck_one_is(tmp_path):
    """A monitord still reading a large run uses CPU: it is waited for past the window; one that uses none is stopped."""
    import subprocess
    import sys as _sys

    from pilot.submit.monitord import Monitord

    busy = Monitord(str(tmp_path), str(tmp_path / "wf-0.dag.dagman.out"))
    busy.proc = subprocess.Popen(
        [_sys.executable, "-c", "import time\nend = time.time() + 2.5\nwhile time.time() < end: pass"]
    )
    assert busy.finish(window=0.5) == 0  # five windows of progress: waited for to its own end
    stuck = Monitord(str(tmp_path), str(tmp_path / "wf-0.dag.dagman.out"))
    stuck.proc = subprocess.Popen(["sleep", "30"])
    assert stuck.finish(window=0.5) is None and stuck.proc.returncode is not None  # stopped
    assert (
        "pegasus-monitord" in stuck.complete_command()
        and " -r -j monitord-jobstate.log wf-0.dag.dagman.out" in stuck.complete_command()
    )


def test_an_incomplete_monitoring_db_is_said_by_pilot_status(tmp_path):
    from pilot.submit.monitord import INCOMPLETE, incomplete_note, mark_incomplete
    from pilot.submit.session import status
    from tests.unit.fake_queue import make_plan

    sub = make_plan(tmp_path / "sub", {"a": []})
    assert incomplete_note(sub) is None and "monitoring DB" not in status(sub).text
    mark_incomplete(sub, "cd x && pegasus-monitord -r wf-0.dag.dagman.out")
    assert status(sub).text.splitlines()[-1] == (
        "the monitoring DB is incomplete (pegasus-monitord stopped early); "
        "complete it with: cd x && pegasus-monitord -r wf-0.dag.dagman.out"
    )
    mark_incomplete(sub, None)
    assert not (tmp_path / "sub" / INCOMPLETE).exists()
