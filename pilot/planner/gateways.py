"""A site's grid gateways (``grids[]``) against the site config pilot submits through.

Pegasus reaches a site's batch system from its submit host through HTCondor:
the gateway of a job's type (SiteCatalogEntry.selectGridGateway: transfer,
cleanup and register jobs fall back to auxillary, auxillary to compute) gives
the job's ``grid_resource``, ``<type> <contact>`` (CondorG.java) or, for the
glite and ssh styles, ``batch <scheduler> <contact>`` (GLite.java, SSH.java).
pilot runs on the site and submits its batch jobs itself, through the
scheduler of the site config given with ``--site``: the type and contact have
nothing left to do (the gateway is the way to the batch system pilot already
uses), but the scheduler says which batch system the site has, and a site
config that submits to another one contradicts the site catalog. So every
gateway of a site a job runs on must name the site config's batch system:

- each plug-in names its Pegasus scheduler (``pegasus_name``): slurm is
  pilot's slurm, pbs its pbspro or torque; fork (jobs run on the
  gateway host, no batch system) is its ``local``, for compute jobs: a fork
  gateway for data jobs only is Pegasus' usual way to run them on the head
  node, and pilot's data jobs run in the cluster or as batch jobs of the same
  scheduler as the compute jobs, with the same result;
- a Pegasus scheduler no plug-in names is a batch system pilot has no
  plug-in for;
- unknown says nothing and is accepted.

A contradiction is refused in one line naming the gateway, both schedulers
and the fix.
"""

from __future__ import annotations

from typing import Any

from pilot.errors import ConfigError
from pilot.planner.model import Catalogs, Grid
from pilot.planner.yamlvalues import fail, need_mapping, need_text
from pilot.sites import SiteConfig
from providers import SCHEDULERS as PLUGINS  # pilot's plug-ins, beside Pegasus' SCHEDULERS below
from providers import scheduler_for

# Pegasus' enums (GridGateway.java: TYPE, SCHEDULER_TYPE, JOB_TYPE); it refuses any other value.
TYPES = ("gt5", "condor", "cream", "batch", "nordugrid", "unicore", "ec2", "deltacloud", "sfapi")
SCHEDULERS = ("fork", "pbs", "lsf", "condor", "sge", "slurm", "flux", "unknown")
JOB_TYPES = ("compute", "auxillary", "transfer", "register", "cleanup")


def read_grid(raw: Any, path: str, ypath: str) -> Grid:
    """One ``grids[]`` entry: ``type``, ``contact`` and ``scheduler`` required and ``jobtype`` optional, as
    Pegasus' schema has them, each checked against Pegasus' values."""
    raw = need_mapping(raw, path, ypath, "{type: batch, contact: HOST, scheduler: slurm, jobtype: compute}")
    for key in ("type", "contact", "scheduler"):
        if raw.get(key) is None:
            raise fail(path, ypath, f"a grid needs a {key}")
    jobtype = None if raw.get("jobtype") is None else _one_of(raw, "jobtype", JOB_TYPES, path, ypath)
    return Grid(
        type=_one_of(raw, "type", TYPES, path, ypath),
        contact=need_text(raw["contact"], path, f"{ypath}.contact"),
        scheduler=_one_of(raw, "scheduler", SCHEDULERS, path, ypath),
        jobtype=jobtype,
        where=f"{path}: {ypath}",
    )


def _one_of(raw: dict, key: str, allowed: tuple[str, ...], path: str, ypath: str) -> str:
    value = need_text(raw[key], path, f"{ypath}.{key}")
    if value not in allowed:
        raise fail(path, f"{ypath}.{key}", f"{value!r} is not one Pegasus knows: use one of {', '.join(allowed)}")
    return value


def check(catalogs: Catalogs, site: SiteConfig, handles: set[str]) -> None:
    """Refuse a gateway of a site in ``handles`` (those jobs run on) whose batch system is not the site config's
    (see the module doc)."""
    mine = scheduler_for(site).pegasus_name
    config = site.path or site.name
    for handle in sorted(handles):
        entry = catalogs.sites.get(handle)
        for grid in entry.grids if entry is not None else ():
            if grid.scheduler == "unknown" or grid.scheduler == mine:
                continue
            if grid.scheduler == "fork" and grid.jobtype != "compute":
                continue  # data jobs on the head node: pilot runs them in the cluster or as batch jobs instead
            jobs = f"its {grid.jobtype} jobs" if grid.jobtype else "jobs"
            names = _pilot_names(grid.scheduler)
            fix = (
                f"plan with a site config whose scheduler is {names} (--site)"
                if names
                else f"pilot has no {grid.scheduler} plug-in: plan for a site whose batch system pilot submits to"
            )
            raise ConfigError(
                f"{grid.where}: site {handle} runs {jobs} through {grid.scheduler} (grid {grid.type} {grid.contact}), "
                f"but site config {config} submits to {site.scheduler}: {fix}, or correct the grid's scheduler in "
                "the site catalog"
            )


def _pilot_names(scheduler: str) -> str:
    """pilot's scheduler names for a Pegasus one ("" when pilot has none)."""
    return " or ".join(name for name, plugin in PLUGINS.items() if plugin.pegasus_name == scheduler)
