"""Scheduler plug-ins: one module per batch system, one registry, one interface (``providers.base.Scheduler``).

The rest of pilot reaches the plug-ins through the names here (besides the launchers' registry,
``providers.launchers``, and the check of a directive's words, ``pilot.util.safetext.is_plain``):

- ``SCHEDULERS``: the one registry, a site's ``scheduler:`` value -> its plug-in;
- ``scheduler_for(site)``: the site's ``Scheduler``, which holds every fact about its
  batch system (``providers.base``);
- ``script_for(site, req)``: (file suffix, batch script) as ``pilot plan`` writes it;
- ``script_suffixes()``: the suffixes of every batch script a plug-in or its Parsl
  provider writes in a cluster's directory;
- ``provider_for(site)`` / ``submit(provider, site, req, job_name)``: the Parsl
  provider and one submission of that same script (Parsl's SimpleLauncher
  runs the script's single MPI launch once; its default SingleNodeLauncher
  would start one single-rank pilot per task slot);
- ``query(site, job_ids)``: what the scheduler says about exactly these jobs;
- ``track`` / ``find``: following jobs after a restart.

Sites and requests are whatever has the attributes ``providers.inputs`` names
(``pilot.sites.SiteConfig``, ``pilot.jobrequest.JobRequest``): the site layer
checks its values against the registries here, so nothing here imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pilot.contracts.queue import QueueState, QueueStatus
from pilot.errors import ConfigError, SubmitError
from providers.base import Outlook, PendingReason, Scheduler
from providers.inputs import Request, Site
from providers.local import Local
from providers.pbspro import PBSPro
from providers.slurm import Slurm
from providers.torque import Torque

__all__ = [
    "SCHEDULERS",
    "Outlook",
    "PendingReason",
    "QueueState",
    "QueueStatus",
    "Scheduler",
    "find",
    "provider_for",
    "query",
    "scheduler_for",
    "script_for",
    "script_suffixes",
    "submit",
    "track",
]

# The one registry: a site's ``scheduler:`` value -> its plug-in.
SCHEDULERS: dict[str, Scheduler] = {s.name: s for s in (Slurm(), PBSPro(), Torque(), Local())}


def scheduler_for(site: Site) -> Scheduler:
    try:
        return SCHEDULERS[site.scheduler]
    except KeyError:
        raise ConfigError(
            f"{site.path or site.name}: scheduler {site.scheduler!r} is not one of " f"{', '.join(SCHEDULERS)}"
        ) from None


def script_for(site: Site, req: Request) -> tuple[str, str]:
    """(file suffix, script text) of the batch script for ``req`` on ``site``."""
    from providers.script import render

    scheduler = scheduler_for(site)
    return scheduler.suffix, render(scheduler, req)


def script_suffixes() -> tuple[str, ...]:
    """The suffixes of the batch scripts plug-ins and their Parsl providers write, each once (not the empty one
    of a provider that writes none: every name ends with it)."""
    return tuple(dict.fromkeys(x for s in SCHEDULERS.values() for x in (s.suffix, s.parsl_suffix) if x))


def provider_for(site: Site) -> Any:
    return scheduler_for(site).make_provider(site)


def submit(provider: Any, site: Site, req: Request, job_name: str) -> str:
    """Submit one cluster; return the batch job id. SubmitError(transient=...) on failure."""
    scheduler_for(site).size(provider, req)
    provider.script_dir = req.workdir  # Parsl writes its script and the job's stdout/stderr here
    provider.request = req
    try:
        job_id = provider.submit(req.command_line(), req.ranks_per_node, job_name=job_name)
    except Exception as exc:  # Parsl raises SubmitException, ScaleOutFailed, OSError, ...
        raise SubmitError(f"{site.name}: submitting {req.name} failed: {_one_line(exc)}", transient=True) from exc
    finally:
        provider.request = None
    if not job_id:
        raise SubmitError(f"{site.name}: submitting {req.name} returned no job id", transient=True)
    return str(job_id)


def _one_line(exc: Exception) -> str:
    """What the scheduler said, on one line: Parsl's SubmitException carries the command's stderr (and
    stdout), which name the cause (``sbatch: error: ... Unable to contact slurm controller``); Parsl's own
    wrapping of it is left out when the scheduler said something."""
    said = []
    for attr in ("stderr", "stdout"):
        text = getattr(exc, attr, None)
        if text and text.strip():
            said.append(" / ".join(line.strip() for line in text.splitlines() if line.strip()))
    return " / ".join(said) if said else " ".join(str(exc).split())


def query(site: Site, job_ids: Sequence[str]) -> dict[str, QueueStatus]:
    """What ``site``'s scheduler says about exactly ``job_ids`` (one command for all of them).

    Every id gets a status; a job the scheduler no longer lists is FINISHED (the
    pilot's result file says how it went). ``never_starts`` marks a pending
    reason that waiting cannot cure, ``meaning`` says what the plug-in's
    ``pending_reasons`` make of it. Raises ``SubmitError(transient=True)``,
    with the command's stderr, when the scheduler command fails.
    """
    return scheduler_for(site).query(site, list(job_ids))


def track(site: Site, provider: Any, jobs: list[tuple[str, str, str]]) -> None:
    """Make a fresh provider (after a restart) follow jobs an earlier process submitted.

    ``jobs`` are (job id, cluster directory, job name) triples.
    """
    scheduler_for(site).track(provider, jobs)


def find(site: Site, workdir: str, job_name: str) -> str | None:
    """The id of a job submitted under ``job_name`` (Parsl appends a timestamp): "" when the queue
    has none, None when the queue could not be asked (its command failed, hung or is missing: a plug-in that
    lets that SubmitError out would end pilot submit where it is to look again later)."""
    try:
        return scheduler_for(site).find(site, workdir, job_name)
    except SubmitError:
        return None
