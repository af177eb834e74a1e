"""pegasus-statistics' summary.txt as pilot demo reads it."""

from __future__ import annotations

from pilot.submit.statistics import Counts, read_summary

# The table of a summary.txt that pegasus-statistics 5.1 wrote for a run (its legend cut short).
SUMMARY = """#
# Pegasus Workflow Management System - https://pegasus.isi.edu
#     * Total+Retries - total count of tasks/jobs/sub workflows executed
------------------------------------------------------------------------------
Type           Succeeded Failed  Incomplete  Total     Retries   Total+Retries
Tasks          12        0       0           12        0         12           
Jobs           11        1       0           12        2         14           
Sub-Workflows  0         0       0           0         0         0            
------------------------------------------------------------------------------

Workflow wall time                                       : 29.00 secs
"""


def test_the_tasks_and_jobs_rows(tmp_path):
    path = tmp_path / "summary.txt"
    path.write_text(SUMMARY)
    stats = read_summary(str(path))
    assert stats is not None
    assert stats.tasks == Counts(12, 0, 0, 12, 0) and stats.tasks.complete
    assert stats.jobs == Counts(11, 1, 0, 12, 2) and not stats.jobs.complete
    assert not Counts(0, 0, 0, 0, 0).complete  # nothing ran: not a success


def test_no_summary_or_rows_that_are_not_counts_are_no_statistics(tmp_path):
    assert read_summary(str(tmp_path / "missing.txt")) is None
    path = tmp_path / "summary.txt"
    path.write_text(SUMMARY.replace("Jobs           11", "Jobs           lots"))
    assert read_summary(str(path)) is None
    path.write_text("\n".join(line for line in SUMMARY.splitlines() if not line.startswith("Tasks")))
    assert read_summary(str(path)) is None
