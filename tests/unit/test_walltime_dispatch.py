"""Runtimes in the DAG: longest first among equal priorities, and nothing started that the wall-time limit would kill."""

from __future__ import annotations

from pathlib import Path

from pilot.contracts.result import RunOutcome, read_result
from pilot.runtime.simulate import SimHost
from tests.conftest import simulate, start_order


def dag_text(tasks: dict[str, float], extra: str = "") -> str:
    return "".join(f"#pilot runtime={r:g}\nTASK {n} x\n" for n, r in tasks.items()) + extra


def runtimes(dag: str) -> dict[str, float]:
    from pilot.dag import read_dag

    return {t.name: t.runtime for t in read_dag(dag)}


def one_slot() -> list[SimHost]:
    return [SimHost("h", cpus=1, slots=1)]


def test_equal_priorities_run_longest_first_and_priority_still_comes_first(dagfile):
    dag = dagfile(dag_text({"a": 1, "b": 3, "c": 2}) + "#pilot runtime=0.5\nTASK p -p 5 x\nTASK unknown x\n")
    rc, cluster, _ = simulate(dag, one_slot())
    assert rc == 0 and start_order(cluster) == ["p", "b", "c", "a", "unknown"]
    rc, cluster, _ = simulate(dag, one_slot(), skip_rescue=True, ignore_runtimes=True)
    assert rc == 0 and start_order(cluster) == ["p", "a", "b", "c", "unknown"]  # FIFO, as without runtimes


def test_a_task_that_cannot_finish_in_the_time_left_waits_for_the_next_run(dagfile):
    dag = dagfile(dag_text({"a": 4, "b": 3, "c": 1}))
    rt = runtimes(dag)
    # 6 s: a runs 0-4; b (3 s) no longer fits, c (1 s) does; then nothing that fits is left and nothing runs
    rc, cluster, master = simulate(dag, one_slot(), max_wall_time=0.1, duration=rt.__getitem__, timeouts=True)
    assert rc == 1 and start_order(cluster) == ["a", "c"] and cluster.killed == []
    assert cluster.clock == 5.0  # it ended at once instead of idling until the limit
    result = read_result(dag)
    assert result is not None and result.outcome is RunOutcome.WALLTIME and result.unfinished == ["b"]
    assert Path(dag + ".rescue").read_text() == "DONE a\nDONE c\n"
    rc, cluster, _ = simulate(
        dag, one_slot(), max_wall_time=0.1, duration=rt.__getitem__, timeouts=True
    )  # the resubmission
    assert rc == 0 and start_order(cluster) == ["b"]


def test_without_the_rule_the_limit_kills_work(dagfile):
    dag = dagfile(dag_text({"a": 4, "b": 3, "c": 1}))
    rc, cluster, _ = simulate(
        dag, one_slot(), max_wall_time=0.1, duration=runtimes(dag).__getitem__, timeouts=True, ignore_runtimes=True
    )
    assert rc == 1 and start_order(cluster) == ["a", "b"] and cluster.killed == [("b", 2.0)]
    result = read_result(dag)
    assert result is not None and result.outcome is RunOutcome.WALLTIME


def test_work_sent_ahead_respects_the_time_left(dagfile):
    """Short tasks are prefetched and chained children sent along: none may start past the limit."""
    wide = dagfile(dag_text({f"s{i}": 0.1 for i in range(40)}), name="wide.dag")
    rc, cluster, master = simulate(
        wide, one_slot(), max_wall_time=1 / 60, duration=runtimes(wide).__getitem__, timeouts=True
    )
    assert rc == 1 and cluster.killed == [] and 7 <= len(start_order(cluster)) <= 9
    assert master.slots.queued_total == 0
    chain = dagfile(
        dag_text({f"c{i}": 0.1 for i in range(40)}, "".join(f"EDGE c{i} c{i + 1}\n" for i in range(39))),
        name="chain.dag",
    )
    rc, cluster, _ = simulate(
        chain, one_slot(), max_wall_time=1 / 60, duration=runtimes(chain).__getitem__, timeouts=True
    )
    assert rc == 1 and cluster.killed == [] and 7 <= len(start_order(cluster)) <= 9
    result = read_result(chain)
    assert result is not None and result.outcome is RunOutcome.WALLTIME


def test_a_task_longer_than_the_whole_limit_still_starts(dagfile, caplog):
    """No later run could finish it either: holding it back would only resubmit for ever."""
    dag = dagfile(dag_text({"huge": 100, "small": 1}))
    rc, cluster, _ = simulate(dag, one_slot(), max_wall_time=0.1, duration=runtimes(dag).__getitem__, timeouts=True)
    assert rc == 1 and start_order(cluster) == ["huge"] and cluster.killed == [("huge", 6.0)]
    assert (
        "1 task(s) have a runtime longer than the 6.0 s this run has for tasks" in caplog.text
        and "huge: 100 s" in caplog.text
    )


def test_a_task_that_a_fresh_run_could_not_start_either_is_not_held(dagfile):
    """Held only if a run could start it: else every resubmission would end at once with nothing done."""
    dag = dagfile(dag_text({"a": 3, "big": 5.97}))
    # 6 s less the start margin leave 5.95 s: big is longer, but no run has more, so it starts; then a is held
    rc, cluster, _ = simulate(dag, one_slot(), max_wall_time=0.1, duration=runtimes(dag).__getitem__, timeouts=True)
    assert rc == 1 and start_order(cluster) == ["big"] and cluster.killed == []
    assert read_result(dag).unfinished == ["a"]
    rc, cluster, _ = simulate(dag, one_slot(), max_wall_time=0.1, duration=runtimes(dag).__getitem__, timeouts=True)
    assert rc == 0 and start_order(cluster) == ["a"]
