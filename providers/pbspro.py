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

from typing import TYPE_CHECKING, Any, Sequence

from providers.base import PendingReason, Scheduler
from providers.commands import Output
from providers.parsl_script import OwnScript
from providers.queue import QueueState, QueueStatus
from pilot.errors import ConfigError, SubmitError
from pilot.util.boundedload import parse_json

if TYPE_CHECKING:
    from pilot.jobrequest import JobRequest
    from pilot.sites import SiteConfig

_STATES = {
    "Q": QueueState.PENDING, "W": QueueState.PENDING, "T": QueueState.PENDING,
    "H": QueueState.HELD, "S": QueueState.HELD, "U": QueueState.HELD,
    "R": QueueState.RUNNING, "E": QueueState.RUNNING, "B": QueueState.RUNNING,
    "F": QueueState.FINISHED, "X": QueueState.FINISHED, "M": QueueState.FINISHED,
}

# PBS explains a queued job in its ``comment``; keyed by the text before the first colon.
PENDING_REASONS: dict[str, PendingReason] = {
    "Not Running": PendingReason("the scheduler could not start it yet (the comment says what it waits for)"),
    "Can Never Run": PendingReason("the request exceeds what the server or queue can ever give", True),
    "Job held": PendingReason("held (qrls releases it)"),
}


def _short(job_id: str) -> str:
    return job_id.split(".", 1)[0]


def parse_qstat_json(job_ids: Sequence[str], out: Output) -> dict[str, QueueStatus]:
    """Statuses from ``qstat -x -f -F json IDS``.

    qstat prints the jobs it knows as JSON and one "Unknown Job Id ID" line on
    stderr (exit 153) for each it does not: those are finished and purged from
    the history. Any other failure is the command's.
    """
    try:
        jobs = parse_json(out.stdout, "qstat").get("Jobs", {}) if out.stdout.strip() else {}
    except (ConfigError, AttributeError):
        raise SubmitError(f"qstat printed no JSON (exit {out.returncode}): {out.stdout[:200]!r} {out.stderr.strip()}",
                          transient=True) from None
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
        result[job_id] = status_of(job)
    return result


def status_of(job: dict[str, Any]) -> QueueStatus:
    code = str(job.get("job_state", ""))
    state = _STATES.get(code, QueueState.UNKNOWN)
    comment = str(job.get("comment", "") or "")
    if state is QueueState.FINISHED:
        exit_status = job.get("Exit_status")
        return QueueStatus(state, f"Exit_status {exit_status}" if exit_status is not None else comment)
    if state is QueueState.HELD and not comment:
        comment = "Job held"
    known = PENDING_REASONS.get(comment.split(":", 1)[0].strip())
    never = bool(known and known.never_starts and state is QueueState.PENDING)
    return QueueStatus(state, comment or code, never)


def find_by_name(site: "SiteConfig", job_name: str) -> str | None:
    """PBS and Torque: the id of our user's job ``job_name``.<timestamp> ("" if none; None if qstat failed);
    TorqueProvider puts "parsl." in front.

    ``qstat -f`` lists Job_Name in full (plain qstat truncates names) and Job_Owner as user@host.
    """
    import getpass

    from providers.commands import run_command
    from providers.torque import parse_qstat_full

    try:
        out = run_command(["qstat", "-f"], site.cmd_timeout)
    except SubmitError:
        return None
    if out.returncode != 0:
        return None
    user = getpass.getuser()
    for job_id, job in parse_qstat_full(out.stdout).items():
        name = job.get("Job_Name", "")
        if name.startswith((job_name + ".", "parsl." + job_name + ".")) and job.get("Job_Owner", "").split("@")[0] == user:
            return job_id
    return ""


class PBSPro(Scheduler):
    name = "pbspro"
    template = "pbspro.sh"
    suffix = ".pbs"
    directive_prefix = "#PBS"
    pending_reasons = PENDING_REASONS

    def directives(self, req: "JobRequest") -> dict[str, str | None]:
        return {"queue": req.queue, "account": req.account,
                "resources": f":{req.constraint}" if req.constraint else "",
                "place": "scatter:excl" if req.exclusive else None}

    def make_provider(self, site: "SiteConfig") -> Any:
        from parsl.providers import PBSProProvider

        from providers.common import block_kwargs

        cls = OwnScript.subclass(PBSProProvider, self)
        return cls(account=site.account, queue=site.queue, nodes_per_block=site.nodes, walltime=site.walltime,
                   cpus_per_node=site.ranks_per_node, **block_kwargs(site))

    def query_command(self, job_ids: Sequence[str]) -> list[str]:
        return ["qstat", "-x", "-f", "-F", "json", *job_ids]

    def parse_query(self, job_ids: Sequence[str], out: Output) -> dict[str, QueueStatus]:
        return parse_qstat_json(job_ids, out)

    def find(self, site: "SiteConfig", workdir: str, job_name: str) -> str | None:
        return find_by_name(site, job_name)
