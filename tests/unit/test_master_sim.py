"""The real master against simulated workers (InProcTransport): no MPI, virtual time."""

from pathlib import Path

import pytest

from pilot.errors import InfeasibleTask
from pilot.monitor.jobstate import JobstateLog
from pilot.runtime.master import Master
from pilot.runtime.options import RunOptions
from pilot.runtime.protocol import RunTask
from pilot.runtime.simulate import SimCluster, SimHost
from tests.conftest import simulate, start_order

DIAMOND = "TASK A x\nTASK B x\nTASK C x\nTASK D x\nEDGE A B\nEDGE A C\nEDGE B D\nEDGE C D\n"


def test_diamond_runs_in_dependency_order(dagfile, capsys):
    dag = dagfile(DIAMOND)
    rc, cluster, _ = simulate(dag)
    assert rc == 0
    order = start_order(cluster)
    assert order[0] == "A" and order[-1] == "D" and sorted(order) == ["A", "B", "C", "D"]
    out = capsys.readouterr().out
    assert '[cluster-summary stat="ok", tasks=4, submitted=4, succeeded=4, failed=0, extra=0,' in out
    assert Path(dag + ".rescue").read_text().split("\n")[:-1] == [f"DONE {t}" for t in order]


def test_failure_blocks_children_and_fails_run(dagfile, capsys):
    dag = dagfile(DIAMOND)
    rc, cluster, _ = simulate(dag, status=lambda name, attempt: 3 if name == "B" else 0)
    assert rc == 1
    assert "D" not in start_order(cluster)
    assert 'stat="failed", tasks=4, submitted=3, succeeded=2, failed=1' in capsys.readouterr().out


def test_retries_use_new_attempts(dagfile, capsys):
    dag = dagfile("TASK a x\nTASK b -t 3 x\n")
    rc, cluster, _ = simulate(dag, tries=2, status=lambda name, attempt: 0 if attempt == 3 else 1)
    assert rc == 1  # a fails twice; b succeeds on its third try
    assert start_order(cluster).count("a") == 2 and start_order(cluster).count("b") == 3
    # failed= counts tasks that failed for good, not the attempts that were retried
    assert "submitted=5, succeeded=1, failed=1" in capsys.readouterr().out


def test_max_failures_stops_new_work(dagfile):
    dag = dagfile("".join(f"TASK t{i} x\n" for i in range(10)))
    rc, cluster, _ = simulate(dag, [SimHost("h", cpus=1, slots=1)], max_failures=2, status=lambda n, a: 1)
    assert rc == 1 and len(start_order(cluster)) == 2


def test_priorities_and_fifo_on_one_slot(dagfile):
    dag = dagfile("TASK a x\nTASK b -p 5 x\nTASK c x\nTASK d -p 5 x\nTASK e -p -3 x\n")
    rc, cluster, _ = simulate(dag, [SimHost("h", cpus=1, slots=1)])
    assert rc == 0 and start_order(cluster) == ["b", "d", "a", "c", "e"]


def test_resources_never_oversubscribed(dagfile):
    text = "".join(f"TASK m{i} -m 700 -c 1 x\n" for i in range(6)) + "".join(f"TASK c{i} -c 3 x\n" for i in range(4))
    text += "".join(f"TASK s{i} x\n" for i in range(20))
    dag = dagfile(text)
    hosts = [SimHost("h1", cpus=4, memory=1500, slots=4), SimHost("h2", cpus=4, memory=1000, slots=3)]
    rc, cluster, _ = simulate(dag, hosts, duration=lambda n: 0.5 if n[0] == "s" else 2.0)
    assert rc == 0 and len(start_order(cluster)) == 30
    for host in hosts:
        cpus, mem, _ = cluster.peak[host.name]
        assert cpus <= host.cpus and mem <= host.memory


def test_backfill_runs_small_tasks_while_big_waits(dagfile):
    dag = dagfile(
        "TASK hold x\nTASK gate x\nTASK big -p 10 -c 2 x\nTASK s1 x\nTASK s2 x\nEDGE gate big\nEDGE gate s1\nEDGE gate s2\n"
    )
    rc, cluster, _ = simulate(dag, [SimHost("h", cpus=2, slots=2)], duration=lambda n: 5.0 if n == "hold" else 1.0)
    assert rc == 0
    start = {name: t for t, name, _ in cluster.started}
    assert start["s1"] < start["big"]  # backfilled while "hold" kept a CPU busy


def test_host_overrides(dagfile):
    dag = dagfile("TASK a -c 8 -m 100 x\n")
    with pytest.raises(
        InfeasibleTask, match=r"wf.dag:1: FATAL ERROR: No host is capable of running task a: it requests 8 CPU\(s\)"
    ):
        simulate(dag, [SimHost("h", cpus=4, slots=1)])
    rc, _, _ = simulate(dag, [SimHost("h", cpus=4, slots=1)], host_cpus=8)
    assert rc == 0
    with pytest.raises(InfeasibleTask):
        simulate(dag, [SimHost("h", cpus=16, slots=1)], host_memory=50, skip_rescue=True)


