"""The cluster-DAG driver's state machine on a batch system in memory (no scheduler, milliseconds each)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
from pathlib import Path

import pytest

from pilot.contracts.queue import QueueState, QueueStatus
from pilot.contracts.result import RunOutcome
from pilot.contracts.submitstate import STATE_FILE, ClusterState, SubmitState
from pilot.errors import ConfigError
from pilot.monitor.root import RootEvents
from pilot.runtime.lock import DagLock
from pilot.sites import SiteConfig
from pilot.submit.driver import Driver
from pilot.submit.options import UNREACHABLE_LIMIT, Options
from tests.unit.fake_queue import FakeClock, FakeQueue, make_plan

W, F, S, V, E = RunOutcome.WALLTIME, RunOutcome.FAILED, RunOutcome.SIGNAL, None, RunOutcome.ERROR
DIAMOND = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}


def site(name: str = "a", max_queued: int = 10) -> SiteConfig:
    return SiteConfig(name=name, scheduler="local", max_queued=max_queued)


def setup(tmp_path: Path, clusters=None, sites=None, retry=None, categories=None, **opts):
    clock = FakeClock()
    queue = FakeQueue(clock)
    sub = make_plan(tmp_path / "sub", clusters or DIAMOND, retry=retry, categories=categories)
    driver = Driver.load(sub, sites or [site()], queue, Options(poll=1.0, backoff=2.0, **opts), clock)
    return driver, queue, clock


def states(driver: Driver) -> dict[str, str]:
    return {n: c.state.value for n, c in driver.state.clusters.items()}


def run(driver: Driver) -> bool:
    driver.recover()
    return driver.run()


def test_diamond_runs_in_dependency_order(tmp_path):
    driver, queue, _ = setup(tmp_path)
    assert run(driver) is True
    order = [c for _, _, c in queue.submits]
    assert order[0] == "a" and order[-1] == "d" and sorted(order) == ["a", "b", "c", "d"]
    assert states(driver) == dict.fromkeys("abcd", "done")


def test_a_failed_cluster_stops_only_its_descendants(tmp_path):
    clusters = {"a": [], "b": ["a"], "c": [], "d": ["c"], "e": ["b", "d"]}
    driver, queue, _ = setup(tmp_path, clusters, retry={"a": 0})
    queue.outcomes["a"] = [F]
    assert run(driver) is False
    assert states(driver) == {"a": "failed", "b": "waiting", "c": "done", "d": "done", "e": "waiting"}
    assert "tasks failed (1/2 done)" in driver.state.clusters["a"].reason
    assert sorted(driver.descendants("a")) == ["b", "e"]


def test_task_failures_are_retried_up_to_the_retry_count(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": []}, retry={"a": 2})
    queue.outcomes["a"] = [F, F]
    assert run(driver) is True
    c = driver.state.clusters["a"]
    assert (c.state, c.attempts, c.retries, c.resubmits) == (ClusterState.DONE, 3, 2, 0)


def test_default_retry_is_pegasus_one_and_dagman_retry_wins(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": [], "b": []}, retry={"b": 3})
    queue.outcomes["a"] = [F, F, F, F]
    queue.outcomes["b"] = [F, F, F]
    assert run(driver) is False
    a, b = driver.state.clusters["a"], driver.state.clusters["b"]
    assert (a.state, a.attempts, a.retries) == (ClusterState.FAILED, 2, 1)  # --retry default: 1
    assert (b.state, b.attempts, b.retries) == (ClusterState.DONE, 4, 3)


def test_a_task_stopped_at_max_crashes_costs_no_retry(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": [], "b": []}, retry={"a": 3, "b": 1})
    queue.outcomes["a"] = [F, F]
    queue.outcomes["b"] = [F]
    queue.crash_stopped = {"a"}  # a's failed task crashed its worker: a rerun fails it again at once
    assert run(driver) is False
    a, b = driver.state.clusters["a"], driver.state.clusters["b"]
    assert (a.state, a.attempts, a.retries) == (ClusterState.FAILED, 1, 0)
    assert a.reason == (
        "task a_t0 crashed its worker 2 times (--max-crashes); not retried: a task that crashes its "
        "worker does so again (1/2 done)"
    )
    assert (b.state, b.attempts, b.retries) == (ClusterState.DONE, 2, 1)  # an ordinary failure still gets its retry


def test_resubmissions_have_their_own_counter(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": []}, retry={"a": 1}, max_resubmits=3)
    queue.outcomes["a"] = [W, F, S, V]
    assert run(driver) is True
    c = driver.state.clusters["a"]
    assert (c.state, c.attempts, c.retries, c.resubmits) == (ClusterState.DONE, 5, 1, 3)


def test_resubmissions_run_out(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": []}, max_resubmits=1)
    queue.outcomes["a"] = [W, V]
    assert run(driver) is False
    c = driver.state.clusters["a"]
    assert (
        c.state is ClusterState.FAILED and c.retries == 0 and "vanished" in c.reason and "--max-resubmits 1" in c.reason
    )


def test_a_pilot_that_could_not_start_fails_without_retry(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": []}, retry={"a": 5})
    queue.outcomes["a"] = [E]
    assert run(driver) is False
    assert driver.state.clusters["a"].attempts == 1 and "could not start" in driver.state.clusters["a"].reason


def test_an_unreadable_result_is_an_error_not_a_vanished_job(tmp_path):
    driver, queue, clock = setup(tmp_path, {"a": []})
    driver.recover()
    driver.step()  # submitted
    driver.step()  # pending
    driver.step()  # running
    Path(driver.specs["a"].dag + ".result").write_text("{not json")
    queue.pin("a", QueueStatus(QueueState.FINISHED))
    driver.step()
    c = driver.state.clusters["a"]
    assert c.state is ClusterState.FAILED and "not a pilot result" in c.reason and c.resubmits == 0


def test_pending_reason_is_kept_and_a_never_starting_job_is_cancelled(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": [], "b": []})
    driver.recover()
    driver.step()
    queue.pin("a", QueueStatus(QueueState.PENDING, "Resources"))
    queue.pin("b", QueueStatus(QueueState.PENDING, "PartitionConfig", never_starts=True))
    driver.step()
    a, b = driver.state.clusters["a"], driver.state.clusters["b"]
    assert (a.state, a.queue, a.queue_reason) == (ClusterState.QUEUED, QueueState.PENDING, "Resources")
    assert (
        b.state is ClusterState.FAILED and "can never start on a: PartitionConfig" in b.reason and "\n" not in b.reason
    )
    assert queue.cancelled == [b.job_id]
    queue.pin("a", QueueStatus(QueueState.HELD, "JobHeldUser"))
    driver.step()
    assert (a.queue, a.queue_reason) == (QueueState.HELD, "JobHeldUser")
    queue.release("a")
    assert driver.run() is False and a.state is ClusterState.DONE


def test_a_never_starting_job_fails_saying_what_its_reason_means(tmp_path, caplog):
    """The plug-in's pending_reasons judge the job and explain it, in the failure and in the log."""
    from providers import SCHEDULERS

    slurm = SCHEDULERS["slurm"]
    driver, queue, _ = setup(tmp_path, {"a": [], "b": []})
    driver.recover()
    driver.step()
    queue.pin("a", slurm.status(QueueState.PENDING, "Priority"))
    queue.pin("b", slurm.status(QueueState.PENDING, "PartitionTimeLimit"))
    with caplog.at_level("INFO", logger="pilot.submit"):
        driver.step()
    a, b = driver.state.clusters["a"], driver.state.clusters["b"]
    assert (a.state, a.queue_reason) == (ClusterState.QUEUED, "Priority")
    assert "pending (Priority: jobs of higher priority are ahead)" in caplog.text
    assert b.state is ClusterState.FAILED and queue.cancelled == [b.job_id]
    assert "can never start on a: PartitionTimeLimit: a walltime longer than the partition allows" in b.reason


