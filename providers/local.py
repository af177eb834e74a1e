"""No batch system: Parsl's LocalProvider runs the pilot's script with bash on this machine.

A job id is the pid of the background shell LocalProvider starts; ``ps``
tells whether it still runs. There is no queue, hence no pending reasons,
and no batch directives. Its jobs share one host: more ranks are more ranks
on it, and the nodes of a pilot job are this machine's (pilot.submit.blocks).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from typing import Any

from pilot.contracts.queue import QueueState, QueueStatus
from pilot.util.procs import cmdline
from providers.base import Scheduler
from providers.commands import Output
from providers.inputs import Request, Site
from providers.parsl_script import OwnScript


class Local(Scheduler):
    name = "local"
    template = "local.sh"
    suffix = ".sh"
    parsl_suffix = ".sh"  # LocalProvider's <job name>.<time>.sh, which it runs with bash
    single_host = True
    pegasus_name = "fork"  # Pegasus' gateway that runs jobs on the host itself

    def directives(self, req: Request) -> dict[str, str | None]:  # noqa: ARG002 - the provider interface's signature
        return {}

    def make_provider(self, site: Site) -> Any:
        from parsl.providers import LocalProvider

        from providers.common import block_kwargs

        return OwnScript.subclass(LocalProvider, self)(**block_kwargs(site))

    def size(self, provider: Any, req: Request) -> None:
        """A local run has no nodes or walltime to ask for."""

    def query_command(self, job_ids: Sequence[str]) -> list[str]:
        return ["ps", "-o", "pid=,stat=", "-p", ",".join(job_ids)]

    def parse_query(self, job_ids: Sequence[str], out: Output) -> dict[str, QueueStatus]:
        """Statuses from ``ps -o pid=,stat= -p PIDS`` (exit 1 when none of them exists): a zombie or a
        missing process has finished."""
        if out.returncode not in (0, 1) or (out.returncode == 1 and out.stderr.strip()):
            raise out.failure()
        alive = {}
        for line in out.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2:
                alive[parts[0]] = parts[1]
        return {
            j: QueueStatus(QueueState.RUNNING)
            if j in alive and not alive[j].startswith("Z")
            else QueueStatus(QueueState.FINISHED, "process ended")
            for j in job_ids
        }

    def track(self, provider: Any, jobs: Sequence[tuple[str, str, str]]) -> None:
        """LocalProvider keeps the pid and script of each job; rebuild them after a restart."""
        from parsl.jobs.states import JobState, JobStatus

        for job_id, workdir, job_name in jobs:
            script = _script(workdir, job_name)
            if script is None or not job_id.isdigit() or not _runs(job_id, script):
                continue  # a local job id is the pid of its script's shell: any other process is not ours to stop
            provider.resources.setdefault(
                job_id,
                {
                    "job_id": job_id,
                    "status": JobStatus(JobState.RUNNING),
                    "remote_pid": int(job_id),
                    "script_path": script,
                },
            )

    def find(self, site: Site, workdir: str, job_name: str) -> str | None:  # noqa: ARG002 - the provider interface's signature
        """The pid of the ``bash <script>`` LocalProvider started for ``job_name``; "" if none runs."""
        script = _script(workdir, job_name)
        if script is None:
            return ""
        return next((entry for entry in os.listdir("/proc") if entry.isdigit() and _runs(entry, script)), "")


def _runs(pid: str, script: str) -> bool:
    """Whether process ``pid`` is the ``bash <script>`` LocalProvider started, or the ``bash -c`` around it that
    it names as the job of a Parsl executor's block (not a pid reused, or named by hand)."""
    args = cmdline(pid) or []
    if len(args) >= 2 and args[0].endswith(b"bash") and args[1] == script.encode():
        return True
    return (
        len(args) >= 3
        and args[0].endswith(b"bash")
        and args[1] == b"-c"
        and b"bash " + script.encode() + b" " in args[2]
    )


def _script(workdir: str, job_name: str) -> str | None:
    """The script LocalProvider wrote for ``job_name``, by its absolute path: the one its process was started
    with, whatever directory ``pilot cancel`` was given relative to."""
    workdir = os.path.abspath(workdir)
    found = sorted(
        glob.glob(os.path.join(glob.escape(workdir), glob.escape(job_name) + ".[0-9]*" + Local.parsl_suffix))
    )
    return found[-1] if found else None