def test_rescue_log_skips_done_tasks(dagfile):
    dag = dagfile(DIAMOND)
    Path(dag + ".rescue").write_text("DONE A\nDONE C\n")
    rc, cluster, _ = simulate(dag)
    assert rc == 0 and start_order(cluster) == ["B", "D"]
    rc, cluster, _ = simulate(dag, skip_rescue=True)
    assert start_order(cluster)[0] == "A" and len(start_order(cluster)) == 4


def test_prefetched_task_is_recalled_from_behind_a_long_task(dagfile):
    """Short tasks switch prefetch on; a task queued behind a long one moves to an idle slot."""
    text = "".join(f"TASK s{i} x\n" for i in range(3)) + "TASK long x\nTASK after x\n"
    dag = dagfile(text)
    rc, cluster, master = simulate(
        dag, [SimHost("h", cpus=2, slots=2)], duration=lambda n: 100.0 if n == "long" else 0.001
    )
    assert rc == 0 and sorted(start_order(cluster)) == sorted([f"s{i}" for i in range(3)] + ["after", "long"])
    assert cluster.recalled  # something queued behind a busy worker moved to the idle one
    start = {name: t for t, name, _ in cluster.started}
    assert start["after"] < 1.0 and start["long"] < 1.0  # neither waited 100 s behind "long"
    assert master.engine.submitted == 5


def test_max_failures_takes_back_work_queued_when_it_is_reached(dagfile):
    """Deep prefetch queues are full when the failure comes: none of their tasks starts after it."""
    text = "TASK bad x\n" + "".join(f"TASK s{i} x\n" for i in range(3000))
    rc, cluster, master = simulate(
        dagfile(text),
        [SimHost("h", cpus=3, slots=3)],
        max_failures=1,
        duration=lambda n: 0.01 if n == "bad" else 0.0005,
        status=lambda n, a: 1 if n == "bad" else 0,
    )
    assert rc == 1 and cluster.recalled  # work was queued behind running tasks, and came back
    assert [name for t, name, _ in cluster.started if t > 0.01] == []
    assert master.engine.running == 0 and not master.slots.recalling and master.slots.queued_total == 0


def test_jobstate_log(dagfile, tmp_path):
    dag = dagfile(DIAMOND)
    log = JobstateLog(str(tmp_path / "jobstate.log"))
    rc, _, _ = simulate(dag, status=lambda n, a: 3 if n == "C" else 0, events=[log])
    lines = (tmp_path / "jobstate.log").read_text().splitlines()
    assert lines[0].endswith("INTERNAL *** PMC_STARTED ***")
    assert lines[-1].endswith("INTERNAL *** PMC_FINISHED 1 ***")
    fields = [line.split()[1:] for line in lines[1:-1]]
    a = [f for f in fields if f[0] == "A"]
    assert [f[1] for f in a] == ["SUBMIT", "EXECUTE", "JOB_TERMINATED", "JOB_SUCCESS"]
    assert a[0][2:] == ["1.0", "-", "-", "1"] and a[3][2:] == ["0", "-", "-", "1"]
    c = [f for f in fields if f[0] == "C"]
    assert c[-1][1:3] == ["JOB_FAILURE", "3"]


def test_max_failures_recalls_prefetched_work(dagfile):
    """After -m is reached, tasks already prefetched onto busy workers do not start."""
    text = "TASK bad x\n" + "".join(f"TASK s{i} x\n" for i in range(30))
    rc, cluster, master = simulate(
        dagfile(text),
        [SimHost("h", cpus=2, slots=2)],
        max_failures=1,
        duration=lambda n: 0.5 if n == "bad" else 0.01,
        status=lambda n, a: 1 if n == "bad" else 0,
    )
    assert rc == 1
    started_after_failure = [name for t, name, _ in cluster.started if t > 0.5]
    assert started_after_failure == []
    assert master.engine.running == 0


PMC_PRIORITY_DAG = """TASK N -p -5 -c 1 /bin/echo N
TASK O -p -4 -c 1 /bin/echo O
TASK I -p 9 -c 1 /bin/echo I
TASK E -p 7 -c 1 /bin/echo E
TASK D -p 8 -c 2 /bin/echo D
TASK G -p 10 -c 1 /bin/echo G
"""


def test_pmc_priority_dag_on_one_worker_with_two_cpus(dagfile):
    """PMC's own priority test: the 2-CPU task D (priority 8) runs right after I, not after all narrow tasks."""
    rc, cluster, _ = simulate(
        dagfile(PMC_PRIORITY_DAG), [SimHost("h", cpus=2, slots=1)], host_cpus=2, duration=lambda name: 0.001
    )
    assert rc == 0 and start_order(cluster) == ["G", "I", "D", "E", "O", "N"]


