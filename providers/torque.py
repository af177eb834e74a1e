"""Torque (and Slurm's qsub/qstat/qdel wrappers): ``nodes=N:ppn=M`` scripts, Parsl's TorqueProvider, ``qstat -f IDS``.

Torque's qstat has no JSON: ``qstat -f`` prints ``Job Id:`` blocks of
``key = value`` lines. A finished job shows as C (or leaves the queue:
"Unknown Job Id", exit 153). Through the Slurm wrappers a held job shows as
Q and the wrapper's qsub writes its own -o/-e: outcomes always come from the
pilot's result file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pilot.contracts.queue import QueueState, QueueStatus
from providers.base import PendingReason, Scheduler
from providers.commands import Output
from providers.inputs import Request, Site
from providers.parsl_script import OwnScript
from providers.qstat import find_by_name, parse_qstat_full

_STATES = {
    "Q": QueueState.PENDING,
    "W": QueueState.PENDING,
    "T": QueueState.PENDING,
    "H": QueueState.HELD,
    "S": QueueState.HELD,
    "R": QueueState.RUNNING,
    "E": QueueState.RUNNING,
    "C": QueueState.FINISHED,
}

# Torque's qstat gives no pending reason; ``comment`` (set by Moab/Maui or an administrator) is shown as is.
PENDING_REASONS: dict[str, PendingReason] = {}


class Torque(Scheduler):
    name = "torque"
    template = "torque.sh"
    suffix = ".pbs"
    directive_prefix = "#PBS"
    memory_directive = "#PBS -l mem={}mb"
    pegasus_name = "pbs"
    hosts_command = "awk '!seen[$0]++' \"$PBS_NODEFILE\""  # the node file names a host once per rank (ppn)
    pending_reasons = PENDING_REASONS

    def directives(self, req: Request) -> dict[str, str | None]:
        return {"queue": req.queue, "account": req.account}

    def make_provider(self, site: Site) -> Any:
        from parsl.providers import TorqueProvider

        from providers.common import block_kwargs

        cls = OwnScript.subclass(TorqueProvider, self)
        return cls(
            account=site.account,
            queue=site.queue,
            nodes_per_block=site.nodes,
            walltime=site.walltime,
            **block_kwargs(site),
        )

    def query_command(self, job_ids: Sequence[str]) -> list[str]:
        return ["qstat", "-f", *job_ids]

    def parse_query(self, job_ids: Sequence[str], out: Output) -> dict[str, QueueStatus]:
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
            if state is QueueState.FINISHED and exit_status:
                result[job_id] = QueueStatus(state, f"exit_status {exit_status}")
            else:
                result[job_id] = self.status(state, job.get("comment", code))
        return result

    def find(self, site: Site, workdir: str, job_name: str) -> str | None:  # noqa: ARG002 - the provider interface's signature
        return find_by_name(site, job_name)
