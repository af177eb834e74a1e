"""True states, pegasus-status totals, the failure report and pilot status exit codes, from real files."""

from __future__ import annotations

import io
from pathlib import Path

from pilot.contracts.queue import QueueState, QueueStatus
from pilot.contracts.result import RunOutcome
from pilot.contracts.submitstate import ClusterState
from pilot.submit.driver import Driver
from pilot.submit.options import Options
from pilot.submit.pilotfiles import PilotFiles
from pilot.submit.render import LiveProgress, failure_lines, progress_line, status_text
from pilot.submit.session import StatusCode, status
from pilot.submit.views import Shown, Watcher, totals
from tests.unit.fake_queue import FakeClock, FakeQueue, make_plan
from tests.unit.test_submit_driver import site

JOBSTATE = """\
1.0 INTERNAL *** PMC_STARTED ***
1.0 t1 SUBMIT 1.0 - - 1
1.0 t1 EXECUTE 1.0 - - 1
1.0 t2 SUBMIT 2.0 - - 2
1.0 t2 EXECUTE 2.0 - - 2
1.0 t1 JOB_TERMINATED 1.0 - - 1
1.0 t1 JOB_FAILURE 3 - - 1
1.0 t3 SUBMIT 3.0 - - 3
1.0 t3 EXECUTE 3.0 - - 3
1.0 t3 JOB_TERMINATED 3.0 - - 3
1.0 t3 JOB_FAILURE -9 - - 3
"""


def test_pilot_files_are_read_incrementally(tmp_path):
    dag = tmp_path / "c.dag"
    dag.write_text("")
    files = PilotFiles(str(dag))
    (tmp_path / "jobstate.log").write_text(JOBSTATE + "1.0 t4 SUBM")  # a line still being written
    (tmp_path / "c.dag.rescue").write_text("# rescue\nDONE t0\n")
    p = files.update()
    assert (p.done, sorted(p.running), p.failed, p.started, p.finished) == (1, ["t2"], {"t1": 3, "t3": -9}, True, False)
    with open(tmp_path / "jobstate.log", "a") as fh:
        fh.write("IT 1.0 - - 4\n1.0 t1 SUBMIT 5.0 - - 5\n1.0 t2 JOB_TERMINATED 2.0 - - 2\n1.0 t2 JOB_SUCCESS 0 - - 2\n")
    with open(tmp_path / "c.dag.rescue", "a") as fh:
        fh.write("DONE t2\n")
    p = files.update()
    assert (p.done, sorted(p.running), sorted(p.queued), p.failed) == (2, [], ["t1", "t4"], {"t3": -9})
    (tmp_path / "t3.err.000").write_text("")
    (tmp_path / "t3.err.002").write_text("")
    (tmp_path / "t3.err.001").write_text("")
    assert files.stderr_of("t3") == str(tmp_path / "t3.err.002") and files.stderr_of("t9") is None


def test_tasks_line_counts_as_ready_only_tasks_whose_parents_are_done(tmp_path):
    """READY, as pegasus-status counts it: a queued cluster's root tasks, a running pilot's tasks logged SUBMIT
    and not started, and before a rerun what the last run left ready or running; the rest is UNREADY."""
    from pilot.contracts.clusters import ClusterKind, ClusterSpec
    from pilot.contracts.submitstate import ClusterRecord
    from pilot.submit.pilotfiles import TaskProgress
    from pilot.submit.views import ClusterView

    spec = ClusterSpec(
        "a", ClusterKind.LABEL, str(tmp_path), str(tmp_path / "a.dag"), tasks=10, ranks=3, parents=(), roots=2
    )

    def counts(shown, progress):
        t = totals([ClusterView(spec, ClusterRecord("a"), shown, "resubmitting", progress)])
        return t.unready, t.ready, t.running, t.done, t.failed

    assert counts(Shown.QUEUED, TaskProgress()) == (8, 2, 0, 0, 0)
    running = TaskProgress(done=3, running={"t3"}, queued={"t4", "t5"}, started=True)
    assert counts(Shown.RUNNING, running) == (4, 2, 1, 3, 0)
    killed = TaskProgress(done=3, running={"t3"}, queued={"t4"}, failed={"t5": 1}, started=True)
    assert counts(Shown.QUEUED, killed) == (4, 2, 0, 3, 1)  # t5 shows as FAILED until the rerun starts it
    assert counts(Shown.WAITING, TaskProgress()) == (8, 2, 0, 0, 0)  # waiting with a reason: released
    unplanned = ClusterSpec(
        "a", ClusterKind.LABEL, str(tmp_path), str(tmp_path / "a.dag"), tasks=10, ranks=3, parents=()
    )
    t = totals([ClusterView(unplanned, ClusterRecord("a"), Shown.QUEUED, "", TaskProgress())])
    assert (t.unready, t.ready) == (0, 10)  # a plan without roots: every task counted ready, as before