def test_max_failures_with_tries_starts_nothing_after_the_last_try(dagfile, capsys):
    """-m 1 -t 2: A's second failure stops the run; tasks prefetched behind it are taken back unstarted."""
    dag = dagfile("TASK A /bin/false\nTASK B x\nTASK C x\nTASK D x\n")
    rc, cluster, _ = simulate(
        dag,
        [SimHost("h", cpus=1, slots=1)],
        max_failures=1,
        tries=2,
        status=lambda name, attempt: 1 if name == "A" else 0,
        duration=lambda name: 0.001,
    )
    assert rc == 1 and start_order(cluster) == ["A", "A"]
    assert "submitted=2, succeeded=0, failed=1" in capsys.readouterr().out


def test_a_failure_that_does_not_stop_the_run_lets_the_worker_go_on(dagfile, capsys):
    dag = dagfile("".join(f"TASK t{i} x\n" for i in range(6)))
    rc, cluster, _ = simulate(
        dag,
        [SimHost("h", cpus=1, slots=1)],
        max_failures=3,
        status=lambda name, attempt: 1 if name in ("t1", "t2") else 0,
        duration=lambda name: 0.001,
    )
    assert rc == 1 and start_order(cluster) == [f"t{i}" for i in range(6)]
    assert "submitted=6, succeeded=4, failed=2" in capsys.readouterr().out


def test_chain_children_follow_on_and_a_failed_parent_keeps_its_child_back(dagfile, capsys):
    """The child of a running short task is sent ahead; when the parent fails it comes back unstarted."""
    dag = dagfile("".join(f"TASK c{i} x\n" for i in range(6)) + "".join(f"EDGE c{i} c{i + 1}\n" for i in range(5)))
    rc, cluster, master = simulate(
        dag,
        [SimHost("h", cpus=1, slots=1)],
        tries=2,
        duration=lambda name: 0.001,
        status=lambda name, attempt: 1 if name == "c3" and attempt == 1 else 0,
    )
    assert rc == 0 and start_order(cluster) == ["c0", "c1", "c2", "c3", "c3", "c4", "c5"]
    assert "submitted=7, succeeded=6, failed=0" in capsys.readouterr().out


def test_follow_on_child_is_never_run_after_a_final_failure(dagfile, capsys):
    dag = dagfile("TASK a x\nTASK b x\nTASK c x\nEDGE a b\nEDGE b c\n")
    rc, cluster, _ = simulate(
        dag,
        [SimHost("h", cpus=1, slots=1)],
        duration=lambda name: 0.001,
        status=lambda name, attempt: 1 if name == "b" else 0,
    )
    assert rc == 1 and start_order(cluster) == ["a", "b"]
    assert "submitted=2, succeeded=1, failed=1" in capsys.readouterr().out


def test_a_worker_that_cannot_go_on_ends_the_run_instead_of_hanging(dagfile, capsys, caplog):
    from pilot.runtime.master import Master
    from pilot.runtime.options import RunOptions
    from pilot.runtime.protocol import WorkerFailed

    class Breaking(SimCluster):
        def _start_next(self, r):
            if r.queue and r.queue.tasks[0].name == "boom":
                r.queue.tasks.popleft()
                self.transport.deliver(r.rank, WorkerFailed(r.rank, "OSError: disk gone", fatal=True))
                return
            super()._start_next(r)

    dag = dagfile("TASK long x\nTASK boom x\nTASK after x\nEDGE boom after\n")
    cluster = Breaking([SimHost("h", cpus=2, slots=2)], duration=lambda name: 5.0)
    rc = Master(RunOptions(dag=dag), cluster.transport).run()
    assert rc == 1 and "boom" not in start_order(cluster) and "after" not in start_order(cluster)
    assert "Worker 2: OSError: disk gone" in caplog.text or "Worker 1: OSError: disk gone" in caplog.text
    assert "cannot go on" in caplog.text


def test_backfill_is_bounded_so_a_wide_task_is_not_starved(dagfile):
    """Two 1-CPU slots: narrow work may pass the 2-CPU task only as often as there are slots."""
    dag = dagfile(PMC_PRIORITY_DAG + "".join(f"TASK n{i} -p -9 /bin/echo {i}\n" for i in range(20)))
    rc, cluster, _ = simulate(dag, [SimHost("h", cpus=2, slots=2)], host_cpus=2, duration=lambda name: 1.0)
    order = start_order(cluster)
    assert rc == 0 and order[:2] == ["G", "I"]
    assert order.index("D") <= 4  # passed over twice at most (E, O), then its host is kept for it