def test_queue_outage_is_waited_out(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": []})
    driver.recover()
    driver.step()
    queue.query_outages = 3
    assert driver.run() is True and driver.state.clusters["a"].attempts == 1


def test_failed_submissions_back_off_and_give_up(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": []}, submit_tries=3)
    queue.submit_errors["a"] = [False, False, False]
    assert run(driver) is False
    times = [t for t, _, _ in queue.submits]
    assert [b - a for a, b in zip(times, times[1:])] == [2.0, 4.0]  # exponential back-off
    c = driver.state.clusters["a"]
    assert (
        c.state is ClusterState.FAILED and "failed 3 times" in c.reason and "timed out" in c.reason and c.job_ids == []
    )


def test_a_scheduler_that_does_not_answer_is_asked_once_a_pass_not_once_per_cluster(tmp_path):
    """Each sbatch or squeue may hang for the site's cmd_timeout: five ready clusters must not hold a pass (and
    Ctrl-C) for five of them; the clusters not tried were never submitted and wait, as they were, for the next."""
    driver, queue, clock = setup(tmp_path, dict.fromkeys("abcde", []))
    for name in "abcde":
        queue.submit_errors[name] = [False] * 3
    queue.find_outages = 1000
    driver.recover()
    driver.step()
    assert len(queue.submits) == 1
    tried = queue.submits[0][2]
    others = [c for n, c in driver.state.clusters.items() if n != tried]
    assert all(
        c.state is ClusterState.WAITING
        and c.attempts == 0
        and c.job_name is None
        and c.site is None
        and c.reason == "waiting for a's scheduler to answer"
        for c in others
    )
    assert driver.state.clusters[tried].state is ClusterState.SUBMITTING
    finds = queue.find_outages
    for _ in range(20):
        before = len(queue.submits)
        clock.sleep(1.0)
        driver.step()
        assert len(queue.submits) - before <= 1
    assert 1000 - queue.find_outages <= 20  # one look a pass at most, however many clusters are in doubt
    assert queue.find_outages < finds


def test_submission_in_doubt_is_found_not_duplicated(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": []})
    queue.submit_errors["a"] = [True]  # the submit command failed, but the job reached the queue
    assert run(driver) is True
    assert len(queue.submits) == 1 and len(queue.jobs) == 1
    assert driver.state.clusters["a"].job_ids == [next(iter(queue.jobs))]


def test_submission_in_doubt_waits_while_the_queue_cannot_be_asked(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": []})
    queue.submit_errors["a"] = [True]
    queue.find_outages = 2
    assert run(driver) is True and len(queue.jobs) == 1


def test_a_refused_job_fails_at_once(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": [], "b": []})
    queue.refuse["a"] = "sbatch: error: Invalid partition name specified"
    assert run(driver) is False
    assert states(driver) == {"a": "failed", "b": "done"} and len(queue.submits) == 2
    assert "Invalid partition name" in driver.state.clusters["a"].reason


def test_site_choice_by_rank_and_throttle(tmp_path):
    clusters = {f"c{i}": [] for i in range(6)}
    driver, queue, _ = setup(tmp_path, clusters, sites=[site("a", 2), site("b", 1)])
    driver.recover()
    driver.step()
    assert [s for _, s, _ in queue.submits] == ["a", "b", "a"]  # ranks 0,0 -> a; -1/2 vs 0 -> b; -1/2 vs -1 -> a
    assert driver.run() is True
    assert queue.max_active == {"a": 2, "b": 1}
    for c in driver.state.clusters.values():  # each attempt stays on its site
        assert c.site in ("a", "b")


def test_further_attempts_stay_on_their_site(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": []}, sites=[site("x", 1), site("y", 1)])
    queue.outcomes["a"] = [W, W]
    assert run(driver) is True
    assert [s for _, s, _ in queue.submits] == ["x", "x", "x"]


def test_a_job_pending_past_its_sites_pending_limit_is_withdrawn_once_and_bound_to_another_site(tmp_path, caplog):
    slow = SiteConfig(name="x", scheduler="local", max_queued=10, pending_limit=60)
    driver, queue, clock = setup(tmp_path, {"a": [], "b": ["a"]}, sites=[slow, site("y", 10)])
    driver.recover()
    driver.step()
    first = driver.state.clusters["a"]
    assert first.site == "x"
    queue.pin("a", QueueStatus(QueueState.PENDING, "Priority"))
    driver.step()  # pending: seen now
    clock.sleep(59)
    driver.step()
    assert first.site == "x" and queue.cancelled == []  # not yet: under the limit
    clock.sleep(2)
    with caplog.at_level("WARNING", logger="pilot.submit"):
        driver.step()
    said = [r.getMessage() for r in caplog.records if "withdrawn" in r.getMessage()]
    assert len(said) == 1 and "pending on x for 61 s (its pending_limit 60 s): withdrawn and bound to y" in said[0]
    assert queue.cancelled == [first.job_ids[0]] and first.site == "y" and first.withdrawn_from == "x"
    queue.release("a")
    driver.step()
    assert [s for _, s, _ in queue.submits][:2] == ["x", "y"]  # the next attempt went to y
    queue.pin("a", QueueStatus(QueueState.PENDING, "Priority"))  # pending there too: it stays (once)
    driver.step()
    clock.sleep(1000)
    driver.step()
    assert first.site == "y" and len(queue.cancelled) == 1
    queue.release("a")
    assert driver.run() is True and states(driver) == {"a": "done", "b": "done"}
    # the state file keeps where it was withdrawn from, for a restarted driver
    saved = {c["name"]: c for c in json.loads(Path(driver.state.path).read_text())["clusters"]}
    assert saved["a"]["withdrawn_from"] == "x"


def test_after_a_withdrawal_new_clusters_go_to_another_site_first_until_the_site_runs_one(tmp_path):
    slow = SiteConfig(name="x", scheduler="local", max_queued=10, pending_limit=60)
    driver, queue, clock = setup(tmp_path, {"a": [], "b": ["a"], "c": ["b"]}, sites=[slow, site("y", 10)])
    driver.recover()
    driver.step()
    queue.pin("a", QueueStatus(QueueState.PENDING, "Priority"))
    driver.step()
    clock.sleep(61)
    driver.step()  # a withdrawn from x to y
    assert driver.state.clusters["a"].withdrawn_from == "x"
    queue.release("a")
    while driver.state.clusters["b"].site is None:
        driver.step()
    assert driver.state.clusters["b"].site == "y"  # x and y both idle: y first, a cluster did not start at x
    assert driver._backed_out() == {"x"}
    driver.state.clusters["a"].site, driver.state.clusters["a"].queue = "x", QueueState.RUNNING
    assert driver._backed_out() == set()  # something of the run runs at x again: it ranks as before
    driver.state.clusters["a"].site, driver.state.clusters["a"].queue = "y", None
    assert driver.run() is True and states(driver) == {"a": "done", "b": "done", "c": "done"}


def test_without_a_pending_limit_or_another_site_nothing_is_withdrawn(tmp_path):
    alone = SiteConfig(name="x", scheduler="local", max_queued=10, pending_limit=60)
    for sites in ([alone], [site("x"), site("y")]):
        driver, queue, clock = setup(tmp_path / str(len(sites)), {"a": []}, sites=sites)
        driver.recover()
        driver.step()
        queue.pin("a", QueueStatus(QueueState.PENDING, "Priority"))
        driver.step()
        clock.sleep(10_000)
        driver.step()
        assert queue.cancelled == [] and driver.state.clusters["a"].site == "x"


def test_a_killed_driver_resumes_without_submitting_twice(tmp_path):
    driver, queue, clock = setup(tmp_path)
    driver.recover()
    driver.step()  # a submitted
    again = Driver.load(driver.submit_dir, [site()], queue, Options(poll=1.0), clock)
    assert run(again) is True
    assert [c for _, _, c in queue.submits].count("a") == 1


def test_rerun_retries_only_what_failed(tmp_path):
    driver, queue, clock = setup(tmp_path, retry={"b": 0})
    queue.outcomes["b"] = [F]
    assert run(driver) is False
    assert states(driver) == {"a": "done", "b": "failed", "c": "done", "d": "waiting"}
    again = Driver.load(driver.submit_dir, [site()], queue, Options(poll=1.0), clock)
    assert run(again) is True
    assert [c for _, _, c in queue.submits] == ["a", "b", "c", "b", "d"]


def test_constructor_and_load_write_nothing_and_cancel_needs_no_recovery(tmp_path):
    driver, queue, _ = setup(tmp_path)
    assert not Path(driver.submit_dir, STATE_FILE).exists()
    driver.recover()
    driver.step()
    fresh = Driver.load(driver.submit_dir, [site()], queue, Options(), FakeClock())
    assert fresh.cancel_all() == [queue.latest("a").job_id]
    assert set(states(fresh).values()) == {"cancelled"}


def test_a_job_that_could_not_be_cancelled_is_named_and_its_cluster_not_called_cancelled(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": [], "b": [], "c": ["a"]})
    driver.recover()
    driver.step()
    queue.cancel_fails = {"a"}
    fresh = Driver.load(driver.submit_dir, [site()], queue, Options(), FakeClock())
    cancelled, failed = fresh.cancel_jobs()
    a = queue.latest("a").job_id
    assert cancelled == [queue.latest("b").job_id]  # asked again one by one: b's cancel is not lost with a's
    assert failed == {
        "a": f"cluster a: job {a} on a could not be cancelled: scancel: error: Kill job error on job id {a}: "
        "Unable to contact slurm controller"
    }
    fresh.mark_cancelled(failed)
    assert states(Driver.load(driver.submit_dir, [site()], queue)) == {
        "a": "queued",
        "b": "cancelled",
        "c": "cancelled",
    }


def test_a_cluster_whose_dag_another_run_holds_waits_for_it_instead_of_vanishing(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": []})
    stray = DagLock(driver.specs["a"].dag)  # a run of a, started by an earlier driver, that nothing ended
    stray.acquire()
    try:
        driver.recover()
        for _ in range(5):
            driver.step()
        c = driver.state.clusters["a"]
        assert queue.submits == [] and c.state is ClusterState.WAITING
        assert c.reason == (
            f"a pilot run of this cluster still runs (pid {os.getpid()} on {socket.gethostname()}): "
            f"waiting for it to end (pilot cancel {driver.submit_dir} ends it)"
        )
    finally:
        stray.release()
    assert driver.run() is True and len(queue.submits) == 1 and driver.state.clusters["a"].reason == ""


def test_a_job_that_left_the_queue_while_its_run_holds_the_dag_is_still_running(tmp_path):
    driver, queue, _ = setup(tmp_path, {"a": []})
    queue.outcomes["a"] = [V]  # the job's shell ends without a result...
    driver.recover()
    driver.step()  # submitted
    driver.step()  # pending
    driver.step()  # running
    run = DagLock(driver.specs["a"].dag)  # ...while the pilot run it started goes on
    run.acquire()
    try:
        for _ in range(3):
            driver.step()
        c = driver.state.clusters["a"]
        assert c.state is ClusterState.QUEUED and c.resubmits == 0 and "vanished" not in c.reason
        assert (
            c.queue is QueueState.RUNNING
            and c.queue_reason == f"pilot run pid {os.getpid()} on " f"{socket.gethostname()} still holds the DAG lock"
        )
        assert len(queue.submits) == 1
    finally:
        run.release()
    driver.step()  # it let go without a result: only now is the job taken for vanished
    assert driver.state.clusters["a"].resubmits == 1


def test_restart_needs_every_site_with_jobs(tmp_path):
    driver, queue, clock = setup(tmp_path, sites=[site("a"), site("b")])
    driver.recover()
    driver.step()
    busy = {c.site for c in driver.state.clusters.values() if c.job_ids}
    again = Driver.load(driver.submit_dir, [site("z")], queue, Options(), clock)
    with pytest.raises(ConfigError, match=f"on site\\(s\\) {sorted(busy)[0]}"):
        again.recover()


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"format": 99, "plan_id": "x", "clusters": []}', "state format 99, this pilot reads format 1"),
        ('{"plan_id": "x", "clusters": []}', "state format None"),
        ("{", ":1: not valid JSON"),
        (
            '{"format": 1, "plan_id": "x", "clusters": [{"name": "a", "state": "flying"}]}',
            "clusters[0]: 'flying' is not a valid",
        ),
        ('{"format": 1, "plan_id": "x", "clusters": [{"name": "a", "colour": 1}]}', "unknown field 'colour'"),
    ],
)
def test_state_file_errors_are_one_line(tmp_path, text, message):
    (tmp_path / STATE_FILE).write_text(text)
    with pytest.raises(ConfigError, match=r"submit\.state\.json(:1)?: ") as err:
        SubmitState.load(str(tmp_path))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_state_file_round_trip(tmp_path):
    driver, _, _ = setup(tmp_path)
    assert run(driver) is True
    raw = json.loads(Path(driver.submit_dir, STATE_FILE).read_text())
    assert raw["format"] == 1 and raw["clusters"][0]["state"] == "done"
    loaded = SubmitState.load(driver.submit_dir)
    assert loaded is not None and loaded.clusters["d"].state is ClusterState.DONE


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace("format: 1", "format: 7"), "cluster DAG format 7, this pilot reads format 1"),
        (lambda t: t.replace("format: 1\n", ""), "cluster DAG format None"),
        (lambda t: t.replace('kind: "horizontal"', 'kind: "diagonal"', 1), "cluster #1: bad or missing field"),
        (lambda t: t.replace("clusters:", "clusters: ["), "not valid YAML"),
    ],
)
def test_clusters_file_errors_are_one_line(tmp_path, edit, message):
    from pilot.contracts.clusters import read_clusters

    sub = Path(make_plan(tmp_path / "sub", {"a": []}))
    (sub / "clusters.yml").write_text(edit((sub / "clusters.yml").read_text()))
    with pytest.raises(ConfigError, match="clusters.yml") as err:
        read_clusters(str(sub))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_every_submission_is_on_disk_before_and_after_it_happens(tmp_path):
    driver, queue, _ = setup(tmp_path, {f"c{i}": [] for i in range(3)})
    seen = []
    submit = queue.submit

    def checked(site, req, job_name):
        on_disk = SubmitState.load(driver.submit_dir)
        seen.append(
            (
                on_disk.clusters[req.name].state,
                on_disk.clusters[req.name].job_name == job_name,
                [c.job_ids for c in on_disk.clusters.values()],
            )
        )
        return submit(site, req, job_name)

    queue.submit = checked
    driver.recover()
    driver.step()
    assert [(s, named) for s, named, _ in seen] == [(ClusterState.SUBMITTING, True)] * 3
    assert [ids for _, _, ids in seen] == [[[], [], []], [["100"], [], []], [["100"], ["101"], []]]


def test_clusters_fed_to_pilot_jobs_are_written_once_with_the_pass(tmp_path):
    """A cluster handed to a running pilot job leaves nothing a restart finds by name (its run holds its DAG
    lock): the pass writes no record before the feeds, which would hold every fed cluster's start, only one
    after them."""
    driver, queue, _ = setup(tmp_path, {f"c{i}": [] for i in range(3)})
    submit = queue.submit
    on_disk_then = []
    writes = []

    def fed(site, req, job_name):
        on_disk_then.append(SubmitState.load(driver.submit_dir).clusters[req.name].state)
        return dataclasses.replace(submit(site, req, job_name), queued=False)

    queue.submit = fed
    queue.found_by_name = lambda site, cluster: False
    driver.recover()
    save = driver.state.save
    driver.state.save = lambda: (writes.append(1), save())[1]
    driver.step()
    assert on_disk_then == [ClusterState.WAITING] * 3
    assert len(writes) == 1
    assert {c.state for c in SubmitState.load(driver.submit_dir).clusters.values()} == {ClusterState.QUEUED}


def test_records_of_clusters_no_longer_planned(tmp_path):
    driver, queue, clock = setup(tmp_path, {"a": [], "b": []})
    driver.recover()
    driver.step()  # a and b queued
    text = Path(driver.submit_dir, "clusters.yml").read_text()
    Path(driver.submit_dir, "clusters.yml").write_text(text[: text.index('- name: "b"')])  # re-planned without b
    again = Driver.load(driver.submit_dir, [site()], queue, Options(), clock)
    assert list(again.state.clusters) == ["a"]
    with pytest.raises(ConfigError, match="batch jobs for cluster\\(s\\) b that clusters.yml no longer has"):
        again.recover()
    assert sorted(again.cancel_all()) == sorted(
        j.job_id for j in queue.jobs.values()
    )  # pilot cancel still finds b's job


class Recorder(RootEvents):
    """The monitor's calls, each with the cluster's state in the state file when it was made."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.calls: list[tuple] = []

    def _saved(self, cluster: str) -> str:
        saved = json.loads(Path(self.driver.submit_dir, STATE_FILE).read_text())["clusters"]
        return next(c["state"] for c in saved if c["name"] == cluster)

    def submitted(self, cluster, job_id, site):
        self.calls.append(("submitted", cluster, self._saved(cluster)))

    def running(self, cluster):
        self.calls.append(("running", cluster))

    def ended(self, cluster, retry, retry_limit):
        self.calls.append(("ended", cluster, retry, retry_limit))

    def aborted(self, cluster):
        self.calls.append(("aborted", cluster))

    def refused(self, cluster):
        self.calls.append(("refused", cluster))


def test_monitor_hears_each_attempt_after_it_is_saved_retries_and_resubmits_alike(tmp_path):
    """Task retries (--retry) and resubmissions (--max-resubmits) are both DAGMan retries of the node, against
    the sum of the two limits; every event follows the state write that records it."""
    driver, queue, _ = setup(tmp_path, {"a": [], "b": ["a"]}, retry={"a": 1}, max_resubmits=2)
    driver.monitor = rec = Recorder(driver)
    queue.outcomes["a"] = [F, W, F]
    assert run(driver) is False
    a = [c for c in rec.calls if c[1] == "a"]
    assert a == [
        ("submitted", "a", "queued"),
        ("running", "a"),
        ("ended", "a", True, 3),
        ("submitted", "a", "queued"),
        ("running", "a"),
        ("ended", "a", True, 3),
        ("submitted", "a", "queued"),
        ("running", "a"),
        ("ended", "a", False, 3),
    ]
    assert not [c for c in rec.calls if c[1] == "b"]  # not run: nothing to log (pegasus-status counts it unready)


def test_monitor_hears_jobs_found_in_doubt_refused_never_starting_and_cancelled(tmp_path):
    driver, queue, clock = setup(tmp_path, {"a": [], "b": [], "c": [], "d": []})
    driver.monitor = rec = Recorder(driver)
    queue.submit_errors["a"] = [True]  # in doubt, found in the queue
    queue.refuse["b"] = "sbatch: error: Invalid partition name specified"
    driver.recover()
    driver.step()  # a's submission fails: b, c and d wait for the next pass, not tried against that scheduler now
    clock.sleep(3)  # past the back-off
    driver.step()
    queue.pin("c", QueueStatus(QueueState.PENDING, "PartitionConfig", never_starts=True))
    clock.sleep(3)  # past the back-off
    driver.step()
    assert ("submitted", "a", "queued") in rec.calls and ("refused", "b") in rec.calls
    assert ("aborted", "c") in rec.calls and not [x for x in rec.calls if x[0] in ("running", "ended") and x[1] == "c"]
    fresh = Driver.load(driver.submit_dir, [site()], queue, Options(), FakeClock())
    fresh.monitor = after = Recorder(fresh)
    fresh.cancel_all()
    assert sorted(c for c in after.calls) == [("aborted", "a"), ("aborted", "d")]


def test_data_jobs_of_a_category_run_at_most_maxjobs_at_once(tmp_path):
    """Pegasus' DAGMan categories: 5 stage-in jobs under MAXJOBS 2 beside compute clusters the site takes freely."""
    clusters = {**{f"stage_in_{i}": [] for i in range(5)}, "c1": [], "c2": [], "c3": []}
    categories = {f"stage_in_{i}": ("stagein", 2) for i in range(5)}
    driver, queue, _ = setup(tmp_path, clusters, categories=categories)
    assert run(driver) is True and set(states(driver).values()) == {"done"}
    first = [c for t, _, c in queue.submits if t == queue.submits[0][0]]
    assert sorted(first) == ["c1", "c2", "c3", "stage_in_0", "stage_in_1"]  # the rest of the category waits
    assert queue.max_active["a"] == 5


def test_an_unreachable_scheduler_fails_the_cluster_after_the_submit_tries(tmp_path):
    """sbatch cannot reach the controller and squeue cannot either: back-off, then one failure line, not forever."""
    driver, queue, clock = setup(tmp_path, {"a": []}, submit_tries=3)
    queue.submit_errors["a"] = [False] * 10  # every submission fails before the queue has the job
    queue.find_outages = 100  # and the queue cannot be asked whether it has it
    start = clock.now
    assert run(driver) is False
    c = driver.state.clusters["a"]
    assert c.state.value == "failed" and c.submit_errors == 1
    assert re.match(
        r"a's scheduler could not be reached for \d+ s \(1 failed submission\(s\), \d+ looks for job pilot-", c.reason
    ), c.reason
    assert "submitting a failed: timed out" in c.reason and "\n" not in c.reason
    assert UNREACHABLE_LIMIT <= clock.now - start < UNREACHABLE_LIMIT + 600  # looked, with back-off, for the limit


def plan_properties(driver_dir: Path, **props: str) -> None:
    """The submit directory's pegasus.properties, as pilot plan writes the properties it planned with."""
    lines = ["# The properties this workflow was planned with"] + [f"dagman.{k} = {v}" for k, v in props.items()]
    (driver_dir / "pegasus.properties").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "props, first, most",
    [
        ({"maxjobs": "2"}, 2, 2),
        ({"maxidle": "3"}, 3, 4),
        ({"maxjobs": "0"}, 4, 4),
        ({"maxjobs": "2", "maxidle": "1"}, 1, 2),
        ({"maxjobs": "9"}, 4, 4),
    ],
)
def test_dagman_maxjobs_and_maxidle_cap_the_jobs_submitted_below_max_queued(tmp_path, props, first, most):
    """Four independent clusters on a site that takes 4 (max_queued): dagman.maxjobs caps the jobs submitted,
    dagman.maxidle those not yet running (each job is pending when submitted, so the first pass submits that
    many; more follow as they start), 0 sets no limit; the smallest of these and max_queued wins."""
    clusters = {f"c{i}": [] for i in range(4)}
    sub = make_plan(tmp_path / "sub", clusters)
    plan_properties(Path(sub), **props)
    clock = FakeClock()
    queue = FakeQueue(clock)
    driver = Driver.load(sub, [site(max_queued=4)], queue, Options(poll=1.0, backoff=2.0), clock)
    assert run(driver) is True and set(states(driver).values()) == {"done"}
    assert len([c for t, _, c in queue.submits if t == queue.submits[0][0]]) == first
    assert queue.max_active["a"] == most


def test_a_dagman_throttle_that_is_no_number_is_one_line(tmp_path):
    sub = make_plan(tmp_path / "sub", {"a": []})
    plan_properties(Path(sub), maxjobs="many")
    with pytest.raises(ConfigError, match=r"pegasus.properties:2: dagman.maxjobs = 'many' is not a whole number"):
        Driver.load(sub, [site()], FakeQueue(FakeClock()), Options(), FakeClock())
