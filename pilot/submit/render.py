"""Text for people: the status table, the pegasus-status total line, the failure report, live progress."""

from __future__ import annotations

import os
import shutil
import sys
from typing import TextIO

from pilot.contracts.jobstate import jobstate_path
from pilot.contracts.result import ResultError, read_result
from pilot.submit.views import ClusterView, Shown, Totals, Watcher, run_state, time_left, totals
from pilot.util.tables import table

MAX_FAILED_TASKS = 10  # per cluster in the report; the rest are counted


def _state_cell(v: ClusterView) -> str:
    if v.shown is Shown.QUEUED and v.detail:
        return f"queued ({v.detail})"
    if v.shown is Shown.HELD and v.detail:
        return f"held ({v.detail})"
    if v.shown is Shown.NOT_RUN:
        return f"not run ({v.detail})"
    return v.shown.value


def _note(v: ClusterView) -> str:
    if v.shown in (Shown.QUEUED, Shown.HELD, Shown.NOT_RUN):
        return ""
    return v.detail


def clustertable(views: list[ClusterView], limit: int | None = None) -> list[str]:
    rows = [("cluster", "state", "done/total", "job id", "attempts", "site", "note")]
    shown = views if limit is None else views[:limit]
    for v in shown:
        r = v.record
        rows.append(
            (
                v.spec.name,
                _state_cell(v),
                f"{v.done}/{v.spec.tasks}",
                r.job_id or "-",
                str(r.attempts),
                r.site or "-",
                _note(v),
            )
        )
    lines = table(rows)
    if limit is not None and len(views) > limit:
        lines.append(f"... and {len(views) - limit} more clusters")
    return lines


def total_lines(t: Totals, state: str) -> list[str]:
    """pegasus-status' summary: task counts by state, %DONE and the run's state."""
    return table(
        [
            ("UNREADY", "READY", "RUNNING", "DONE", "FAILED", "%DONE", "STATE"),
            (str(t.unready), str(t.ready), str(t.running), str(t.done), str(t.failed), f"{t.percent:.1f}", state),
        ]
    )


def status_text(views: list[ClusterView], driving: bool, failures: list[str] | None = None) -> str:
    """The cluster table, what failed (``failures``: failure_lines), then the totals as pegasus-status ends."""
    lines = clustertable(views)
    if failures:
        lines += ["", *failures]
    lines.append("")
    lines += total_lines(totals(views), run_state(views, driving))
    return "\n".join(lines)


def failure_lines(views: list[ClusterView], watcher: Watcher, submit_dir: str) -> list[str]:
    """One line per fact a user needs after a failed run: each failed task with its exit status and
    where its stderr is, the batch job's own stdout/stderr, and every cluster that did not run because of it.

    A task's stderr is its ``<task>.err.NNN`` with --per-task-stdio; otherwise the cluster's last
    job output: ``<cluster>.err.NNN`` (all its tasks' stderr) and ``<cluster>.out.NNN`` (the failed
    task's invocation record, with the tail of its stderr)."""
    out: list[str] = []

    def rel(path: str | None) -> str:
        return os.path.relpath(path, submit_dir) if path else "-"

    for v in views:
        name, r = v.spec.name, v.record
        if v.shown is Shown.FAILED:
            files = watcher.files(v.spec)
            failed = sorted(files.update().failed.items())
            out.append(f"{name}: failed: {v.detail}")
            job_out, job_err = files.job_output()
            crashed = _crashed(v.spec.dag)
            for task, status in failed[:MAX_FAILED_TASKS]:
                if task in crashed:  # its worker died with it, hence the SIGKILL status: the cause is the task
                    how = f"crashed its worker {crashed[task]} times: not started again (--max-crashes)"
                else:
                    how = f"was killed by signal {-status}" if status < 0 else f"failed with exit {status}"
                own = files.stderr_of(task)
                if own is None and job_err is not None:
                    where = f"stderr: {rel(job_err)}" + (f", invocation record in {rel(job_out)}" if job_out else "")
                else:
                    where = f"stderr: {rel(own)}"
                out.append(f"{name}: task {task} {how} ({where})")
            if len(failed) > MAX_FAILED_TASKS:
                out.append(
                    f"{name}: ... and {len(failed) - MAX_FAILED_TASKS} more failed tasks (see {rel(jobstate_path(v.spec.dir))})"
                )
            if v.spec.subworkflow is not None:  # its own failures are its nested run's to tell
                out.append(f"{name}: sub-workflow: see pilot status {rel(v.spec.subworkflow.submit_dir)}")
            if r.job_id and any(
                p and os.path.exists(p) for p in (r.job_stdout, r.job_stderr)
            ):  # a job that never ran has none
                out.append(
                    f"{name}: batch job {r.job_id} on {r.site}: stdout {rel(r.job_stdout)}, stderr {rel(r.job_stderr)}"
                )
        elif v.shown is Shown.NOT_RUN:
            out.append(f"{name}: not run ({v.detail})")
        elif v.shown is Shown.CANCELLED:
            out.append(f"{name}: cancelled ({v.detail})")
    return out


def _crashed(dag: str) -> dict[str, int]:
    """The cluster's tasks its last run stopped at --max-crashes (none when its result cannot say)."""
    try:
        result = read_result(dag)
    except ResultError:
        return {}
    return (result.crashed or {}) if result is not None else {}


def duration_text(seconds: float) -> str:
    """3h05m, 4m10s, 12s: as precise as an estimate deserves."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s // 60 % 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def progress_line(views: list[ClusterView]) -> str:
    """Tasks done of the total and, with runtimes in the plan, the estimated time left (``time_left``)."""
    t = totals(views)
    text = f"{t.done}/{t.total} tasks done"
    left = time_left(views) if run_state(views, True) == "Running" else None
    if left is not None and left >= 1:  # "about 0s left" says nothing
        text += f", about {duration_text(left)} left by the runtime estimates (queue wait not included)"
    return text


class LiveProgress:
    """On a terminal: the table of clusters that are not waiting or done, redrawn in place, the
    total line and the progress line. Elsewhere (a log file): both lines, whenever they change.

    The estimate of the time left moves only when tasks end (it is the plan's, scaled by the
    tasks not yet done), so a log file gets no line a second."""

    def __init__(self, watcher: Watcher, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.watcher = watcher
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._last = ""
        self._drawn = 0

    def show(self, records, driving: bool = True) -> None:
        views = self.watcher.views(records)
        total = total_lines(totals(views), run_state(views, driving))
        progress = progress_line(views)
        if not self.tty:
            text = total[1] + progress
            if text != self._last:
                pairs = " ".join(f"{k} {v}" for k, v in zip(total[0].split(), total[1].split()))
                self.stream.write(f"tasks: {pairs}; {progress}\n")
                self.stream.flush()
                self._last = text
            return
        busy = [v for v in views if v.shown not in (Shown.DONE, Shown.WAITING)]
        height = max(5, shutil.get_terminal_size((100, 24)).lines - 6)
        lines = (clustertable(busy, limit=height) if busy else []) + total + [progress]
        text = "\n".join(lines)
        if text == self._last:
            return
        up = f"\x1b[{self._drawn}F" if self._drawn else ""
        self.stream.write(up + "\x1b[J" + text + "\n")
        self.stream.flush()
        self._last, self._drawn = text, len(lines)

    def clear(self) -> None:
        """Remove the live block before the final report (a terminal only)."""
        if self.tty and self._drawn:
            self.stream.write(f"\x1b[{self._drawn}F\x1b[J")
            self.stream.flush()
            self._drawn, self._last = 0, ""
