"""Torque (and Slurm's qsub/qstat/qdel wrappers): ``nodes=N:ppn=M`` scripts, Parsl's TorqueProvider, ``qstat -f IDS``.

Torque's qstat has no JSON: ``qstat -f`` prints ``Job Id:`` blocks of
``key = value`` lines. A finished job shows as C (or leaves the queue:
"Unknown Job Id", exit 153). Through the Slurm wrappers a held job shows as
Q and the wrapper's qsub writes its own -o/-e: outcomes always come from the
pilot's result file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from providers.base import PendingReason, Scheduler
from providers.commands import Output
from providers.parsl_script import OwnScript
from providers.pbspro import find_by_name
from providers.queue import QueueState, QueueStatus

if TYPE_CHECKING:
    from pilot.jobrequest import JobRequest
    from pilot.sites import SiteConfig

_STATES = {
    "Q": QueueState.PENDING, "W": QueueState.PENDING, "T": QueueState.PENDING,
    "H": QueueState.HELD, "S": QueueState.HELD,
    "R": QueueState.RUNNING, "E": QueueState.RUNNING,
    "C": QueueState.FINISHED,
}

# Torque's qstat gives no pending reason; ``comment`` (set by Moab/Maui or an administrator) is shown as is.
PENDING_REASONS: dict[str, PendingReason] = {}


def parse_qstat_full(text: str) -> dict[str, dict[str, str]]:
    """``qstat -f`` blocks -> {job id: {key: value}}."""
    jobs: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.splitlines():
        if line.startswith("Job Id:"):
            current = jobs.setdefault(line.split(":", 1)[1].strip(), {})
        elif current is not None and "=" in line:
            key, value = line.split("=", 1)
            current[key.strip()] = value.strip()
    return jobs


def parse_qstat(job_ids: Sequence[str], out: Output) -> dict[str, QueueStatus]:
    """Statuses from ``qstat -f IDS``: a job qstat does not list is finished."""
    # 153: some id is unknown (Torque says "Unknown Job Id"; Slurm's wrapper says nothing)
    unknown_only = out.returncode == 153 and (not out.stderr.strip() or "Unknown Job Id" in out.stderr)
    if out.returncode != 0 and not unknown_only:
        raise out.failure()
    jobs = parse_qstat_full(out.stdout)
    by_short = {k.split(".", 1)[0]: v for k, v in jobs.items()}
    result: dict[str, QueueStatus] = {}
    for job_id in job_ids:
        job = jobs.get(job_id) or by_short.get(job_id.split(".", 1)[0])
        if job is None:
            result[job_id] = QueueStatus(QueueState.FINISHED, "not in the queue")
            continue
        code = job.get("job_state", "")
        state = _STATES.get(code, QueueState.UNKNOWN)
        exit_status = job.get("exit_status")
        reason = f"exit_status {exit_status}" if state is QueueState.FINISHED and exit_status else job.get("comment", code)
        result[job_id] = QueueStatus(state, reason)
    return result


class Torque(Scheduler):
    name = "torque"
    template = "torque.sh"
    suffix = ".pbs"
    directive_prefix = "#PBS"
    pending_reasons = PENDING_REASONS

    def directives(self, req: "JobRequest") -> dict[str, str | None]:
        return {"queue": req.queue, "account": req.account}

    def make_provider(self, site: "SiteConfig") -> Any:
        from parsl.providers import TorqueProvider

        from providers.common import block_kwargs

        cls = OwnScript.subclass(TorqueProvider, self)
        return cls(account=site.account, queue=site.queue, nodes_per_block=site.nodes, walltime=site.walltime,
                   **block_kwargs(site))

    def query_command(self, job_ids: Sequence[str]) -> list[str]:
        return ["qstat", "-f", *job_ids]

    def parse_query(self, job_ids: Sequence[str], out: Output) -> dict[str, QueueStatus]:
        return parse_qstat(job_ids, out)

    def find(self, site: "SiteConfig", workdir: str, job_name: str) -> str | None:
        return find_by_name(site, job_name)
