"""Each file one part of pilot writes and another reads: what its contract writes, its contract reads back.

The run result's round trip is in test_result.py with the rest of that file's tests.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from pilot.contracts.clusters import (
    ClusterKind,
    ClusterSpec,
    PlanInfo,
    SubworkflowSpec,
    plan_site_file,
    read_clusters,
    write_clusters,
)
from pilot.contracts.jobstate import (
    INTERNAL,
    Event,
    JobstateLine,
    JobstateTail,
    JobstateWriter,
    Marker,
    jobstate_path,
    read_jobstate,
)
from pilot.contracts.queue import QueueState
from pilot.contracts.rescue import RescueLog, RescueTail, read_rescue, rescue_path
from pilot.contracts.rootfiles import RootJob, RootTask, read_root_dag, root_dag_name, write_root_files
from pilot.contracts.submitdir import write_static_bp
from pilot.contracts.submitstate import ClusterRecord, ClusterState, SubmitState, state_path
from pilot.contracts.taskrecord import TaskRecord, cluster_task, read_task_record
from pilot.dag import read_dag


def test_clusters_yml(tmp_path):
    sub = str(tmp_path / "sub")
    os.makedirs(sub)
    specs = [
        ClusterSpec(
            "create_dir_w_0_local",
            ClusterKind.DATA,
            f"{sub}/create_dir_w_0_local",
            f"{sub}/create_dir_w_0_local/create_dir_w_0_local.dag",
            tasks=1,
            ranks=2,
            parents=(),
            category="cleanup",
            maxjobs=None,
            roots=1,
            script=f"{sub}/create_dir_w_0_local/create_dir_w_0_local.sh",
        ),
        ClusterSpec(
            "merge_mid",
            ClusterKind.LABEL,
            f"{sub}/merge_mid",
            f"{sub}/merge_mid/merge_mid.dag",
            tasks=3,
            ranks=3,
            parents=("create_dir_w_0_local",),
            retry=2,
            runtime=12.5,
            critical_path=7.0,
            roots=2,
            queue="debug",
            account="m1",
            directives=("#SBATCH --mem=1G",),
            script=f"{sub}/merge_mid/merge_mid.slurm",
            nodes=2,
            ranks_per_node=4,
            walltime_minutes=90.0,
        ),
        ClusterSpec(
            "subdax_inner_ID1",
            ClusterKind.SUBWORKFLOW,
            f"{sub}/subdax_inner_ID1",
            f"{sub}/subdax_inner_ID1/subdax_inner_ID1.dag",
            tasks=1,
            ranks=0,
            parents=("merge_mid",),
            roots=1,
            subworkflow=SubworkflowSpec(
                str(tmp_path / "inner.yml"),
                f"{sub}/inner_ID1.000",
                ("--cluster", "whole", "--cache", "subdax_inner_ID1/c.yml"),
            ),
        ),
    ]
    write_clusters(sub, PlanInfo("w", "local", "/etc/site.yaml", "slurm"), specs)
    assert read_clusters(sub) == specs
    assert plan_site_file(sub) == "/etc/site.yaml"


def test_submit_state(tmp_path):
    state = SubmitState(
        state_path(str(tmp_path)), plan_id="1a2b", sites={"s": {"file": "/s.yaml", "set": {"account": "m1"}}}
    )
    for record in (
        ClusterRecord(
            "a",
            ClusterState.DONE,
            site="s",
            attempts=2,
            retries=1,
            job_ids=["41", "57"],
            job_name="pilot-1a2b-a-2",
            job_stdout="/o",
            job_stderr="/e",
            reason="why",
        ),
        ClusterRecord(
            "b",
            ClusterState.QUEUED,
            site="s",
            attempts=1,
            job_ids=["58"],
            job_name="pilot-1a2b-b-1",
            queue=QueueState.PENDING,
            queue_reason="Priority",
        ),
        ClusterRecord("c"),
    ):
        state.clusters[record.name] = record
    state.save()
    assert SubmitState.load(str(tmp_path)) == state


def test_root_dag(tmp_path):
    jobs = [
        RootJob("a", "s", [RootTask("ID1", "t", "")], [], ["pilot", "run", "a.dag"]),
        RootJob("b", "s", [RootTask("ID2", "t", "")], ["a"], ["pilot", "run", "b.dag"]),
        RootJob("c", "s", [RootTask("ID3", "t", "")], ["a", "b"], ["pilot", "run", "c.dag"]),
    ]
    for job in jobs:
        (tmp_path / job.name).mkdir()
    write_root_files(str(tmp_path), "wf", jobs, "")
    assert read_root_dag(str(tmp_path / root_dag_name("wf"))) == {job.name: job.parents for job in jobs}


def test_static_bp_escapes_only_the_values_that_need_it(tmp_path):
    """A column whose values need no escaping is written as it is; one with a quote or a byte that is not
    UTF-8 (a task read from a PMC .dag) is escaped value by value, the others in it left alone."""
    tasks = [
        RootTask("ID1", "t", 'say "hi"', ["ID2"], metadata={"k": 'a "b"'}),
        RootTask("ID2", "ns::t:1", "plain"),
        RootTask("ID\udcff", "t", "caf\u00e9 \udcff", ["ID1"]),
    ]
    (tmp_path / "a").mkdir()
    write_root_files(str(tmp_path), "wf", [RootJob("a", "s", tasks, [], ["pilot", "run", "a.dag"])], "", wf_uuid="u")
    bp = (tmp_path / "wf-0.static.bp").read_text(encoding="utf-8")
    assert 'task.id="ID1" type="1" type_desc="compute" transformation="t" argv="say \\"hi\\""\n' in bp
    assert 'task.id="ID2" type="1" type_desc="compute" transformation="ns::t:1" argv="plain"\n' in bp
    assert 'task.id="ID\ufffd" type="1" type_desc="compute" transformation="t" argv="caf\u00e9 \ufffd"\n' in bp
    assert 'event=task.edge xwf.id=u parent.task.id="ID\ufffd" child.task.id="ID1"\n' in bp
    assert 'event=task.edge xwf.id=u parent.task.id="ID1" child.task.id="ID2"\n' in bp
    assert 'event=wf.map.task_job xwf.id=u job.id="a" task.id="ID\ufffd"\n' in bp
    assert 'event=task.meta xwf.id=u task.id="ID1" key="k" value="a \\"b\\""\n' in bp


def test_rescue_log_read_whole_and_followed(tmp_path):
    dag = str(tmp_path / "wf.dag")
    tail = RescueTail(dag)
    log = RescueLog(rescue_path(dag))
    for name in ("a", "my task"):
        log.done(name)
    assert tail.done() == (False, ["a", "my task"])
    log.done("c")
    log.close()
    assert tail.done() == (False, ["c"])  # each record once
    assert read_rescue(rescue_path(dag)) == {"a", "my task", "c"}
    RescueLog(rescue_path(dag), sorted(read_rescue(rescue_path(dag)))).close()  # a restart compacts the log
    assert tail.done() == (True, ["a", "c", "my task"])


def test_jobstate_log_read_whole_and_followed(tmp_path):
    path = jobstate_path(str(tmp_path))
    tail = JobstateTail(path)
    writer = JobstateWriter(path)
    writer.internal(Marker.PMC_STARTED)
    writer.event("t1", Event.SUBMIT, "1.0", 1)
    writer.event("c1", Event.SUBMIT, "4711", 2, site="cori")
    writer.event("t1", Event.JOB_FAILURE, "-9", 1)
    writer.internal(Marker.PMC_FINISHED, 1)
    writer.close()
    expected = [
        (INTERNAL, "PMC_STARTED", ""),
        ("t1", "SUBMIT", "1.0"),
        ("c1", "SUBMIT", "4711"),
        ("t1", "JOB_FAILURE", "-9"),
        (INTERNAL, "PMC_FINISHED", "1"),
    ]
    lines = list(read_jobstate(path))
    assert [line[1:] for line in lines] == expected
    assert all(isinstance(line, JobstateLine) and line.time > 0 for line in lines)
    assert tail.lines() == (False, lines)
    assert tail.lines() == (False, [])


def test_cluster_task_record():
    for record in (
        TaskRecord("t1", 1_700_000_000.25, 1.5, -9, "/bin/echo", "node7", 3, 2, 100, "ID7"),
        TaskRecord("a]b", 1_700_000_001.0, 0.0, 0, "/x y/z", "h", 1, 1, 0),
    ):
        line = cluster_task(*record)
        assert read_task_record(line) == record
        assert read_task_record("task output" + line) == record  # a task's stdout without a newline at its end


def test_a_cluster_task_record_with_fields_added_at_the_end_is_still_read():
    record = TaskRecord("t1", 1_700_000_000.5, 2.0, 0, "/bin/echo", "node7", 3, 2, 100, "ID7")
    line = cluster_task(*record)
    assert line.endswith("memory=100]\n")
    for added in (", gpus=1]", ', gpus=1, queue="a, b]"]', ", note=]"):
        assert read_task_record(line.replace("]\n", added + "\n")) == record
    assert read_task_record(line.replace("duration=2.000", "duration=2.0.0")) is None  # no pilot wrote it
    assert read_task_record(line.replace('start="', 'start="x')) is None
    assert read_task_record('[cluster-summary stat="ok"]') is None


def test_paths_are_beside_the_dag():
    assert rescue_path("/d/wf.dag") == "/d/wf.dag.rescue"
    assert jobstate_path("/d") == str(Path("/d") / "jobstate.log")


def test_a_clusters_static_bp_makes_its_data_jobs_jobs_of_their_types_with_no_task(tmp_path):
    """A cluster's DAG as pilot plan writes it: a data job's ``#@`` line names no job of the workflow's (null,
    as Pegasus runs a data job's kickstart with -N null), so its static.bp has a job of the job's Pegasus type
    with no task, as Pegasus writes one; the workflow's job is a task of its own job."""
    dag_file = tmp_path / "c.dag"
    dag_file.write_text(
        "#@ 1 pegasus::transfer null\nTASK stage_in_local_local_0_0 /bin/true\n"
        "#@ 2 cp j1\nTASK cp_j1 /bin/cp a b\n"
        "#@ 3 pegasus::cleanup null\nTASK clean_up_local_level_2_0 /bin/true\n"
        "EDGE stage_in_local_local_0_0 cp_j1\nEDGE cp_j1 clean_up_local_level_2_0\n"
    )
    write_static_bp(read_dag(str(dag_file)), str(tmp_path / "c.static.bp"), "u")
    lines = (tmp_path / "c.static.bp").read_text().splitlines()
    assert [line.split(" task.id=")[1] for line in lines if "event=task.info" in line] == [
        '"j1" type="1" type_desc="compute" transformation="cp" argv="a b"'
    ]
    assert not [line for line in lines if "event=task.edge" in line]
    assert [line.split("xwf.id=u ")[1] for line in lines if "event=wf.map.task_job" in line] == [
        'job.id="cp_j1" task.id="j1"'
    ]
    info = re.compile(r'job.id="([^"]+)".* type_desc="([^"]+)".* task_count="(\d)"')
    jobs = {m.group(1): m.group(2, 3) for m in map(info.search, lines) if m}
    assert jobs == {
        "stage_in_local_local_0_0": ("stage-in-tx", "0"),
        "cp_j1": ("compute", "1"),
        "clean_up_local_level_2_0": ("cleanup", "0"),
    }
    assert len([line for line in lines if "event=job.edge" in line]) == 2


