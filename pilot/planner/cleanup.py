"""Cleanup jobs, as pegasus-plan's ``--cleanup`` adds them (MainEngine, InPlace, RemoveDirectory).

- ``inplace`` (the default, also ``constraint``): every file in the
  workflow's directory is removed as soon as nothing needs it. The deepest
  job that uses a file (compute jobs, and the stage-out job that copies it)
  owns its removal; the removal depends on every job that uses the file.
  Removals are grouped per level of the planned workflow, ``ceil(owners on the
  level / 5)`` cleanup jobs (``pegasus.file.cleanup.clusters.num`` sets the
  number), named ``clean_up_<site>_level_<l>_<n>`` (levels from 1, counted with
  the data jobs). An output to be staged out when no output site is given is
  never removed this way. Then the leaf cleanup below.
- ``leaf``: one job, ``cleanup_<workflow>_0_<site>``, removes the workflow's
  directory after every other job.
- ``none``: nothing.

Each is pegasus-transfer on a JSON list of ``remove`` entries.
"""

from __future__ import annotations

import math

from pilot.errors import ConfigError
from pilot.planner.datainputs import transfer_input
from pilot.planner.datalayout import DataLayout
from pilot.planner.model import Job, JobType, Workflow, children_of, parents_of
from pilot.planner.staging import DataJobs
from pilot.util import graphs

MODES = ("none", "leaf", "inplace", "constraint")
DEFAULT_MODE = "inplace"
OWNERS_PER_CLEANUP = 5


def check_mode(mode: str | None) -> str:
    value = (mode or DEFAULT_MODE).lower()
    if value not in MODES:
        raise ConfigError(f"--cleanup {mode}: use none, leaf, inplace (the default) or constraint")
    return value


def add(wf: Workflow, data: DataJobs, lay: DataLayout, mode: str) -> list[Job]:
    """The cleanup jobs for ``mode``, made and linked by ``data`` (the plan's data jobs, already added)."""
    if mode == "none":
        return []
    jobs = [*wf.jobs, *data.made]
    out: list[Job] = []
    if mode != "leaf":
        out += _in_place(wf, jobs, lay, data)
    sinks = [j for j in (*jobs, *out) if not j.children]
    leaf = data.new_job(f"cleanup_{wf.name}_0_{lay.exec_site}", JobType.CLEANUP, "cleanup")
    leaf.stdin_text = transfer_input(
        [
            {
                "id": 1,
                "type": "remove",
                "target": {"site_label": lay.exec_site, "url": lay.workdir.url, "recursive": "True"},
            }
        ]
    )
    data.edges_of_new(leaf, sinks, below=False)
    return [*out, leaf]


def _in_place(wf: Workflow, jobs: list[Job], lay: DataLayout, data: DataJobs) -> list[Job]:
    users: dict[str, list[Job]] = {}
    kept: set[str] = set()
    written = {u.lfn for j in wf.jobs for u in j.uses if u.writes}
    for job in wf.jobs:
        for use in job.uses:
            if job.type is JobType.DAX and use.lfn not in written:
                continue  # nothing staged it here: a sub-workflow reads its own inputs where they are
            users.setdefault(use.lfn, []).append(job)
            if use.writes and use.stage_out and not lay.output_site:
                kept.add(use.lfn)  # Pegasus never removes an output meant for a stage-out that is not planned
    for job, lfns in data.copied_out:  # a stage-out job reads what it copies from the workflow's directory
        for lfn in lfns:
            users.setdefault(lfn, []).append(job)
    owned: dict[int, tuple[Job, list[str]]] = {}
    # By id(job), roots 1; only where a file is to be removed (a workflow may have none).
    levels = graphs.levels(jobs, parents_of, children_of) if users.keys() - kept else {}
    for lfn, who in users.items():
        if lfn in kept:
            continue
        owner = who[0] if len(who) == 1 else max(who, key=lambda j: levels[id(j)])
        owned.setdefault(id(owner), (owner, []))[1].append(lfn)
    by_level: dict[int, list[tuple[Job, list[str]]]] = {}
    for owner, files in owned.values():
        by_level.setdefault(levels[id(owner)], []).append((owner, files))
    out: list[Job] = []
    num = _clusters_num(wf)
    for level in sorted(by_level):
        owners = by_level[level]
        count = num or max(1, math.ceil(len(owners) / OWNERS_PER_CLEANUP))
        group: list[tuple[Job, list[str]]] = []
        for k in range(min(count, len(owners))):
            group = owners[k::count]
            files = [f for _, fs in group for f in fs]
            job = data.new_job(f"clean_up_{lay.exec_site}_level_{level}_{k}", JobType.CLEANUP, "cleanup")
            job.stdin_text = transfer_input(
                [
                    {
                        "id": n,
                        "type": "remove",
                        "target": {"site_label": lay.exec_site, "url": lay.workdir.file(f)[1], "recursive": "False"},
                    }
                    for n, f in enumerate(files, 1)
                ]
            )
            for f in files:
                for user in users[f]:
                    data.edge(user, job)
            out.append(job)
    return out


def _clusters_num(wf: Workflow) -> int | None:
    raw = wf.catalogs.properties.get("pegasus.file.cleanup.clusters.num")
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(
            f"pegasus.properties: pegasus.file.cleanup.clusters.num = {raw!r} is not a whole number"
        ) from None
    return value if value >= 1 else None
