"""The driver's state, kept in the submit directory so a killed ``pilot submit`` resumes.

``submit.state.json`` holds, per cluster: its state, site, attempts and every
batch job id it was given. It is rewritten atomically (temp file, fsync,
rename) at each change. Before a batch submission the cluster is recorded as
SUBMITTING with the unique job name it is about to get, so a restart can find
that job in the queue instead of submitting it twice.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

STATE_FILE = "submit.state.json"

WAITING = "waiting"  # parents not done yet
SUBMITTING = "submitting"  # a submission may be under way: look the job up by name on restart
QUEUED = "queued"  # has a batch job (pending or running)
DONE = "done"
FAILED = "failed"
CANCELLED = "cancelled"
ACTIVE = (SUBMITTING, QUEUED)
FINAL = (DONE, FAILED, CANCELLED)


@dataclass
class ClusterState:
    name: str
    state: str = WAITING
    site: str | None = None
    attempts: int = 0
    job_ids: list[str] = field(default_factory=list)
    job_name: str | None = None
    submit_errors: int = 0
    reason: str = ""

    @property
    def job_id(self) -> str | None:
        return self.job_ids[-1] if self.job_ids else None


@dataclass
class SubmitState:
    path: str
    clusters: dict[str, ClusterState] = field(default_factory=dict)
    plan_id: str = ""

    @classmethod
    def load(cls, submit_dir: str) -> "SubmitState | None":
        path = os.path.join(submit_dir, STATE_FILE)
        try:
            with open(path, encoding="utf-8") as fh:
                raw = json.load(fh)
        except FileNotFoundError:
            return None
        state = cls(path, plan_id=raw.get("plan_id", ""))
        for item in raw.get("clusters", []):
            c = ClusterState(**item)
            state.clusters[c.name] = c
        return state

    def save(self) -> None:
        data = {"plan_id": self.plan_id, "clusters": [asdict(c) for c in self.clusters.values()]}
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def count(self, state: str | tuple[str, ...], site: str | None = None) -> int:
        states = (state,) if isinstance(state, str) else state
        return sum(1 for c in self.clusters.values() if c.state in states and (site is None or c.site == site))
