"""Parsl providers for pilot's site configs: one module per scheduler.

``provider_for(site)`` builds the Parsl provider for a site once; ``submit``
sizes it for one cluster's JobRequest and submits the very command line the
planner's batch script runs. The launcher is Parsl's SimpleLauncher, which
runs that command once: the command itself starts ONE MPI job with all its
ranks through the site's srun/mpiexec/aprun/ibrun. (Parsl's default
SingleNodeLauncher would start one single-rank pilot per task slot.)
"""

from __future__ import annotations

import importlib
import shlex
from typing import Any

from pilot.errors import SubmitError
from pilot.jobrequest import JobRequest
from pilot.sites import SiteConfig

MODULES = {"slurm": "providers.slurm", "pbspro": "providers.pbspro", "torque": "providers.torque", "local": "providers.local"}


def provider_for(site: SiteConfig) -> Any:
    module = importlib.import_module(MODULES[site.scheduler])
    return module.make_provider(site)


def job_command(req: JobRequest) -> str:
    """What the batch job runs after the site's worker_init: go to the cluster and start the pilot."""
    return f"cd {shlex.quote(req.workdir)} || exit 1\n{req.command_line()}"


def submit(provider: Any, site: SiteConfig, req: JobRequest, job_name: str) -> str:
    """Submit one cluster; return the batch job id. SubmitError(transient=...) on failure."""
    module = importlib.import_module(MODULES[site.scheduler])
    module.size(provider, req)
    provider.script_dir = req.workdir  # Parsl writes its script and the job's stdout/stderr here
    try:
        job_id = provider.submit(job_command(req), req.ranks_per_node, job_name=job_name)
    except Exception as exc:  # Parsl raises SubmitException, ScaleOutFailed, OSError, ...
        raise SubmitError(f"{site.name}: submitting {req.name} failed: {exc}", transient=True) from exc
    if not job_id:
        raise SubmitError(f"{site.name}: submitting {req.name} returned no job id", transient=True)
    return str(job_id)


def track(site: SiteConfig, provider: Any, jobs: list[tuple[str, str, str]]) -> None:
    """Make a fresh provider (after a restart) poll jobs an earlier process submitted.

    ``jobs`` are (job id, cluster directory, job name) triples.
    """
    module = importlib.import_module(MODULES[site.scheduler])
    module.track(provider, jobs)


def find(site: SiteConfig, workdir: str, job_name: str) -> str | None:
    """The id of a job submitted under ``job_name`` (Parsl appends a timestamp): "" when the queue
    has none, None when the queue could not be asked."""
    module = importlib.import_module(MODULES[site.scheduler])
    return module.find(site, workdir, job_name)
