"""The driver's state, kept in the submit directory so a killed ``pilot submit`` resumes.

``submit.state.json`` (``format`` 1) holds the run's id, the site files it
used, and per cluster: its state, site, counters, every batch job id it was
given, where that job's stdout/stderr go, and the scheduler's last word on it.
It is rewritten atomically (temp file, fsync, rename, directory fsync) at each change. Before a
batch submission the cluster is recorded as SUBMITTING with the unique job name
it is about to get, so a restart can find that job in the queue instead of
submitting it twice. A file of another format, or one that does not parse, is a
one-line error naming it.
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pilot.errors import ConfigError
from pilot.util.atomic import atomic_file

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
    queue: str = ""  # the scheduler's last QueueState value for the current job
    queue_reason: str = ""  # and its pending reason

    @property
    def job_id(self) -> str | None:
        return self.job_ids[-1] if self.job_ids else None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = self.state.value
        return data


_FIELDS = {f.name for f in fields(ClusterRecord)}


@dataclass
class SubmitState:
    path: str
    plan_id: str = ""
    sites: dict[str, dict[str, Any]] = field(default_factory=dict)  # site name -> {"file": path, "set": {key: value}}
    clusters: dict[str, ClusterRecord] = field(default_factory=dict)

    @classmethod
    def load(cls, submit_dir: str) -> "SubmitState | None":
        """The state of an earlier ``pilot submit`` here; None when there was none."""
        path = os.path.join(submit_dir, STATE_FILE)
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read(MAX_STATE_BYTES)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{path}: corrupt ({exc}); remove it to start the run over (rescue logs keep finished tasks)") from None
        version = raw.get("format") if isinstance(raw, dict) else None
        if version != STATE_FORMAT:
            raise ConfigError(f"{path}: state format {version!r}, this pilot reads format {STATE_FORMAT}; use the pilot "
                              f"that wrote it, or remove the file to start the run over (rescue logs keep finished tasks)")
        try:
            state = cls(path, plan_id=str(raw["plan_id"]), sites={str(k): {"file": str(v["file"]), "set": {str(a): str(b) for a, b in v.get("set", {}).items()}}
                                                                  for k, v in raw.get("sites", {}).items()})
            for item in raw["clusters"]:
                unknown = set(item) - _FIELDS
                if unknown:
                    raise ValueError(f"unknown field {sorted(unknown)[0]!r}")
                c = ClusterRecord(**{**item, "state": ClusterState(item["state"])})
                state.clusters[c.name] = c
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"{path}: corrupt ({type(exc).__name__}: {exc}); remove it to start the run over "
                              f"(rescue logs keep finished tasks)") from None
        return state

    def save(self) -> None:
        data = {"format": STATE_FORMAT, "plan_id": self.plan_id, "sites": self.sites,
                "clusters": [c.to_json() for c in self.clusters.values()]}
        with atomic_file(self.path) as fh:
            json.dump(data, fh, indent=1)

    def count(self, states: tuple[ClusterState, ...], site: str | None = None) -> int:
        return sum(1 for c in self.clusters.values() if c.state in states and (site is None or c.site == site))
