"""Between polls the driver learns from a pilot job's done files that a fed cluster ended, and releases its
children then; the queue is still asked once a poll."""

from __future__ import annotations

from concurrent.futures import Future

from pilot.contracts import inbox
from pilot.submit import blocks
from pilot.submit.driver import Driver
from pilot.submit.feed import DoneWatch
from pilot.submit.options import Options
from tests.unit.fake_queue import FakeClock, FakeQueue, make_plan
from tests.unit.test_submit_driver import site


def running_block(tmp_path, label="b", with_app=True) -> blocks.Block:
    block = blocks.Block(label, "s", 1, 600.0, 2, script_dir=str(tmp_path / label))
    block.agent = Future()  # its pilot run, still running
    if with_app:
        block.take("pilot:c1", (0,), 1)
    return block


def test_no_block_running_a_fed_cluster_means_the_driver_sleeps_its_poll(tmp_path):
    watch = DoneWatch(poll=2.0)
    assert watch.changed([], ["s"], 0.0) is None
    assert watch.changed([running_block(tmp_path, with_app=False)], ["s"], 0.0) is None


def test_a_done_file_wakes_the_driver_once_and_once_more_after_a_tick(tmp_path):
    block = running_block(tmp_path)
    watch = DoneWatch(poll=2.0)
    assert watch.changed([block], ["s"], 0.0) is True  # first look: nothing known yet, one pass reads it all
    assert watch.changed([block], ["s"], DoneWatch.RECHECK) is True
    assert watch.changed([block], ["s"], 0.1) is False
    inbox.write_done(block.inbox, "c1", 0)
    assert watch.changed([block], ["s"], 0.2) is True
    assert watch.changed([block], ["s"], 0.2 + DoneWatch.RECHECK / 2) is False
    # a second file in the directory's same time tick would not show: one more wake reads it
    assert watch.changed([block], ["s"], 0.2 + DoneWatch.RECHECK) is True
    assert watch.changed([block], ["s"], 0.3 + DoneWatch.RECHECK) is False
    inbox.write_done(block.inbox, "c2", 1)
    assert watch.changed([block], ["s"], 1.0) is True


def test_a_pass_woken_early_asks_the_queue_only_once_a_poll(tmp_path):
    block = running_block(tmp_path)
    watch = DoneWatch(poll=2.0)
    assert watch.may_ask("s", 10.0)  # a pass at a poll always asks
    watch.changed([block], ["s"], 10.5)  # woken early
    assert not watch.may_ask("s", 10.5)  # asked 0.5 s ago
    assert watch.may_ask("s", 10.6)  # the next pass is a poll's again
    inbox.write_done(block.inbox, "c1", 0)
    watch.changed([block], ["s"], 12.7)  # woken early, but a poll has passed since the last question
    assert watch.may_ask("s", 12.7)


class Ends(FakeQueue):
    """A backend that learns of an end between polls after ``after`` looks."""

    def __init__(self, clock, after: int | None) -> None:
        super().__init__(clock)
        self.after, self.looks = after, 0

    def ended(self):
        if self.after is None:
            return None
        self.looks += 1
        return self.looks > self.after


def waited(tmp_path, after: int | None) -> float:
    clock = FakeClock()
    driver = Driver.load(make_plan(tmp_path / "sub", {"a": []}), [site()], Ends(clock, after), Options(poll=2.0), clock)
    start = clock.monotonic()
    driver._wait()
    return clock.monotonic() - start


def test_the_driver_waits_its_poll_unless_the_backend_says_a_cluster_ended(tmp_path):
    assert waited(tmp_path / "none", None) == 2.0  # a batch queue: one sleep of the poll
    assert waited(tmp_path / "never", 10**6) == 2.0  # fed clusters, none ended: looks every few ms to the poll
    assert abs(waited(tmp_path / "third", 3) - 0.015) < 1e-9  # the third look's end ends the wait then
