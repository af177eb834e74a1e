"""Slurm: sbatch scripts, Parsl's SlurmProvider, ``squeue -j`` for our own jobs.

``exclusive`` follows the site config (Parsl's default, exclusive nodes, runs
one pilot at a time on a small cluster). Pending reasons are Slurm's own codes
(``squeue %r``, "JOB REASON CODES" in squeue(1)).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pilot.contracts.queue import QueueState, QueueStatus
from providers.base import Outlook, PendingReason, Scheduler
from providers.commands import Output, run_command
from providers.inputs import Request, Site
from providers.parsl_script import OwnScript

SQUEUE_FORMAT = "%i|%T|%r"
# A job waiting for nodes that are down, drained or failed: Slurm says "ReqNodeNotAvail, UnavailableNodes:..."
# or, when every node is out, "Nodes required for job are DOWN, DRAINED or reserved ...".
_NODE_WAIT = ("ReqNodeNotAvail", "Nodes required for job are DOWN")
# sinfo %t states of nodes that take no new job until an administrator acts ("*": not responding).
_OUT_OF_SERVICE = {
    "down",
    "drain",
    "drng",
    "drained",
    "draining",
    "fail",
    "failg",
    "maint",
    "futr",
    "inval",
    "unk",
    "npc",
}

_STATES = {
    "PENDING": QueueState.PENDING,
    "REQUEUED": QueueState.PENDING,
    "REQUEUE_FED": QueueState.PENDING,
    "CONFIGURING": QueueState.RUNNING,
    "RUNNING": QueueState.RUNNING,
    "COMPLETING": QueueState.RUNNING,
    "STAGE_OUT": QueueState.RUNNING,
    "SIGNALING": QueueState.RUNNING,
    "RESIZING": QueueState.RUNNING,
    "SUSPENDED": QueueState.HELD,
    "STOPPED": QueueState.HELD,
    "REQUEUE_HOLD": QueueState.HELD,
    "SPECIAL_EXIT": QueueState.HELD,
    "COMPLETED": QueueState.FINISHED,
    "CANCELLED": QueueState.FINISHED,
    "FAILED": QueueState.FINISHED,
    "TIMEOUT": QueueState.FINISHED,
    "NODE_FAIL": QueueState.FINISHED,
    "PREEMPTED": QueueState.FINISHED,
    "BOOT_FAIL": QueueState.FINISHED,
    "DEADLINE": QueueState.FINISHED,
    "OUT_OF_MEMORY": QueueState.FINISHED,
    "REVOKED": QueueState.FINISHED,
}

_P, _HELD, _NEVER = PendingReason, Outlook.HELD, Outlook.NEVER
# Reasons a job waits for; NEVER where the request itself exceeds what the partition, account or QOS
# allows (an administrator must change the limits or the user the request).
PENDING_REASONS: dict[str, PendingReason] = {
    "Priority": _P("jobs of higher priority are ahead"),
    "Resources": _P("waiting for nodes to become free"),
    "Dependency": _P("waiting for a job it depends on"),
    "BeginTime": _P("its start time is in the future"),
    "JobHeldUser": _P("held by its owner (scontrol release)", _HELD),
    "JobHeldAdmin": _P("held by an administrator", _HELD),
    "NodeDown": _P("a node it needs is down"),
    "ReqNodeNotAvail": _P("a node it needs is unavailable (down, drained or reserved)"),
    "Reservation": _P("waiting for its advanced reservation"),
    "PartitionDown": _P("the partition is down"),
    "PartitionInactive": _P("the partition is inactive"),
    "Licenses": _P("waiting for a license"),
    "AssocGrpCpuLimit": _P("the account's CPU limit is reached by running jobs"),
    "AssocGrpNodeLimit": _P("the account's node limit is reached by running jobs"),
    "AssocGrpJobsLimit": _P("the account's running-job limit is reached"),
    "AssocMaxJobsLimit": _P("the association's running-job limit is reached"),
    "QOSGrpCpuLimit": _P("the QOS's CPU limit is reached by running jobs"),
    "QOSGrpNodeLimit": _P("the QOS's node limit is reached by running jobs"),
    "QOSMaxJobsPerUserLimit": _P("your running-job limit in this QOS is reached"),
    "BadConstraints": _P("no node has the requested features", _NEVER),
    "PartitionConfig": _P("the partition cannot hold the request (e.g. more CPUs than it has)", _NEVER),
    "PartitionNodeLimit": _P("more nodes than the partition allows", _NEVER),
    "PartitionTimeLimit": _P("a walltime longer than the partition allows", _NEVER),
    "InvalidAccount": _P("the account is invalid", _NEVER),
    "InvalidQOS": _P("the QOS is invalid", _NEVER),
    "AccountNotAllowed": _P("the account may not use this partition", _NEVER),
    "QOSNotAllowed": _P("the QOS may not be used in this partition", _NEVER),
    "DependencyNeverSatisfied": _P("a job it depends on failed", _NEVER),
    "AssocMaxWallDurationPerJobLimit": _P("a walltime longer than the association allows", _NEVER),
    "AssocMaxNodeLimit": _P("more nodes than the association allows per job", _NEVER),
    "AssocMaxCpuPerJobLimit": _P("more CPUs than the association allows per job", _NEVER),
    "AssocMaxNodePerJobLimit": _P("more nodes than the association allows per job", _NEVER),
    "QOSMaxWallDurationPerJobLimit": _P("a walltime longer than the QOS allows", _NEVER),
    "QOSMaxNodePerJobLimit": _P("more nodes than the QOS allows per job", _NEVER),
    "QOSMaxCpuPerJobLimit": _P("more CPUs than the QOS allows per job", _NEVER),
    "QOSMaxMemoryPerJob": _P("more memory than the QOS allows per job", _NEVER),
    "QOSMinCpuNotSatisfied": _P("fewer CPUs than the QOS requires", _NEVER),
}


def in_service(sinfo: str) -> bool:
    """Whether any node of ``sinfo -h -o '%P|%t' -p PARTITION`` can take a new job."""
    for line in sinfo.splitlines():
        state = line.rsplit("|", 1)[-1].strip()
        if state and not state.endswith("*") and state.rstrip("~#!%$@^-") not in _OUT_OF_SERVICE:
            return True
    return False


class Slurm(Scheduler):
    name = "slurm"
    template = "slurm.sh"
    suffix = ".slurm"
    directive_prefix = "#SBATCH"
    memory_directive = "#SBATCH --mem={}"
    pegasus_name = "slurm"
    parsl_suffix = ""  # SlurmProvider names its script <job name>.<time>, no suffix
    hosts_command = 'scontrol show hostnames "$SLURM_JOB_NODELIST"'
    pending_reasons = PENDING_REASONS

    def directives(self, req: Request) -> dict[str, str | None]:
        return {
            "partition": req.queue,
            "account": req.account,
            "qos": req.qos,
            "constraint": req.constraint,
            "exclusive": "" if req.exclusive else None,
        }

    def make_provider(self, site: Site) -> Any:
        from parsl.providers import SlurmProvider

        from providers.common import block_kwargs

        cls = OwnScript.subclass(SlurmProvider, self)
        return cls(
            partition=site.partition,
            account=site.account,
            qos=site.qos,
            constraint=site.constraint,
            nodes_per_block=site.nodes,
            walltime=site.walltime,
            exclusive=bool(site.exclusive),
            **block_kwargs(site),
        )

    def query_command(self, job_ids: Sequence[str]) -> list[str]:
        return ["squeue", "-h", "-j", ",".join(job_ids), "-o", SQUEUE_FORMAT]

    def parse_query(self, job_ids: Sequence[str], out: Output) -> dict[str, QueueStatus]:
        """Statuses from ``squeue -h -j IDS -o '%i|%T|%r'``.

        Slurm forgets a job soon after it ends: an id squeue does not list is
        FINISHED. With a single unknown id squeue fails with "Invalid job id
        specified" (with several it prints nothing); any other failure is the
        command's.
        """
        if out.returncode != 0:
            if "Invalid job id specified" in out.stderr:
                return {j: QueueStatus(QueueState.FINISHED, "not in the queue") for j in job_ids}
            raise out.failure()
        seen: dict[str, QueueStatus] = {}
        for line in out.stdout.splitlines():
            parts = line.strip().split("|", 2)
            if len(parts) != 3:
                continue
            job_id, state_name, reason = parts
            # "None" (no reason) shows as the state, which no reason names
            seen[job_id] = self.status(
                _STATES.get(state_name, QueueState.UNKNOWN), reason if reason != "None" else state_name
            )
        return {j: seen.get(j, QueueStatus(QueueState.FINISHED, "not in the queue")) for j in job_ids}

    def reason_code(self, reason: str) -> str:
        """squeue's %r is a code, then details after a comma: "ReqNodeNotAvail, UnavailableNodes:node2"."""
        return reason.split(",", 1)[0].strip()

    def query(self, site: Site, job_ids: Sequence[str]) -> dict[str, QueueStatus]:
        """squeue's answer; a job waiting for unavailable nodes never starts when no node of the
        site's partition is in service (all down, drained or failed): nobody but an administrator
        can change that, and a run must not wait for it forever."""
        statuses = super().query(site, job_ids)
        waiting = [j for j, s in statuses.items() if s.state is QueueState.PENDING and s.reason.startswith(_NODE_WAIT)]
        if not waiting:
            return statuses
        argv = ["sinfo", "-h", "-o", "%P|%t", *(["-p", site.partition] if site.partition else [])]
        out = run_command(argv, site.cmd_timeout)
        if out.returncode != 0:
            raise out.failure()
        lines = (
            out.stdout
            if site.partition
            else "\n".join(x for x in out.stdout.splitlines() if x.split("|")[0].endswith("*"))
        )
        if in_service(lines):
            return statuses
        for j in waiting:
            statuses[j] = dataclasses.replace(
                statuses[j],
                reason=f"{statuses[j].reason} (no node of the partition is " "in service)",
                never_starts=True,
            )
        return statuses

    def find(self, site: Site, workdir: str, job_name: str) -> str | None:  # noqa: ARG002 - the provider interface's signature
        """Our job by its name: ``squeue --name`` wants the full name, so list our user's jobs' names."""
        import getpass

        out = run_command(["squeue", "-h", "-u", getpass.getuser(), "-o", "%i %j"], site.cmd_timeout)
        if out.returncode != 0:
            return None
        for line in out.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[1].startswith(job_name + "."):
                return parts[0]
        return ""
