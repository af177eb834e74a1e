from pilot.dag import parse_dag
from pilot.runtime.engine import Engine, State


def dag(text):
    return parse_dag(text.splitlines(True), "t.dag")


DIAMOND = "TASK A x\nTASK B x\nTASK C x\nTASK D x\nEDGE A B\nEDGE A C\nEDGE B D\nEDGE C D\n"


def names(tasks):
    return [t.name for t in tasks]


def test_readiness_follows_edges():
    d = dag(DIAMOND)
    e = Engine(d)
    assert names(e.initial_ready()) == ["A"]
    e.start(d["A"])
    assert names(e.succeeded(d["A"])) == ["B", "C"]
    e.start(d["B"])
    assert e.succeeded(d["B"]) == []
    e.start(d["C"])
    assert names(e.succeeded(d["C"])) == ["D"]
    e.start(d["D"])
    e.succeeded(d["D"])
    assert e.success and e.done_count == 4 and e.running == 0


def test_rescue_done_tasks_are_skipped():
    d = dag(DIAMOND)
    e = Engine(d, done={"A", "B"})
    assert names(e.initial_ready()) == ["C"]
    assert e.done_count == 2


def test_tries_global_and_per_task():
    d = dag("TASK a x\nTASK b -t 3 x\n")
    e = Engine(d, tries=2)
    a, b = d["a"], d["b"]
    e.initial_ready()
    assert e.start(a) == 1 and e.failed(a) is True
    assert e.start(a) == 2 and e.failed(a) is False
    assert e.state[a.order] is State.FAILED
    for attempt in (1, 2):
        assert e.start(b) == attempt and e.failed(b) is True
    assert e.start(b) == 3 and e.failed(b) is False
    assert e.failed_count == 2 and e.submitted == 5


def test_failed_task_blocks_descendants():
    d = dag(DIAMOND)
    e = Engine(d)
    e.initial_ready()
    e.start(d["A"])
    e.failed(d["A"])
    assert not e.success and e.unfinished() == ["A", "B", "C", "D"]


def test_max_failures_stops_release():
    d = dag("TASK a x\nTASK b x\nTASK c x\n")
    e = Engine(d, max_failures=2)
    e.initial_ready()
    e.start(d["a"])
    e.failed(d["a"])
    assert not e.stopped
    e.start(d["b"])
    e.failed(d["b"])
    assert e.stopped and "-m 2" in e.stop_reason


def test_unstart_reverts_a_prefetch():
    d = dag("TASK a x\n")
    e = Engine(d)
    e.initial_ready()
    e.start(d["a"])
    e.unstart(d["a"])
    assert e.state[0] is State.READY and e.attempts[0] == 0 and e.submitted == 0 and e.running == 0