def drive_until(tmp_path, clusters, outcomes, retry=None, steps=None):
    clock = FakeClock()
    queue = FakeQueue(clock)
    queue.outcomes.update(outcomes)
    sub = make_plan(tmp_path / "sub", clusters, retry=retry)
    driver = Driver.load(sub, [site()], queue, Options(poll=1.0), clock)
    driver.recover()
    if steps is None:
        driver.run()
    else:
        for _ in range(steps):
            driver.step()
    return driver, queue


def test_failed_run_report_names_tasks_stderr_batch_output_and_not_run(tmp_path):
    driver, _ = drive_until(
        tmp_path, {"a": [], "b": ["a"], "c": ["b"], "x": []}, {"a": [RunOutcome.FAILED]}, retry={"a": 0}
    )
    watcher = Watcher(list(driver.specs.values()))
    views = watcher.views(driver.state.clusters)
    assert [v.shown for v in views] == [Shown.FAILED, Shown.NOT_RUN, Shown.NOT_RUN, Shown.DONE]
    job = driver.state.clusters["a"].job_id
    name = driver.state.clusters["a"].job_name
    assert failure_lines(views, watcher, driver.submit_dir) == [
        "a: failed: tasks failed (1/2 done)",
        "a: task a_t0 failed with exit 3 (stderr: a/a_t0.err.000)",
        f"a: batch job {job} on a: stdout a/{name}.stdout, stderr a/{name}.stderr",
        "b: not run (a failed)",
        "c: not run (a failed)",
    ]
    t = totals(views)
    assert (t.unready, t.ready, t.running, t.done, t.failed) == (4, 0, 0, 3, 1)
    text = status_text(views, driving=False)
    assert "not run (a failed)" in text and text.splitlines()[-1].split() == [
        "4",
        "0",
        "0",
        "3",
        "1",
        "37.5",
        "Failure",
    ]


def test_a_task_stopped_at_max_crashes_is_named_for_its_crashes_not_a_signal(tmp_path):
    clock = FakeClock()
    queue = FakeQueue(clock)
    queue.outcomes["a"] = [RunOutcome.FAILED]
    queue.crash_stopped = {"a"}  # its worker died with it each time: jobstate.log says -9
    driver = Driver.load(make_plan(tmp_path / "sub", {"a": []}), [site()], queue, Options(poll=1.0), clock)
    driver.recover()
    assert driver.run() is False
    watcher = Watcher(list(driver.specs.values()))
    lines = failure_lines(watcher.views(driver.state.clusters), watcher, driver.submit_dir)
    assert lines[:2] == [
        "a: failed: task a_t0 crashed its worker 2 times (--max-crashes); not retried: a task that crashes its worker "
        "does so again (1/2 done)",
        "a: task a_t0 crashed its worker 2 times: not started again (--max-crashes) (stderr: a/a_t0.err.000)",
    ]


