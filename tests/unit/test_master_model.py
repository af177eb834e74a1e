"""The real master and engine against a reference model, over every message interleaving Hypothesis can draw.

A state machine builds a random DAG (1-60 tasks, random edges, priorities,
CPUs, memory, per-task tries), a random script of exit codes and durations,
`-t`, `-m` and 1-4 workers, then runs the real ``Master`` over the in-process
transport, again and again: to the end, or killed part way as SIGKILL would
(the rescue log as it stood at that moment is all that survives) and run
again. Simulated workers decide what they may run with the real worker's
``WorkQueue``, and every message travels: Hypothesis picks, whenever the
master waits, whether a message reaches a worker, a worker's message reaches
the master, or a running task ends next.

Each run is compared with a model that knows only the DAG semantics: a task
runs once its parents are done, at most its tries, never again once recorded
DONE; a run without -m ends with exactly the tasks whose parents succeeded
and whose scripted exit succeeds within the tries, and its summary counts and
exit status follow from that. With -m the set run depends on timing, so the
model checks what must hold whatever the timing.
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from pilot.contracts.rescue import read_rescue
from pilot.runtime.master import Master
from pilot.runtime.options import RunOptions
from pilot.runtime.simulate import SimCluster, SimHost

SUMMARY = re.compile(r"\[cluster-summary stat=\"(\w+)\", tasks=(\d+), submitted=(\d+), succeeded=(\d+), failed=(\d+),")
DURATIONS = (0.001, 0.003, 0.05, 0.4, 2.0)  # short ones make the master send work ahead; long ones do not


class Killed(BaseException):
    """The run is cut off here, as by SIGKILL (BaseException: nothing in the master may swallow it)."""


@dataclass(frozen=True)
class Spec:
    """One task of the drawn DAG."""

    name: str
    parents: tuple[str, ...]
    fails: int  # its first ``fails`` attempts of each run fail (99: every one)
    code: int  # the exit code of a failing attempt (negative: killed by that signal)
    tries: int | None  # -t of its own, None: the run's
    priority: int
    cpus: int
    memory: int
    duration: float


@st.composite
def dags(draw) -> list[Spec]:
    n = draw(st.integers(1, 60))
    density = draw(st.sampled_from((0.0, 0.05, 0.15, 0.4)))
    specs = []
    for i in range(n):
        parents = tuple(f"t{j}" for j in range(i) if draw(st.floats(0, 1)) < density) if density else ()
        specs.append(
            Spec(
                f"t{i}",
                parents,
                fails=draw(st.sampled_from((0, 0, 0, 1, 2, 99))),
                code=draw(st.sampled_from((1, 3, 127, -9))),
                tries=draw(st.none() | st.integers(1, 3)),
                priority=draw(st.integers(-2, 2)),
                cpus=draw(st.sampled_from((1, 1, 1, 2))),
                memory=draw(st.sampled_from((0, 0, 100, 700))),
                duration=draw(st.sampled_from(DURATIONS)),
            )
        )
    return specs


def dag_text(specs: list[Spec]) -> str:
    lines = []
    for s in specs:
        opts = f" -p {s.priority} -c {s.cpus} -m {s.memory}" + (f" -t {s.tries}" if s.tries is not None else "")
        lines.append(f"TASK {s.name}{opts} /bin/true")
    lines += [f"EDGE {p} {s.name}" for s in specs for p in s.parents]
    return "\n".join(lines) + "\n"


class Recorder(logging.Handler):
    """Errors the master logs that the protocol says cannot happen."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.impossible: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "which it was not running" in text or "which it did not hold" in text or "unexpected" in text:
            self.impossible.append(text)


