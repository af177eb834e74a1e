"""A long-lived pilot run (``pilot run --inbox``) over simulated workers: what it does with DAGs fed at once."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from pilot.cli.run import parse_run_args
from pilot.contracts import inbox
from pilot.runtime import agent as agent_module
from pilot.runtime.agent import Agent
from pilot.runtime.protocol import RunTask, TaskResult
from pilot.runtime.simulate import SimCluster, SimHost

CHAIN = "TASK a /bin/true\nTASK b /bin/true\nEDGE a b\n"


def _feed(box: Path, names: list[str], text: str = "TASK t /bin/true\n", args: list[str] | None = None) -> None:
    """Feed a DAG of ``text`` per name, each in a directory of its own beside the inbox, with ``args``; a job
    stderr of its own (``<name>.block.err``) as the driver feeds one."""
    for name in names:
        dag = box.parent / name / f"{name}.dag"
        dag.parent.mkdir()
        dag.write_text(text)
        err = str(dag.parent / f"{name}.block.err")
        inbox.write_request(str(box), inbox.Request(name, str(dag), args or [], None, err))


class UntilAllEnded(Agent):
    """Stops itself once ``expected`` fed DAGs were taken and every run ended (its record closed)."""

    expected = 1

    def _close_ended(self):
        super()._close_ended()
        if self.taken == self.expected and not self.runs and not self._pending:
            inbox.write_stop(self.inbox)


def _agent(box: Path, transport, expected: int, cls: type[UntilAllEnded] = UntilAllEnded, late: bool = False):
    """A pilot run taking DAGs from ``box`` until ``expected`` ended (``late``: with its monitoring files, as
    fed, opened after its first tasks)."""
    from pilot.runtime import launch

    agent = cls(
        parse_run_args(["--inbox", str(box)]),
        transport,
        parse_run_args,
        make_events=(lambda o: launch._monitors(o, live=False, late=True)) if late else None,
    )
    agent.expected = expected
    return agent


@pytest.mark.parametrize("close_wait", [60.0, 0.0])
def test_a_run_that_ends_while_fed_dags_wait_is_closed_once_they_are_taken(tmp_path, monkeypatch, close_wait):
    """Closing a run (its summary, result and done file, their fsyncs) costs the DAGs fed with it their start:
    it waits until none waits to be taken, at most CLOSE_WAIT, and every run ends with its done file all the
    same."""
    monkeypatch.setattr(agent_module, "CLOSE_WAIT", close_wait)
    box = tmp_path / "inbox"
    box.mkdir()
    names = [f"c{i}" for i in range(6)]
    _feed(box, names)
    cluster = SimCluster([SimHost("h", cpus=1, slots=1)], duration=lambda name: 0.0)
    ended_while_waiting: list[int] = []
    handed: list[int] = []  # fed DAGs waiting to be taken, at each handing of ended runs to the closing thread

    class Watched(Agent):
        def _end(self, run):
            if self._pending:
                ended_while_waiting.append(len(self._pending))
            super()._end(run)

        def _close_ended(self):
            if self._ended:
                handed.append(len(self._pending))
            super()._close_ended()
            if self.taken == len(names) and not self.runs and not self._pending and not self._ended:
                inbox.write_stop(str(box))

    # The run's own clock is real time (its looks at the inbox come by it); its tasks end on the simulated one.
    agent = Watched(parse_run_args(["--inbox", str(box)]), cluster.transport, parse_run_args)
    assert agent.run() == 0
    assert ended_while_waiting, "no run ended while others waited to be taken: the case is not exercised"
    if close_wait:
        assert handed and all(waiting == 0 for waiting in handed)
    else:  # waited for no longer than that
        assert any(waiting > 0 for waiting in handed)
    for name in names:
        assert (box / "done" / f"{name}.done").read_text().strip() == "0"


def test_every_result_already_in_is_handled_before_the_next_dag_is_taken(tmp_path):
    """A result frees its worker for the next fed DAG's first task: those already in when a turn of the loop
    ends are all handled before the next take (one a turn would leave workers idle behind a stream of takes)."""
    box = tmp_path / "inbox"
    box.mkdir()
    names = [f"c{i}" for i in range(6)]
    _feed(box, names, "TASK a /bin/true\nTASK b /bin/true\n")  # two tasks each: both workers busy after each take
    cluster = SimCluster([SimHost("h", cpus=2, slots=2)], duration=lambda name: 0.0)
    transport = cluster.transport
    send = transport.send

    def send_and_end(dest, msg, ring=True):  # workers quicker than a take: the result is in at once
        send(dest, msg, ring)
        if isinstance(msg, RunTask):
            cluster._advance(None)

    transport.send = send_and_end
    waiting_at_take: list[int] = []

    class Watched(UntilAllEnded):
        def _take(self, arrival):
            waiting_at_take.append(sum(isinstance(m, TaskResult) for _, m in transport.inbox))
            super()._take(arrival)

    agent = _agent(box, transport, len(names), Watched)
    assert agent.run() == 0
    assert len(waiting_at_take) == len(names)
    assert waiting_at_take == [0] * len(names)
    for name in names:
        assert (box / "done" / f"{name}.done").read_text().strip() == "0"


def test_dags_fed_with_the_same_options_are_parsed_once_each_with_its_own_dag(tmp_path):
    """The clusters of a plan are fed with the same options: one parse serves them, each run its own DAG."""
    box = tmp_path / "inbox"
    box.mkdir()
    names = ["c0", "c1", "c2"]
    for k, name in enumerate(names):
        dag = box.parent / name / f"{name}.dag"
        dag.parent.mkdir()
        dag.write_text("TASK t /bin/true\n")
        args = ["--tries", "3"] if k < 2 else ["--tries", "2"]
        inbox.write_request(str(box), inbox.Request(name, str(dag), args))
    cluster = SimCluster([SimHost("h", cpus=1, slots=1)], duration=lambda name: 0.0)
    parsed: list[list[str]] = []
    opened: dict[str, tuple[str, int]] = {}

    def parse(argv):
        parsed.append(list(argv))
        return parse_run_args(argv)

    class Watched(Agent):
        def _take(self, arrival):
            super()._take(arrival)
            run = next((r for r in self.runs if r.id == arrival.req.id), None)
            if run is not None:
                opened[arrival.req.id] = (run.opts.dag, run.opts.tries)

        def _close_ended(self):
            super()._close_ended()
            if self.taken == len(names) and not self.runs and not self._pending:
                inbox.write_stop(str(box))

    agent = Watched(parse_run_args(["--inbox", str(box)]), cluster.transport, parse)
    assert agent.run() == 0
    assert len(parsed) == 2  # one per set of options
    for k, name in enumerate(names):
        assert opened[name] == (str(box.parent / name / f"{name}.dag"), 3 if k < 2 else 2)


def test_dags_opened_ahead_and_never_taken_are_let_go_unstarted_when_the_run_stops(tmp_path):
    """The DAGs read with the first are opened ahead (their locks taken, their files open); a stop before
    their take lets them go as they are: no result, the lock free, answered unstarted (1) to resume elsewhere."""
    from pilot.contracts.daglock import running
    from pilot.contracts.result import result_path

    box = tmp_path / "inbox"
    box.mkdir()
    names = ["c0", "c1", "c2"]
    _feed(box, names)
    cluster = SimCluster([SimHost("h", cpus=1, slots=1)], duration=lambda name: 0.0)
    opened_ahead: list[bool] = []

    class Watched(Agent):
        def _take(self, arrival):
            super()._take(arrival)
            if self.taken == 1:  # the others were read with it and are being opened; then a stop comes
                for waiting in self._pending:
                    waiting.opening.result()
                    opened_ahead.append(running(waiting.run.opts.dag).pid == os.getpid())  # its lock is ours
                inbox.write_stop(str(box))
                self._inbox_mtime = -2
                self._look()

    agent = Watched(parse_run_args(["--inbox", str(box)]), cluster.transport, parse_run_args)
    assert agent.run() == 0
    assert opened_ahead == [True, True]
    for name in names[1:]:
        dag = str(box.parent / name / f"{name}.dag")
        assert (box / "done" / f"{name}.done").read_text().strip() == "1"
        assert running(dag) is None
        assert not os.path.exists(result_path(dag))
    assert (box / "done" / "c0.done").exists()


def _late_files(where: Path, name: str) -> list[Path]:
    """What a fed run only writes: its jobstate.log, job stderr, -o/-e and resource log."""
    return [
        where / "jobstate.log",
        where / f"{name}.block.err",
        where / "o.txt",
        where / "e.txt",
        where / f"{name}.dag.resource",
    ]


def test_each_fed_dags_first_task_waits_for_no_file_it_only_writes(tmp_path, monkeypatch):
    """Of DAGs fed at once, each one's first task waits for its lock, DAG and rescue log only: the files it only
    writes are opened after (creating a file costs milliseconds on a slow file system, and each DAG of a fan
    would wait for the creations of all before it), and end with every line written before, in order."""
    from pilot.runtime.dagrun import DagRun

    box = tmp_path / "inbox"
    box.mkdir()
    names = [f"c{i}" for i in range(4)]
    _feed(box, names, CHAIN, ["--jobstate-log", "-o", "o.txt", "-e", "e.txt"])
    gate = threading.Event()
    later = DagRun.open_later

    def held(run):  # the later files of every run wait until each run's first task has started
        assert gate.wait(30)
        later(run)

    monkeypatch.setattr(DagRun, "open_later", held)
    cluster = SimCluster([SimHost("h", cpus=1, slots=1)], duration=lambda name: 0.0)
    transport = cluster.transport
    send = transport.send
    existing_at_first_task: dict[str, list[str]] = {}

    def watched_send(dest, msg, ring=True):
        if isinstance(msg, RunTask) and msg.name == "a":
            where = Path(msg.dag).parent
            existing_at_first_task[where.name] = [p.name for p in _late_files(where, where.name) if p.exists()]
            if len(existing_at_first_task) == len(names):
                gate.set()
        send(dest, msg, ring)

    transport.send = watched_send

    agent = _agent(box, transport, len(names), late=True)
    assert agent.run() == 0
    assert existing_at_first_task == {name: [] for name in names}
    for name in names:
        assert (box / "done" / f"{name}.done").read_text().strip() == "0"
        where = box.parent / name
        assert all(p.exists() for p in _late_files(where, name))
        lines = (where / "jobstate.log").read_text().splitlines()
        events = [" ".join(line.split()[1:3]) for line in lines]
        assert events[0] == "INTERNAL ***" and events[-1] == "INTERNAL ***"
        assert events[1:-1] == [
            "a SUBMIT",
            "a EXECUTE",
            "a JOB_TERMINATED",
            "a JOB_SUCCESS",
            "b SUBMIT",
            "b EXECUTE",
            "b JOB_TERMINATED",
            "b JOB_SUCCESS",
        ]
        stamps = [float(line.split()[0]) for line in lines]
        assert stamps == sorted(stamps)


def test_a_fed_dag_whose_task_stdout_cannot_be_created_is_refused_before_its_tasks(tmp_path, caplog):
    """-o in a directory that does not exist: one line naming it, exit status 2, no task run, as for a cluster's
    own run (the check costs no file creation)."""
    box = tmp_path / "inbox"
    box.mkdir()
    dag = tmp_path / "c0" / "c0.dag"
    dag.parent.mkdir()
    dag.write_text("TASK a /bin/true\n")
    inbox.write_request(str(box), inbox.Request("c0", str(dag), ["-o", "nowhere/o.txt"]))
    cluster = SimCluster([SimHost("h", cpus=1, slots=1)], duration=lambda name: 0.0)
    started: list[str] = []
    send = cluster.transport.send

    def watched_send(dest, msg, ring=True):
        if isinstance(msg, RunTask):
            started.append(msg.name)
        send(dest, msg, ring)

    cluster.transport.send = watched_send

    class Watched(Agent):
        def _take(self, arrival):
            super()._take(arrival)
            inbox.write_stop(str(box))

    assert Watched(parse_run_args(["--inbox", str(box)]), cluster.transport, parse_run_args).run() == 0
    assert started == []
    assert (box / "done" / "c0.done").read_text().strip() == "2"
    assert '"exit": 2' in (tmp_path / "c0" / "c0.dag.result").read_text()
    assert "nowhere/o.txt: cannot open the task stdout file (-o): its directory does not exist" in caplog.text


def test_a_fed_dags_file_that_cannot_be_opened_after_its_first_task_is_said_incomplete(tmp_path, caplog):
    """Its jobstate.log cannot be created (a directory of that name): its tasks go on and all end, and the run
    ends saying which file is incomplete (result "error"), as for a monitoring file whose writes fail."""

    box = tmp_path / "inbox"
    box.mkdir()
    dag = tmp_path / "c0" / "c0.dag"
    dag.parent.mkdir()
    dag.write_text("TASK a /bin/true\nTASK b /bin/true\n")
    (dag.parent / "jobstate.log").mkdir()
    inbox.write_request(str(box), inbox.Request("c0", str(dag), ["--jobstate-log"]))
    cluster = SimCluster([SimHost("h", cpus=1, slots=1)], duration=lambda name: 0.0)

    agent = _agent(box, cluster.transport, 1, late=True)
    assert agent.run() == 0
    result = (tmp_path / "c0" / "c0.dag.result").read_text()
    assert '"reason": "error"' in result and '"done": 2' in result
    assert (box / "done" / "c0.done").read_text().strip() == "1"
    assert "jobstate.log" in caplog.text


def test_a_dag_holding_hosts_whole_starts_nothing_beside_a_task_of_another_dag_already_there(tmp_path, caplog):
    """A DAG of one node fed first has a task running on a host that a DAG fed next holds whole: the holder's
    tasks start on its other host at once, and on that one only once the other DAG's task ended (never side by
    side on a node it holds whole)."""
    box = tmp_path / "inbox"
    box.mkdir()
    for name, text, hosts in (
        ("narrow", "TASK n /bin/true\n", None),
        ("wide", "".join(f"TASK w{i} /bin/true\n" for i in range(8)), ["h1", "h2"]),
    ):
        dag = tmp_path / name / f"{name}.dag"
        dag.parent.mkdir()
        dag.write_text(text)
        inbox.write_request(str(box), inbox.Request(name, str(dag), [], hosts=hosts))
    cluster = SimCluster(
        [SimHost("h1", cpus=2, slots=2), SimHost("h2", cpus=2, slots=2)],
        duration=lambda name: 2.0 if name == "n" else 1.0,
    )
    transport = cluster.transport
    taken_beside: list[list[str]] = []

    class Watched(UntilAllEnded):
        def _take(self, arrival):
            if arrival.req.id == "wide":  # what runs as it is taken
                taken_beside.append([task.name for _, task, _, _ in self.running.values()])
            super()._take(arrival)

    agent = _agent(box, transport, 2, Watched)
    # Simulated time stands still until both are taken: the narrow DAG's task still runs when the wide one is.
    transport.on_idle = lambda timeout: cluster._advance(timeout) if agent.taken >= 2 else None
    caplog.set_level("INFO", logger="pilot.master")
    assert agent.run() == 0
    assert taken_beside == [["n"]]
    host = {r.rank: r.host.name for r in cluster.ranks}
    starts = {name: (at, host[rank]) for at, name, rank in cluster.started}
    n_at, n_host = starts["n"]
    n_end = n_at + 2.0
    wide = [starts[f"w{i}"] for i in range(8)]
    assert all(at >= n_end for at, where in wide if where == n_host)  # none beside n
    assert any(where == n_host for _, where in wide)  # and the host is its once n ended
    assert any(at < n_end for at, where in wide if where != n_host)  # the other host at once
    assert f"it starts nothing on {n_host} until the other DAGs' task(s) there ended (1 on {n_host})" in caplog.text
    for name in ("narrow", "wide"):
        assert (box / "done" / f"{name}.done").read_text().strip() == "0"


@pytest.mark.parametrize("close_wait", [60.0, 0.0])
def test_the_files_fed_dags_only_write_are_opened_once_every_dag_fed_with_them_started(
    tmp_path, monkeypatch, close_wait
):
    """Opening the files a run only writes costs the first tasks of the DAGs fed with it interpreter time and
    disk: it waits until every DAG taken started a task and none waits to be taken, at most CLOSE_WAIT, and
    each file ends whole all the same."""
    from pilot.runtime.arrivals import Arrivals

    monkeypatch.setattr(agent_module, "CLOSE_WAIT", close_wait)
    box = tmp_path / "inbox"
    box.mkdir()
    names = [f"c{i}" for i in range(4)]
    _feed(box, names, CHAIN, ["--jobstate-log"])
    cluster = SimCluster([SimHost("h", cpus=1, slots=1)], duration=lambda name: 0.0)
    transport = cluster.transport
    send = transport.send
    started: set[str] = set()  # the DAGs whose first task was sent

    def watched_send(dest, msg, ring=True):
        if isinstance(msg, RunTask):
            started.add(msg.dag)
        send(dest, msg, ring)

    transport.send = watched_send
    started_at_opening: list[int] = []  # at each hand-over of a run's later files to the opening thread
    later = Arrivals.open_later

    def counted(self, run):
        started_at_opening.append(len(started))
        later(self, run)

    monkeypatch.setattr(Arrivals, "open_later", counted)

    agent = _agent(box, transport, len(names), late=True)
    assert agent.run() == 0
    assert started_at_opening  # (a run that ended before has its files opened by its close)
    if close_wait:
        assert all(n == len(names) for n in started_at_opening)
    else:  # held no longer than that
        assert started_at_opening[0] < len(names)
    for name in names:
        lines = (box.parent / name / "jobstate.log").read_text().splitlines()
        assert [" ".join(line.split()[1:3]) for line in lines][-2:] == ["b JOB_SUCCESS", "INTERNAL ***"]
