"""A long-lived pilot run (``pilot run --inbox``) over simulated workers: what it does with DAGs fed at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from pilot.cli.run import parse_run_args
from pilot.contracts import inbox
from pilot.runtime import agent as agent_module
from pilot.runtime.agent import Agent
from pilot.runtime.simulate import SimCluster, SimHost


def _feed(box: Path, names: list[str]) -> None:
    for name in names:
        dag = box.parent / name / f"{name}.dag"
        dag.parent.mkdir()
        dag.write_text("TASK t /bin/true\n")
        inbox.write_request(str(box), inbox.Request(name, str(dag), []))


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