class MasterModel(RuleBasedStateMachine):
    """See the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="pilot-model-"))
        self.recorder = Recorder()
        logging.getLogger("pilot").addHandler(self.recorder)

    def teardown(self) -> None:
        logging.getLogger("pilot").removeHandler(self.recorder)
        shutil.rmtree(self.tmp, ignore_errors=True)
        gc.unfreeze()  # the master freezes its DAG out of collections; a test process runs thousands

    @initialize(
        specs=dags(), workers=st.integers(1, 4), tries=st.integers(1, 3), max_failures=st.sampled_from((0, 0, 1, 2))
    )
    def setup(self, specs: list[Spec], workers: int, tries: int, max_failures: int) -> None:
        self.specs = {s.name: s for s in specs}
        self.order = [s.name for s in specs]
        self.workers = workers
        self.tries = tries
        self.max_failures = max_failures
        self.dag = str(self.tmp / "model.dag")
        Path(self.dag).write_text(dag_text(specs))
        self.done: set[str] = set()  # what the rescue log holds: the model's view of the last run's end

    # -- the model ----------------------------------------------------------------------------------------------
    def tries_of(self, name: str) -> int:
        own = self.specs[name].tries
        return own if own is not None else self.tries

    def would_succeed(self) -> set[str]:
        """Tasks done at the end of a complete run from ``self.done`` (no -m: timing does not matter)."""
        ok = set(self.done)
        for name in self.order:  # parents come first: t<j> depends only on t<i>, i < j
            s = self.specs[name]
            if name not in ok and all(p in ok for p in s.parents) and s.fails < self.tries_of(name):
                ok.add(name)
        return ok

    def status(self, name: str, attempt: int) -> int:
        s = self.specs[name]
        return s.code if attempt <= s.fails else 0

    # -- one run of the real master ---------------------------------------------------------------------------
    def run_master(self, data, kill_after: int | None) -> None:
        hosts = [SimHost(f"h{i}", cpus=2, memory=1000, slots=1) for i in range(self.workers)]
        steps = [0]
        snapshot: list[bytes | None] = [None]
        rescue = Path(self.dag + ".rescue")

        def choose(n: int) -> int:
            steps[0] += 1
            if kill_after is not None and steps[0] == kill_after and snapshot[0] is None:
                snapshot[0] = rescue.read_bytes() if rescue.exists() else b""
                cluster.choose = lambda n: 0  # nothing after the kill is drawn: it does not survive anyway
                raise Killed
            return data.draw(st.integers(0, n - 1), label="next event")

        cluster = SimCluster(
            hosts,
            duration=lambda name: self.specs[name].duration,
            status=self.status,
            hold_on_failure=self.max_failures > 0,
            choose=choose,
        )
        ends: list[tuple[str, int, int]] = []  # (task, its exit status, how many starts there were when it ended)
        end_task = cluster._end_task

        def recording_end(r, reply):
            task = r.running[0]
            ends.append((task.name, self.status(task.name, task.attempt), len(cluster.started)))
            end_task(r, reply)

        cluster._end_task = recording_end  # type: ignore[method-assign]  # the test records each task's end
        opts = RunOptions(dag=self.dag, tries=self.tries, max_failures=self.max_failures, resource_log=False)
        out = io.TextIOWrapper(io.BytesIO(), write_through=True)  # with a buffer: task stdio is merged into it
        killed = False
        before = set(self.done)
        with contextlib.redirect_stdout(out):
            try:
                rc = Master(opts, cluster.transport, clock=cluster.now).run()
            except Killed:
                killed = True
        gc.unfreeze()
        assert not self.recorder.impossible, self.recorder.impossible
        self.check_order(cluster, ends, before)
        for host in hosts:
            cpus, memory, _ = cluster.peak.get(host.name, (0, 0, 0))
            assert cpus <= host.cpus and memory <= host.memory, (host, cluster.peak)
        succeeded = {name for name, status, _ in ends if status == 0}
        if killed:
            rescue.write_bytes(snapshot[0] or b"")  # SIGKILL: the rescue log as it stood
            after = read_rescue(str(rescue), self.order)
            assert before <= after <= before | succeeded, "the rescue log holds a task that did not succeed"
            self.done = after
            return
        after = read_rescue(str(rescue), self.order)
        assert before <= after == before | succeeded, "a task that succeeded is missing from the rescue log"
        attempts: dict[str, int] = {}
        for _, name, _ in cluster.started:
            attempts[name] = attempts.get(name, 0) + 1
        for name, count in attempts.items():
            assert name not in before, f"{name} ran again after it was recorded DONE"
            assert count <= self.tries_of(name), f"{name} ran {count} times, tries {self.tries_of(name)}"
        text = out.buffer.getvalue().decode()  # type: ignore[attr-defined]  # a BytesIO-backed stand-in for stdout
        summary = SUMMARY.search(text)
        assert summary is not None, text
        stat, tasks, submitted, n_ok, n_failed = summary.groups()
        assert int(tasks) == len(self.order) and int(submitted) == len(cluster.started)
        assert int(n_ok) == len(succeeded)
        # Failed for good: its tries spent, or (-m) the run stopped it, or stopped before its next try.
        unsucceeded = set(attempts) - succeeded
        spent = {name for name in unsucceeded if attempts[name] == self.tries_of(name)}
        if self.max_failures:
            assert len(spent) <= int(n_failed) <= len(unsucceeded)
        else:
            assert int(n_failed) == len(spent) == len(unsucceeded)
        all_done = after == set(self.order)
        assert (rc == 0) == all_done and (stat == "ok") == all_done and rc in (0, 1)
        if not self.max_failures:
            expected = self.would_succeed()
            assert after == expected, (sorted(after ^ expected), "model and master disagree on what succeeds")
            for name in expected - before:
                assert attempts.get(name) == self.specs[name].fails + 1, name  # it succeeds on its first good attempt
            for name in set(self.order) - expected:
                parents_ok = all(p in expected for p in self.specs[name].parents)
                assert attempts.get(name, 0) == (self.tries_of(name) if parents_ok else 0), name
        else:
            # Whatever the timing: at least -m permanent failures, or every task that could succeed did.
            assert int(n_failed) >= self.max_failures or after == self.would_succeed()
        self.done = after

    def check_order(self, cluster: SimCluster, ends: list[tuple[str, int, int]], before: set[str]) -> None:
        """Every start of a task came after each of its parents succeeded (in this run or an earlier one)."""
        ok_at: dict[str, int] = {}  # task -> how many starts there were when it succeeded
        for name, status, starts_then in ends:
            if status == 0:
                ok_at.setdefault(name, starts_then)
        for index, (_, name, _) in enumerate(cluster.started):
            for parent in self.specs[name].parents:
                if parent in before:
                    continue
                assert (
                    parent in ok_at and ok_at[parent] <= index
                ), f"{name} started before its parent {parent} succeeded"

    # -- rules ------------------------------------------------------------------------------------------------
    @rule(data=st.data())
    def run_to_the_end(self, data) -> None:
        self.run_master(data, None)

    @rule(data=st.data(), after=st.integers(1, 200))
    def kill_and_rerun(self, data, after: int) -> None:
        self.run_master(data, after)

    @invariant()
    def rescue_log_matches_model(self) -> None:
        if hasattr(self, "dag") and Path(self.dag + ".rescue").exists():
            assert read_rescue(self.dag + ".rescue", self.order) == self.done


# No example database: a test leaves nothing behind in the checkout.
SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), stateful_step_count=4, database=None)


def test_master_agrees_with_the_model():
    run_state_machine_as_test(MasterModel, settings=settings(max_examples=60, **SETTINGS))


@pytest.mark.slow
def test_master_agrees_with_the_model_at_length():
    run_state_machine_as_test(MasterModel, settings=settings(max_examples=500, **SETTINGS))


class _First:
    """Every event drawn is the first one offered."""

    def draw(self, strategy, label=None):
        return 0


def test_a_run_cut_off_while_a_failed_task_holds_its_worker_takes_back_its_queue_on_shutdown():
    """Found by the model: a run ends (here cut off) while a worker, holding after a failure under -m, has tasks
    sent ahead; its failed result comes after the Shutdown. The worker drops its queue on Shutdown and gives
    each task back: the master must not count it as gone on to the first of them (it then heard of a task given
    back that it did not think held)."""
    late = {"t11", "t12", "t13", "t14", "t15", "t16", "t17"}
    specs = [
        Spec(
            f"t{i}",
            (),
            fails=1 if i < 2 else 0,
            code=1,
            tries=2 if i == 1 else 1 if f"t{i}" in late else None,
            priority=1 if i in (1, 14, 15) else 0,
            cpus=1,
            memory=100 if i == 15 else 0,
            duration=0.001,
        )
        for i in range(18)
    ]
    state = MasterModel()
    try:
        state.setup(specs=specs, workers=2, tries=1, max_failures=2)
        state.kill_and_rerun(after=22, data=_First())
    finally:
        state.teardown()


class _Drawn:
    """The events drawn are these, then always the first one offered."""

    def __init__(self, events: list[int]) -> None:
        self.events = list(events)

    def draw(self, strategy, label=None):
        return self.events.pop(0) if self.events else 0


def test_a_failed_tasks_follow_ons_being_given_back_take_no_chain_behind_them():
    """Found by the model: t2 fails with t6 queued to follow it (to run only if t2 succeeds); the worker gives
    t6 back unasked, and the master, sending t2's retry, chained t8 behind t6 as if it would run. The worker
    gave t8 back too, the master counted t2's success as gone on to t8 (it did not think t8 given back), and the
    run waited for t8 for ever. Follow-ons of a failed task are being given back, not a queue to chain behind."""
    spec = dict(code=1, priority=0, cpus=1, memory=0, duration=0.001)
    specs = [
        Spec("t0", (), fails=2, tries=3, **spec),
        Spec("t1", (), fails=0, tries=1, **{**spec, "priority": 2}),
        Spec("t2", ("t0", "t1"), fails=1, tries=None, **spec),
        Spec("t4", ("t0", "t1"), fails=0, tries=None, **spec),
        Spec("t5", ("t1",), fails=0, tries=None, **{**spec, "cpus": 2}),
        Spec("t6", ("t1", "t2", "t5"), fails=0, tries=None, **spec),
        Spec("t8", ("t0", "t1", "t5", "t6"), fails=0, tries=None, **spec),
    ]
    state = MasterModel()
    try:
        state.setup(specs=specs, workers=2, tries=2, max_failures=0)
        state.run_to_the_end(data=_Drawn([1, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1]))
    finally:
        state.teardown()
