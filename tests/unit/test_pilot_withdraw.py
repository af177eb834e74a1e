"""Backing out of a site in pilot-job mode: a cluster whose site's pilot job pends past the site's pending_limit
is withdrawn once, with one line saying why, and bound to another site of the run, where a pilot job takes it;
the pending pilot job is cancelled once no cluster waits for it; a restarted driver keeps the choice. The driver
and late binding are real; the block engine and the queue are the stand-ins of tests/unit/test_pilots.py."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pilot.contracts.queue import QueueState
from pilot.sites import load_site
from pilot.submit import blocks, pilots
from pilot.submit.driver import Driver
from pilot.submit.options import Options
from tests.unit.fake_queue import FakeClock, make_plan
from tests.unit.test_pilots import Engine, Queue


def two_sites(limit: int = 60):
    local = load_site("local", {"nodes": "4", "ranks_per_node": "2"})
    return [
        dataclasses.replace(local, name="a", pending_limit=limit, max_queued=10),
        dataclasses.replace(local, name="b", pending_limit=limit, max_queued=10),
    ]


@pytest.fixture
def run(tmp_path, monkeypatch):
    """A driver over a plan of one cluster on sites a and b, in pilot-job mode; ``starts``: the sites whose
    pilot jobs start (the others pend for ever)."""
    clock = FakeClock()
    engine = Engine(clock.monotonic)
    monkeypatch.setattr(blocks, "start_block", engine.start_block)
    monkeypatch.setattr(blocks, "end_block", engine.end_block)
    monkeypatch.setattr(blocks, "launch_agent", engine.launch_agent)
    starts: set[str] = set()
    monkeypatch.setattr(blocks, "connected", lambda block: block.site in starts)
    sub = make_plan(tmp_path / "sub", {"c": []})
    sites = two_sites()
    opts = Options(poll=1.0, pilots=1, pilot_nodes=1)

    def driver() -> Driver:
        d = Driver.load(sub, sites, Queue(), opts, clock)
        d.backend = pilots.PilotBackend(sub, sites, list(d.specs.values()), opts, Queue(), clock=clock.monotonic)
        return d

    return driver, clock, engine, starts, Path(sub)


def withdrawals(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "withdrawn" in r.getMessage()]


def test_a_cluster_whose_pilot_job_pends_past_the_limit_goes_once_to_another_site_and_stays_there(run, caplog):
    new_driver, clock, engine, starts, sub = run
    starts.add("b")
    driver = new_driver()
    driver.recover()
    with caplog.at_level("INFO", logger="pilot.submit"):
        driver.step()  # released to a, where its pilot job is submitted at the next poll
        driver.step()
        assert driver.state.clusters["c"].site == "a" and [b.site for b in engine.started] == ["a"]
        clock.sleep(59)
        driver.step()
        assert withdrawals(caplog) == [] and engine.ended == []  # under the limit
        clock.sleep(2)
        driver.step()  # withdrawn from a, submitted to b
        driver.step()  # b's pilot job submitted
        driver.step()  # it runs: the cluster is fed to it
    said = withdrawals(caplog)
    assert (
        len(said) == 1
        and "cluster c: the pilot job it waits for pending on a for 61 s (its pending_limit 60 s): "
        "withdrawn and bound to b"
        in said[0]
    )
    assert engine.ended == ["100"]  # a's pilot job, cancelled through its provider
    assert any(
        "pilot job 100 pending for 61 s (its pending_limit 60 s) and no cluster waits" in r.getMessage()
        for r in caplog.records
    )
    c = driver.state.clusters["c"]
    assert (c.site, c.withdrawn_from, c.state.value) == ("b", "a", "queued")
    fed_to = engine.started[1]
    assert fed_to.site == "b" and len(list(Path(fed_to.inbox).glob("*.request"))) == 1
    assert [r["job_id"] for r in json.loads((sub / "pilots.json").read_text())["blocks"]] == ["101"]
    saved = {r["name"]: r for r in json.loads((sub / "submit.state.json").read_text())["clusters"]}
    assert (saved["c"]["site"], saved["c"]["withdrawn_from"]) == ("b", "a")
    restarted = new_driver()  # a new driver keeps the choice: the cluster stays bound to b
    restarted.recover()
    assert (restarted.state.clusters["c"].site, restarted.state.clusters["c"].withdrawn_from) == ("b", "a")


def test_withdrawn_once_it_stays_where_it_went_even_when_that_sites_pilot_job_pends_too(run, caplog):
    new_driver, clock, engine, _, _ = run  # no site's pilot jobs start
    driver = new_driver()
    driver.recover()
    with caplog.at_level("WARNING", logger="pilot.submit"):
        driver.step()
        driver.step()
        clock.sleep(61)
        driver.step()
        driver.step()  # b's pilot job submitted
        for _ in range(3):
            clock.sleep(1000)
            driver.step()
    assert len(withdrawals(caplog)) == 1 and engine.ended == ["100"]  # b's pilot job stays for the cluster
    c = driver.state.clusters["c"]
    assert (c.site, c.withdrawn_from, c.queue) == ("b", "a", QueueState.PENDING)


def test_a_pilot_job_that_starts_before_the_limit_keeps_its_clusters_however_long_they_run(run, caplog):
    new_driver, clock, engine, starts, _ = run
    driver = new_driver()
    backend = driver.backend
    assert isinstance(backend, pilots.PilotBackend)
    driver.recover()
    driver.step()
    driver.step()  # a's pilot job submitted, pending
    job = next(iter(backend.launches))
    clock.sleep(50)
    assert backend.query(driver.site_by_name["a"], [job])[job].pending_for == 50
    starts.add("a")
    driver.step()  # it runs: the cluster is fed to it
    assert backend.query(driver.site_by_name["a"], [job])[job].pending_for is None
    with caplog.at_level("WARNING", logger="pilot.submit"):
        for _ in range(3):
            clock.sleep(1000)
            driver.step()
    assert withdrawals(caplog) == [] and engine.ended == [] and driver.state.clusters["c"].site == "a"
    assert backend.launches[job].fed
