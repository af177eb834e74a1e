"""PBS Pro / OpenPBS (ALCF's Polaris and Aurora): qsub scripts, Parsl's PBSProProvider, ``qstat -x -f -F json``.

``select`` asks for ``nodes`` chunks of ``ranks_per_node`` CPUs and MPI
processes each; a site's ``constraint`` is added to every chunk (e.g.
``system=polaris``); ``exclusive`` asks for ``place=scatter:excl`` (one chunk
per node, nodes not shared). With ``job_history_enable`` qstat ``-x`` still
reports finished jobs (state F, ``Exit_status``); a job it no longer knows is
finished. A queued job's ``comment`` says why it waits; "Can Never Run" is
the scheduler's verdict that it never will.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pilot.contracts.queue import QueueState, QueueStatus
from pilot.errors import ConfigError, SubmitError
from pilot.util.boundedload import parse_json
from providers.base import Outlook, PendingReason, Scheduler
from providers.commands import Output
from providers.inputs import Request, Site
from providers.parsl_script import OwnScript
from providers.qstat import find_by_name

_STATES = {
    "Q": QueueState.PENDING,
    "W": QueueState.PENDING,
    "T": QueueState.PENDING,
    "H": QueueState.HELD,
    "S": QueueState.HELD,
    "U": QueueState.HELD,
    "R": QueueState.RUNNING,
    "E": QueueState.RUNNING,
    "B": QueueState.RUNNING,
    "F": QueueState.FINISHED,
    "X": QueueState.FINISHED,
    "M": QueueState.FINISHED,
}

# PBS explains a queued job in its ``comment``; keyed by the text before the first colon.
PENDING_REASONS: dict[str, PendingReason] = {
    "Not Running": PendingReason("the scheduler could not start it yet (the comment says what it waits for)"),
    "Can Never Run": PendingReason("the request exceeds what the server or queue can ever give", Outlook.NEVER),
    "Job held": PendingReason("held (qrls releases it)", Outlook.HELD),
}


def _short(job_id: str) -> str:
    return job_id.split(".", 1)[0]


class PBSPro(Scheduler):
    name = "pbspro"
    template = "pbspro.sh"
    suffix = ".pbs"
    directive_prefix = "#PBS"
    memory_directive = "#PBS -l mem={}mb"
    pegasus_name = "pbs"
    parsl_suffix = ""  # PBSProProvider names its script <job name>.<time>, no suffix
    hosts_command = "awk '!seen[$0]++' \"$PBS_NODEFILE\""  # the node file names a host once per rank (mpiprocs)
    pending_reasons = PENDING_REASONS

    def directives(self, req: Request) -> dict[str, str | None]:
        return {
            "queue": req.queue,
            "account": req.account,
            "resources": f":{req.constraint}" if req.constraint else "",
            "place": "scatter:excl" if req.exclusive else None,
        }

    def make_provider(self, site: Site) -> Any:
        from parsl.providers import PBSProProvider

        from providers.common import block_kwargs

        cls = OwnScript.subclass(PBSProProvider, self)
        return cls(
            account=site.account,
            queue=site.queue,
            nodes_per_block=site.nodes,
            walltime=site.walltime,
            cpus_per_node=site.ranks_per_node,
            **block_kwargs(site),
        )

    def query_command(self, job_ids: Sequence[str]) -> list[str]:
        return ["qstat", "-x", "-f", "-F", "json", *job_ids]

    def parse_query(self, job_ids: Sequence[str], out: Output) -> dict[str, QueueStatus]:
        """Statuses from ``qstat -x -f -F json IDS``.

        qstat prints the jobs it knows as JSON and one "Unknown Job Id ID" line on
        stderr (exit 153) for each it does not: those are finished and purged from
        the history. Any other failure is the command's.
        """
        try:
            jobs = parse_json(out.stdout, "qstat").get("Jobs", {}) if out.stdout.strip() else {}
        except (ConfigError, AttributeError):
            raise SubmitError(
                f"qstat printed no JSON (exit {out.returncode}): {out.stdout[:200]!r} " f"{out.stderr.strip()}",
                transient=True,
            ) from None
        unknown = {_short(line.rsplit(None, 1)[-1]) for line in out.stderr.splitlines() if "Unknown Job Id" in line}
        other = [line for line in out.stderr.splitlines() if line.strip() and "Unknown Job Id" not in line]
        if out.returncode != 0 and (other or not unknown):
            raise out.failure()
        by_short = {_short(k): v for k, v in jobs.items()}
        result: dict[str, QueueStatus] = {}
        for job_id in job_ids:
            job = jobs.get(job_id) or by_short.get(_short(job_id))
            if job is None:
                if _short(job_id) not in unknown and out.returncode != 0:
                    raise out.failure()
                result[job_id] = QueueStatus(QueueState.FINISHED, "not in the queue")
                continue
            result[job_id] = self._job_status(job)
        return result

    def _job_status(self, job: dict[str, Any]) -> QueueStatus:
        code = str(job.get("job_state", ""))
        state = _STATES.get(code, QueueState.UNKNOWN)
        comment = str(job.get("comment", "") or "")
        if state is QueueState.FINISHED:
            exit_status = job.get("Exit_status")
            return QueueStatus(state, f"Exit_status {exit_status}" if exit_status is not None else comment)
        if state is QueueState.HELD and not comment:
            comment = "Job held"
        return self.status(state, comment or code)

    def reason_code(self, reason: str) -> str:
        """A comment is a verdict, then details after a colon: "Can Never Run: Insufficient amount of resource"."""
        return reason.split(":", 1)[0].strip()

    def find(self, site: Site, workdir: str, job_name: str) -> str | None:  # noqa: ARG002 - the provider interface's signature
        return find_by_name(site, job_name)