def test_inbox_requests_round_trip_and_a_bad_one_is_answered_not_fatal(tmp_path):
    from pilot.contracts import inbox

    box = str(tmp_path)
    req = inbox.Request(
        "c-1.x", str(tmp_path / "c.dag"), ["-t", "2"], str(tmp_path / "c.block.out"), str(tmp_path / "c.block.err")
    )
    inbox.write_request(box, req)
    (tmp_path / "bad.request").write_text('{"dag": "relative.dag", "args": []}')
    inbox.write_cancel(box, "other")
    seen = inbox.look(box)
    assert req in seen.requests and seen.cancels == {"other"} and not seen.stop
    bad = [r for r in seen.requests if not isinstance(r, inbox.Request)]
    assert len(bad) == 1 and bad[0][0] == "bad" and "not an inbox request" in bad[0][1]
    assert inbox.look(box).requests == []  # each request is taken once
    assert inbox.read_done(box, "c-1.x") is None
    inbox.write_done(box, "c-1.x", 3)
    assert inbox.read_done(box, "c-1.x") == 3 and not (tmp_path / "c-1.x.done").exists()  # done files apart
    inbox.clear(box, "c-1.x")
    assert inbox.read_done(box, "c-1.x") is None
    inbox.write_stop(box)
    assert inbox.look(box).stop
    with pytest.raises(ValueError):
        inbox.write_request(box, req._replace(id="../escape"))


def test_inbox_requests_written_within_one_tick_of_the_clock_are_taken_in_the_order_written(tmp_path):
    """A file's modification time ticks every few milliseconds: the requests of one pass of the driver share
    it, and are taken in the order they were written, not in the directory's."""
    from pilot.contracts import inbox

    box = str(tmp_path)
    names = [f"c{i:02d}" for i in (7, 3, 11, 0, 5, 9, 1, 10, 2, 8, 6, 4)]
    for name in names:
        path = inbox.write_request(box, inbox.Request(name, str(tmp_path / f"{name}.dag"), []))
        os.utime(path, ns=(1_000_000_000, 1_000_000_000))  # one tick for all
    assert [r.id for r in inbox.look(box).requests] == names  # type: ignore[union-attr]  # all readable
    (tmp_path / "byhand.request").write_text(json.dumps({"dag": str(tmp_path / "h.dag"), "args": []}))
    os.utime(tmp_path / "byhand.request", ns=(2_000_000_000, 2_000_000_000))
    inbox.write_request(box, inbox.Request("later", str(tmp_path / "l.dag"), []))
    assert [r.id for r in inbox.look(box).requests] == ["byhand", "later"]  # type: ignore[union-attr]  # (its file's time)