def test_master_rings_only_a_worker_that_may_be_waiting(dagfile):
    # A worker with a task under way waits on that task and takes what was queued for it
    # when the task ends: a ring would only cost both sides a system call.
    dag = dagfile("".join(f"TASK t{i} x\n" for i in range(40)) + "TASK a x\nTASK b x\nEDGE a b\n")
    cluster = SimCluster([SimHost("h", cpus=2, slots=2)], duration=lambda name: 0.001)
    sends: list[tuple[RunTask, bool, bool]] = []
    deliver = cluster.transport.send

    def send(dest, msg, ring=True):
        if isinstance(msg, RunTask):
            sends.append((msg, ring, cluster.ranks[dest - 1].running is None))
        deliver(dest, msg, ring)

    cluster.transport.send = send  # type: ignore[method-assign]  # the test intercepts what the master sends
    assert Master(RunOptions(dag=dag), cluster.transport, None, clock=cluster.now).run() == 0
    assert all(idle for _, ring, idle in sends if ring)  # rung: the worker had nothing to run
    assert sum(not ring for _, ring, _ in sends) > 20  # short tasks were queued behind running ones, unrung
    # the result of a task that others wait for wakes the master at once; the others' need not
    assert {m.name: m.urgent for m, _, _ in sends if m.name in ("a", "b", "t0")} == {"a": True, "b": False, "t0": False}


class _Order:
    """Records the master's task events in the order they come: (event, task, seq)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int]] = []

    def __getattr__(self, name):
        return lambda *a, **k: None

    def task_queued(self, task, seq):
        self.seen.append(("queued", task.name, seq))

    def task_dispatched(self, task, seq, rank, hostname):
        self.seen.append(("started", task.name, seq))

    def task_ended(self, task, seq, status, will_retry):
        self.seen.append(("ended", task.name, seq))


def test_an_attempt_is_queued_when_ready_and_started_when_a_slot_frees(dagfile):
    """As PMC: SUBMIT (queued) when a task becomes ready, EXECUTE when it starts, so the records show the time
    it waited for a slot. A child is queued when its last parent ends, a retry as a new attempt number."""
    rec = _Order()
    dag = dagfile("TASK a x\nTASK b x\nTASK c x\nTASK d x\nEDGE a d\n")
    rc, _, _ = simulate(
        dag,
        [SimHost("h", cpus=1, slots=1)],
        events=[rec],
        tries=2,
        duration=lambda n: 1.0,
        status=lambda n, attempt: 1 if n == "c" and attempt == 1 else 0,
    )
    assert rc == 0
    seen = rec.seen
    assert seen[:3] == [("queued", "a", 1), ("queued", "b", 2), ("queued", "c", 3)]  # all ready at start
    started = {(t, s) for e, t, s in seen if e == "started"}
    assert ("b", 2) in started and seen.index(("started", "b", 2)) > seen.index(("ended", "a", 1))  # b waited
    queued_d = next(i for i, e in enumerate(seen) if e[:2] == ("queued", "d"))
    assert seen[queued_d - 1] == ("ended", "a", 1)  # ready exactly when its parent ended
    c = [e for e in seen if e[1] == "c"]
    assert [e[0] for e in c] == ["queued", "started", "ended", "queued", "started", "ended"]
    assert c[0][2] == c[1][2] == c[2][2] != c[3][2] == c[4][2] == c[5][2]  # one number per attempt
    numbers = [s for e, _, s in seen if e == "queued"]
    assert len(numbers) == len(set(numbers)) == 5


def test_a_task_sent_ahead_behind_its_parent_is_queued_as_it_starts(dagfile):
    """A chain's child goes to its parent's worker before the parent ends (as in the follow-on test above); it
    becomes ready only when the parent ends. One given back unstarted after a failure keeps no number."""
    rec = _Order()
    dag = dagfile("".join(f"TASK c{i} x\n" for i in range(6)) + "".join(f"EDGE c{i} c{i + 1}\n" for i in range(5)))
    rc, cluster, _ = simulate(
        dag,
        [SimHost("h", cpus=1, slots=1)],
        events=[rec],
        tries=2,
        duration=lambda n: 0.001,
        status=lambda n, attempt: 1 if n == "c3" and attempt == 1 else 0,
    )
    assert rc == 0 and start_order(cluster) == ["c0", "c1", "c2", "c3", "c3", "c4", "c5"]
    assert [e for e, _, _ in rec.seen] == ["queued", "started", "ended"] * 7
    assert [t for _, t, _ in rec.seen[::3]] == ["c0", "c1", "c2", "c3", "c3", "c4", "c5"]
    assert all(rec.seen[i][2] == rec.seen[i + 1][2] == rec.seen[i + 2][2] for i in range(0, 21, 3))
    assert len({s for _, _, s in rec.seen}) == 7
