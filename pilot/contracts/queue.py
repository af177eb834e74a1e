"""What a scheduler says about one of our batch jobs: the contract between schedulers and the driver.

Each scheduler plug-in answers ``query(site, job_ids)`` with a ``QueueStatus``
per job id it was asked about. The driver never parses scheduler output
itself: it only reads these values, so a new scheduler needs no driver change.
It fails a job that ``never_starts`` and says what a reason means in its log.
It keeps each cluster's last ``QueueState`` in ``submit.state.json``
(pilot.contracts.submitstate), so the states' values are part of that file's
format too: they live here, below both the plug-ins and the driver.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class QueueState(enum.Enum):
    """Where a batch job stands in its scheduler's queue."""

    PENDING = "pending"  # waiting to start; ``reason`` says why (Slurm's %r, PBS's comment)
    RUNNING = "running"
    HELD = "held"  # held by the user or an administrator: waits until released
    FINISHED = "finished"  # ended or left the queue; the pilot's result file says how it went
    UNKNOWN = "unknown"  # the scheduler reported a state this plug-in does not know


@dataclass(frozen=True)
class QueueStatus:
    state: QueueState
    reason: str = ""  # the scheduler's own word for why the job pends or ended, e.g. "Priority"
    never_starts: bool = False  # pending for a reason that waiting cannot cure (e.g. PartitionConfig)
    # What ``reason`` means, from the plug-in's ``pending_reasons`` ("" when it does not list it). It follows
    # from ``reason``, so two statuses of the same state and reason are equal whatever their meaning says.
    meaning: str = field(default="", compare=False)
    # Seconds the batch job the cluster waits for has pended, where that job is not the cluster's own (a pilot
    # job it is to be fed to): the driver holds it to the site's pending_limit as it holds a job of its own.
    pending_for: float | None = field(default=None, compare=False)

    @property
    def explained(self) -> str:
        """The reason and what it means, for people: "PartitionConfig: the partition cannot hold the request"."""
        return f"{self.reason}: {self.meaning}" if self.reason and self.meaning else self.reason