def test_failed_task_without_per_task_files_points_at_the_job_output(tmp_path):
    """A planned cluster's pilot writes task stderr to <cluster>.err, renamed per attempt: the report names it."""
    from pilot.monitor.joboutput import rotate
    from pilot.monitor.root import RootEvents

    class Renaming(RootEvents):  # the POST step of the root monitoring, alone
        def ended(self, cluster: str, retry: bool, retry_limit: int) -> None:
            rotate(str(Path(driver.submit_dir) / cluster), cluster)

    clock = FakeClock()
    queue = FakeQueue(clock)
    queue.per_task_stdio = False
    queue.outcomes["a"] = [RunOutcome.FAILED, RunOutcome.FAILED]
    driver = Driver.load(
        make_plan(tmp_path / "sub", {"a": []}, retry={"a": 1}), [site()], queue, Options(poll=1.0), clock
    )
    driver.monitor = Renaming()
    driver.recover()
    assert driver.run() is False
    watcher = Watcher(list(driver.specs.values()))
    lines = failure_lines(watcher.views(driver.state.clusters), watcher, driver.submit_dir)
    assert lines[1] == "a: task a_t0 failed with exit 3 (stderr: a/a.err.001, invocation record in a/a.out.001)"
    assert (Path(driver.submit_dir) / "a" / "a.err.001").read_text() == "boom\n"
    assert not list((Path(driver.submit_dir) / "a").glob("a_t0.err.*"))


def test_live_states_queued_with_reason_running_held(tmp_path):
    driver, queue = drive_until(tmp_path, {"a": [], "b": [], "c": ["a"]}, {}, steps=1)
    queue.pin("b", QueueStatus(QueueState.HELD, "JobHeldUser"))
    driver.step()  # a: pending (Priority)
    views = {v.spec.name: v for v in Watcher(list(driver.specs.values())).views(driver.state.clusters)}
    assert (views["a"].shown, views["a"].detail) == (Shown.QUEUED, "Priority")
    assert (views["b"].shown, views["b"].detail) == (Shown.HELD, "JobHeldUser")
    assert (views["c"].shown, views["c"].detail) == (Shown.WAITING, "after a")
    driver.step()  # a: running
    Path(driver.specs["a"].dir, "jobstate.log").write_text(
        "1.0 INTERNAL *** PMC_STARTED ***\n1.0 a_t0 EXECUTE 1.0 - - 1\n"
    )
    Path(driver.specs["a"].dag + ".rescue").write_text("DONE a_t1\n")
    views = Watcher(list(driver.specs.values())).views(driver.state.clusters)
    a = views[0]
    assert (a.shown, a.done, a.detail) == (Shown.RUNNING, 1, "1 running now")
    t = totals(views)
    assert (t.unready, t.ready, t.running, t.done, t.failed) == (2, 2, 1, 1, 0)
    out = io.StringIO()
    live = LiveProgress(Watcher(list(driver.specs.values())), out, tty=False)
    live.show(driver.state.clusters)
    live.show(driver.state.clusters)  # unchanged: not repeated
    assert (
        out.getvalue()
        == "tasks: UNREADY 2 READY 2 RUNNING 1 DONE 1 FAILED 0 %DONE 16.7 STATE Running; 1/6 tasks done\n"
    )


def with_runtimes(sub: str, spans: dict[str, tuple[float, float]]) -> None:
    """Put (runtime, critical_path) of each cluster into clusters.yml, as pilot plan does with runtime profiles."""
    path = Path(sub) / "clusters.yml"
    text = path.read_text()
    for name, (runtime, critical) in spans.items():
        head, _, tail = text.partition(f'- name: "{name}"')
        tail = tail.replace(
            "runtime: null\n  critical_path: null", f"runtime: {runtime}\n  critical_path: {critical}", 1
        )
        text = f'{head}- name: "{name}"{tail}'
    path.write_text(text)


