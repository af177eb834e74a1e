"""``submit.state.json``: the driver's state, kept in the submit directory so a killed ``pilot submit`` resumes.

Written and read by ``pilot submit`` (pilot.submit.driver); read also by
``pilot report`` for each cluster's batch jobs. It (``format`` 1) holds the
run's id, the site files it used, and per cluster: its state, site, counters,
every batch job id it was given, where that job's stdout/stderr go, and the
scheduler's last word on it. The driver rewrites it atomically (temp file,
fsync, rename, directory fsync) before and after every batch submission, and at
the end of each pass of its loop that changed anything else. Before a batch
submission the cluster is recorded as SUBMITTING with the unique job name it is
about to get, so a restart can find that job in the queue instead of submitting
it twice. A file of another format, or one that does not parse, is a one-line
error naming it.
"""

from __future__ import annotations

import enum
import json
import os
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pilot.contracts.queue import QueueState
from pilot.errors import ConfigError, shown
from pilot.util.atomic import atomic_file
from pilot.util.boundedload import load_json

STATE_FILE = "submit.state.json"
STATE_FORMAT = 1
MAX_STATE_BYTES = 1 << 30


class ClusterState(str, enum.Enum):
    """Where the driver stands with one cluster."""

    WAITING = "waiting"  # not in a queue: parents not done, no room yet, or due for another attempt
    SUBMITTING = "submitting"  # a submission may be under way: look the job up by name before submitting again
    QUEUED = "queued"  # has a batch job (pending, held or running: see ``queue``)
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE = (ClusterState.SUBMITTING, ClusterState.QUEUED)


def state_path(submit_dir: str) -> str:
    return os.path.join(submit_dir, STATE_FILE)


@dataclass
class ClusterRecord:
    name: str
    state: ClusterState = ClusterState.WAITING
    site: str | None = None
    attempts: int = 0  # batch jobs submitted, all kinds (names the next job uniquely)
    retries: int = 0  # attempts spent on task failures (--retry / dagman.retry)
    resubmits: int = 0  # attempts after wall time, preemption, node failure or a vanished job (--max-resubmits)
    job_ids: list[str] = field(default_factory=list)
    job_name: str | None = None
    job_stdout: str | None = None
    job_stderr: str | None = None
    submit_errors: int = 0
    reason: str = ""  # why it is failed, cancelled or waiting for another attempt
    queue: QueueState | None = None  # the scheduler's last word on the current job (None: none yet; "" on disk)
    queue_reason: str = ""  # and its pending reason
    withdrawn_from: str | None = None  # the site its job was withdrawn from, pending too long (site key pending_limit)

    @property
    def job_id(self) -> str | None:
        return self.job_ids[-1] if self.job_ids else None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = self.state.value
        data["queue"] = "" if self.queue is None else self.queue.value
        return data


_FIELDS = {f.name for f in fields(ClusterRecord)}
_COUNTS = ("attempts", "retries", "resubmits", "submit_errors")
_TEXTS = ("name", "reason", "queue", "queue_reason")
_OPTIONAL_TEXTS = ("site", "job_name", "job_stdout", "job_stderr", "withdrawn_from")
_PLAN_ID = re.compile(r"[A-Za-z0-9_.-]{0,64}\Z")  # it names every batch job of the run
START_OVER = "remove it to start the run over (rescue logs keep finished tasks)"


def _why(exc: Exception) -> str:
    return f"no {exc.args[0]!r}" if isinstance(exc, KeyError) else str(exc)


def _plan_id(value: Any) -> str:
    if not isinstance(value, str) or not _PLAN_ID.match(value):
        raise ValueError(f"plan_id: {shown(value)} is not a plan id (letters, digits, '_', '.', '-')")
    return value


def _sites(value: Any) -> dict[str, dict[str, Any]]:
    """site name -> {"file": path, "set": {key: value}}, each a string."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"sites: must be a mapping, not {shown(value)}")
    out: dict[str, dict[str, Any]] = {}
    for name, v in value.items():
        if (
            not isinstance(v, dict)
            or not isinstance(v.get("file"), str)
            or not isinstance(v.get("set", {}), dict)
            or not all(isinstance(x, str) for x in v.get("set", {}).values())
        ):
            raise TypeError(f"sites.{name}: must be {{file: PATH, set: {{KEY: VALUE}}}}, not {shown(v)}")
        out[name] = {"file": v["file"], "set": dict(v.get("set", {}))}
    return out


def _queue_state(value: str | None) -> QueueState | None:
    """The scheduler's last word as written ("": none yet)."""
    if not value:
        return None
    try:
        return QueueState(value)
    except ValueError:
        raise ValueError(
            f"queue: {shown(value)} is not a queue state ({', '.join(s.value for s in QueueState)})"
        ) from None


