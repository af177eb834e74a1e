"""``pilots.json``: every pilot job (block) a driver has in a queue, so that none is ever lost track of.

Parsl cannot take a running block over: a new executor starts blocks of its
own. So each block's batch job id is written here the moment it is submitted
(``save``), and a restarted driver, or ``pilot cancel``, ends the blocks an
earlier driver left (``end_recorded``) and waits until the queue no longer
has them: their clusters resume from their rescue logs only once nothing of
theirs runs.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pilot.contracts.queue import QueueState, QueueStatus
from pilot.errors import ConfigError, SubmitError
from pilot.sites import SiteConfig
from pilot.submit.backend import Backend, JobRef
from pilot.submit.blocks import Block
from pilot.util.atomic import write_atomic
from pilot.util.boundedload import load_json
from pilot.util.procs import cmdline

log = logging.getLogger("pilot.submit")
STATE = "pilots.json"
MAX_STATE_BYTES = 1 << 20
GONE_WAIT = 60.0  # seconds a restart waits for ended blocks to leave the queue before it goes on


def save(submit_dir: str, blocks: Iterable[Block]) -> None:
    write_atomic(
        os.path.join(submit_dir, STATE), json.dumps({"format": 1, "blocks": [b.record() for b in blocks]}) + "\n"
    )


def end_recorded(
    submit_dir: str, sites: Mapping[str, SiteConfig], batch: Backend, clock: Callable[[], float]
) -> list[str]:
    """End the blocks the record names (each site's scheduler cancels them, their interchanges are stopped),
    and wait until the queue no longer has them (the caller then records the blocks it has); the job ids ended."""
    path = os.path.join(submit_dir, STATE)
    if not os.path.exists(path):
        return []
    raw = load_json(path, MAX_STATE_BYTES, f"remove {path} once no pilot job of this run is in a queue")
    records = [r for r in (raw.get("blocks") or []) if isinstance(r, dict) and r.get("job_id")]
    ended: list[str] = []
    for r in records:
        site = sites.get(str(r.get("site")))
        if site is None:
            raise ConfigError(
                f"{path}: pilot job {r['job_id']} runs on site {r.get('site')!r}: pass that site to "
                "--site too, so it can be ended"
            )
        pid = int(r.get("interchange_pid") or 0)
        if pid and b"interchange" in b" ".join(cmdline(pid) or []):
            os.kill(pid, signal.SIGTERM)
        ended += batch.cancel(
            site, [JobRef(str(r["job_id"]), str(r.get("script_dir") or ""), str(r.get("job_name") or ""))]
        )
    if ended:
        log.info(
            "pilot job(s) %s of an earlier driver ended (a new driver cannot take them over); their clusters "
            "resume from their rescue logs",
            ", ".join(ended),
        )
    _wait_gone(records, sites, batch, clock)
    return ended


def _wait_gone(
    records: list[dict[str, Any]], sites: Mapping[str, SiteConfig], batch: Backend, clock: Callable[[], float]
) -> None:
    deadline = clock() + GONE_WAIT
    while records and clock() < deadline:
        left = []
        for site_name in {str(r["site"]) for r in records}:
            ids = [str(r["job_id"]) for r in records if str(r["site"]) == site_name]
            try:
                states = batch.query(sites[site_name], ids)
            except SubmitError:
                states = {}
            left += [
                r
                for r in records
                if str(r["job_id"]) in ids
                and states.get(str(r["job_id"]), QueueStatus(QueueState.FINISHED)).state is not QueueState.FINISHED
            ]
        if not left:
            return
        records = left
        time.sleep(1.0)
    if records:
        log.warning("pilot job(s) %s still in the queue after cancelling them", ", ".join(r["job_id"] for r in records))
