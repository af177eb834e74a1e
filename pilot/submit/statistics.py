"""pegasus-statistics on a submit directory: the task and job counts of a run as the stampede DB has them.

``pilot submit`` runs pegasus-monitord beside the driver (``pilot.submit.monitord``),
which fills the DB; pegasus-statistics reads it and writes
``statistics/summary.txt``, whose table has a row per kind (Tasks, Jobs,
Sub-Workflows) of counts: succeeded, failed, incomplete, total, retries,
total+retries.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import NamedTuple

from pilot.submit.monitord import pegasus_cli

SUMMARY = os.path.join("statistics", "summary.txt")
SUMMARY_LIMIT = 1 << 20  # bytes: the summary is a few kB; a bigger file is not pegasus-statistics'


class Counts(NamedTuple):
    """One row of the summary."""

    succeeded: int
    failed: int
    incomplete: int
    total: int
    retries: int

    @property
    def complete(self) -> bool:
        """Something ran, and all of it succeeded."""
        return self.total > 0 and self.succeeded == self.total


@dataclass(frozen=True)
class Statistics:
    tasks: Counts  # the workflow's own jobs (each a task of a cluster; a data job is none, as in Pegasus)
    jobs: Counts  # batch jobs as monitord counts them (clusters)


def read_summary(path: str) -> Statistics | None:
    """The Tasks and Jobs rows of a summary.txt; None where the file or either row is missing or not numbers."""
    rows: dict[str, Counts] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(SUMMARY_LIMIT)
    except OSError:
        return None
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 6 and words[0] in ("Tasks", "Jobs") and all(w.isdigit() for w in words[1:6]):
            rows[words[0]] = Counts(*(int(w) for w in words[1:6]))
    if set(rows) != {"Tasks", "Jobs"}:
        return None
    return Statistics(tasks=rows["Tasks"], jobs=rows["Jobs"])


def workflow_statistics(submit_dir: str) -> Statistics | None:
    """Run ``pegasus-statistics -s all`` on the submit directory and read its summary.

    None where pegasus-wms is not installed or the run left no statistics
    (monitord.out in the directory says why).
    """
    command = pegasus_cli("pegasus-statistics")
    if command is None:
        return None
    subprocess.run([*command, "-s", "all", submit_dir], cwd=submit_dir, capture_output=True)
    return read_summary(os.path.join(submit_dir, SUMMARY))