def _record(item: Any) -> ClusterRecord:
    """One cluster's record, every field of its type; a cluster queued without a job id is in doubt."""
    if not isinstance(item, dict):
        raise TypeError(f"must be a mapping, not {shown(item)}")
    unknown = set(item) - _FIELDS
    if unknown:
        raise ValueError(f"unknown field {sorted(unknown)[0]!r}")
    for key in _COUNTS:
        if key in item and (type(item[key]) is not int or not 0 <= item[key] < 1 << 31):
            raise TypeError(f"{key}: {shown(item[key])} is not a count")
    for key in (*_TEXTS, *_OPTIONAL_TEXTS):
        if (
            (key in item or key == "name")
            and not isinstance(item[key], str)
            and not (key in _OPTIONAL_TEXTS and item[key] is None)
        ):
            raise TypeError(f"{key}: {shown(item[key])} is not text")
    ids = item.get("job_ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
        raise TypeError(f"job_ids: {shown(ids)} is not a list of job ids")
    c = ClusterRecord(
        **{
            **item,
            "job_ids": list(ids),
            "state": ClusterState(item.get("state")),
            "queue": _queue_state(item.get("queue")),
        }
    )
    if c.state in ACTIVE and not c.site:
        raise ValueError(f"cluster {c.name} is {c.state.value} on no site")
    if c.state is ClusterState.QUEUED and not c.job_ids:
        c.state = ClusterState.SUBMITTING  # in doubt: the driver looks the job up by its name before submitting again
    if c.state is ClusterState.SUBMITTING and not c.job_name:
        raise ValueError(f"cluster {c.name} is in a queue with neither a job id nor a job name to look it up by")
    return c


@dataclass
class SubmitState:
    path: str
    plan_id: str = ""
    sites: dict[str, dict[str, Any]] = field(default_factory=dict)  # site name -> {"file": path, "set": {key: value}}
    clusters: dict[str, ClusterRecord] = field(default_factory=dict)

    @classmethod
    def load(cls, submit_dir: str) -> SubmitState | None:
        """The state of an earlier ``pilot submit`` here; None when there was none."""
        path = state_path(submit_dir)
        try:
            raw = load_json(path, MAX_STATE_BYTES, START_OVER)
        except FileNotFoundError:
            return None
        version = raw.get("format") if isinstance(raw, dict) else None
        if version != STATE_FORMAT:
            raise ConfigError(
                f"{path}: state format {shown(version)}, this pilot reads format {STATE_FORMAT}; use the "
                f"pilot that wrote it, or remove the file to start the run over (rescue logs keep finished tasks)"
            )
        try:
            state = cls(path, plan_id=_plan_id(raw.get("plan_id")), sites=_sites(raw.get("sites")))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{path}: {exc}; {START_OVER}") from None
        clusters = raw.get("clusters")
        if not isinstance(clusters, list):
            raise ConfigError(f"{path}: clusters: must be a list, not {shown(clusters)}; {START_OVER}")
        for n, item in enumerate(clusters):
            try:
                c = _record(item)
            except (KeyError, TypeError, ValueError) as exc:
                raise ConfigError(f"{path}: clusters[{n}]: {_why(exc)}; {START_OVER}") from None
            state.clusters[c.name] = c
        return state

    def save(self) -> None:
        data = {
            "format": STATE_FORMAT,
            "plan_id": self.plan_id,
            "sites": self.sites,
            "clusters": [c.to_json() for c in self.clusters.values()],
        }
        with atomic_file(self.path) as fh:
            json.dump(data, fh, indent=1)

    def count(self, states: tuple[ClusterState, ...], site: str | None = None) -> int:
        return sum(1 for c in self.clusters.values() if c.state in states and (site is None or c.site == site))
