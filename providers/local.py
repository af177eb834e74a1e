"""No batch system: Parsl's LocalProvider runs the pilot on this machine."""

from __future__ import annotations

import glob
import os
from typing import Any

from pilot.jobrequest import JobRequest
from pilot.sites import SiteConfig
from providers.common import block_kwargs

__all__ = ["make_provider", "size", "track", "find"]


def make_provider(site: SiteConfig) -> Any:
    from parsl.providers import LocalProvider

    return LocalProvider(worker_init=site.worker_init, **block_kwargs(site))


def size(provider: Any, req: JobRequest) -> None:
    """A local run has no nodes or walltime to ask for."""


def _script(workdir: str, job_name: str) -> str | None:
    found = sorted(glob.glob(os.path.join(glob.escape(workdir), glob.escape(job_name) + ".[0-9]*.sh")))
    return found[-1] if found else None


def track(provider: Any, jobs: list[tuple[str, str, str]]) -> None:
    """LocalProvider keeps the pid and script of each job; rebuild them after a restart."""
    from parsl.jobs.states import JobState, JobStatus

    for job_id, workdir, job_name in jobs:
        script = _script(workdir, job_name)
        if script is None:
            continue
        provider.resources.setdefault(job_id, {"job_id": job_id, "status": JobStatus(JobState.RUNNING),
                                               "remote_pid": int(job_id), "script_path": script})


def find(site: SiteConfig, workdir: str, job_name: str) -> str | None:
    """The pid of the ``bash <script>`` LocalProvider started for ``job_name``; "" if none runs."""
    script = _script(workdir, job_name)
    if script is None:
        return ""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                args = fh.read().split(b"\0")
        except OSError:
            continue
        if len(args) >= 2 and args[0].endswith(b"bash") and args[1] == script.encode():
            return entry
    return ""