def test_live_progress_shows_done_of_total_and_the_time_left_from_runtimes(tmp_path):
    from pilot.submit.views import time_left

    sub = make_plan(tmp_path / "sub", {"a": [], "b": ["a"], "c": []})
    # a: 2 tasks of 20 s on 1 worker (its critical path 10 s is shorter); b after a: 30 s; c beside them: 45 s
    with_runtimes(sub, {"a": (40, 10), "b": (30, 30), "c": (45, 45)})
    clock = FakeClock()
    queue = FakeQueue(clock)
    driver = Driver.load(sub, [site()], queue, Options(poll=1.0), clock)
    driver.recover()
    watcher = Watcher(list(driver.specs.values()))
    assert time_left(watcher.views(driver.state.clusters)) == 70  # a then b, longer than c
    driver.step()
    driver.step()
    Path(driver.specs["a"].dag + ".rescue").write_text("DONE a_t0\n")
    views = watcher.views(driver.state.clusters)
    assert time_left(views) == 50  # half of a to go, then b; c still 45
    out = io.StringIO()
    live = LiveProgress(watcher, out, tty=False)
    live.show(driver.state.clusters)
    assert out.getvalue().endswith(
        "; 1/6 tasks done, about 50s left by the runtime estimates (queue wait not included)\n"
    )
    plain = make_plan(tmp_path / "plain", {"a": []})
    views = Watcher(list(Driver.load(plain, [site()], queue, Options(poll=1.0), clock).specs.values())).views({})
    assert time_left(views) is None  # a cluster without runtimes: no estimate
    for name in ("a", "b", "c"):  # every cluster done while the driver still runs: nothing left to estimate
        driver.state.clusters[name].state = ClusterState.DONE
    assert time_left(watcher.views(driver.state.clusters)) is None
    assert progress_line(watcher.views(driver.state.clusters)) == "6/6 tasks done"  # never "about 0s left"


def test_status_exit_codes(tmp_path):
    sub = make_plan(tmp_path / "fresh", {"a": []})
    assert status(sub).code is StatusCode.NOT_FINISHED  # planned, never submitted
    done, _ = drive_until(tmp_path / "1", {"a": []}, {})
    assert status(done.submit_dir).code is StatusCode.DONE == 0
    failed, _ = drive_until(tmp_path / "2", {"a": [], "b": ["a"]}, {"a": [RunOutcome.ERROR]})
    res = status(failed.submit_dir)
    assert res.code is StatusCode.FAILED == 1 and "not run (a failed)" in res.text
    running, _ = drive_until(tmp_path / "3", {"a": []}, {}, steps=2)
    assert status(running.submit_dir).code is StatusCode.NOT_FINISHED == 3


def test_status_never_calls_a_cluster_cancelled_while_its_run_holds_the_dag(tmp_path):
    import os
    import re
    import socket

    from pilot.runtime.lock import DagLock

    driver, _ = drive_until(tmp_path, {"a": [], "b": ["a"]}, {}, steps=2)
    driver.cancel_all()  # recorded cancelled...
    run = DagLock(driver.specs["a"].dag)  # ...while a pilot run of a goes on
    run.acquire()
    try:
        res = status(driver.submit_dir)
    finally:
        run.release()
    assert re.search(
        rf"^a +running .* its pilot run \(pid {os.getpid()} on {socket.gethostname()}\) runs with no "
        rf"pilot submit: pilot cancel {driver.submit_dir} ends it$",
        res.text,
        re.M,
    ), res.text
    assert res.code is StatusCode.NOT_FINISHED and "Running" in res.text.splitlines()[-1]
    assert re.search(r"^a +cancelled ", status(driver.submit_dir).text, re.M)  # once it has ended


def test_live_progress_on_a_terminal_redraws_in_place(tmp_path):
    driver, queue = drive_until(tmp_path, {"a": [], "b": ["a"]}, {}, steps=2)
    out = io.StringIO()
    live = LiveProgress(Watcher(list(driver.specs.values())), out, tty=True)
    live.show(driver.state.clusters)
    first = out.getvalue()
    assert (
        first.startswith("\x1b[J") and "queued (Priority)" in first and "\nb " not in first
    )  # waiting clusters stay off
    driver.step()
    live.show(driver.state.clusters)
    redraw = out.getvalue()[len(first) :]
    assert redraw.startswith(f"\x1b[{first.count(chr(10))}F\x1b[J") and "running" in redraw
    live.clear()
    assert out.getvalue().endswith("\x1b[J")
