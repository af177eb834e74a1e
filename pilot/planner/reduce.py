"""Data reuse: jobs whose outputs already exist are left out of the plan (pegasus-plan's DataReuseEngine).

Scope ``pegasus.data.reuse.scope``: ``full`` (the default) or ``none``
(``--force`` too: every job runs); ``partial`` considers only jobs with the
pegasus profile ``enable_for_data_reuse`` true.

1. A job is marked when every file it writes is in the replica catalog. A
   job that writes nothing is never marked.
2. Bottom-up, an unmarked job is also removed when all its children were and
   none of its outputs still has to be staged out (stageOut and not in the
   catalog): nothing left needs what it would make.

The removed jobs' children read the catalog's replicas (stage-in finds them
there), and their outputs marked stageOut are staged from those replicas to
the output site (level 1000 in the stage-out names).
"""

from __future__ import annotations

from pilot.errors import ConfigError
from pilot.planner import replicas
from pilot.planner.model import Job, Workflow
from pilot.util import graphs

SCOPES = ("full", "partial", "none")


def reduce(wf: Workflow, force: bool) -> list[Job]:
    """Remove reusable jobs from ``wf`` (re-indexing the rest); return the removed ones."""
    scope = wf.catalogs.properties.get("pegasus.data.reuse.scope", "full").lower()
    if scope not in SCOPES:
        raise ConfigError(f"pegasus.properties: pegasus.data.reuse.scope = {scope!r}: use full, partial or none")
    if force or scope == "none" or not (wf.catalogs.replicas or wf.catalogs.regex_replicas):
        return []
    known: dict[str, bool] = {}

    def in_catalog(lfn: str) -> bool:
        if lfn not in known:
            known[lfn] = bool(replicas.find(wf.catalogs, lfn))
        return known[lfn]

    def considered(job: Job) -> bool:
        if scope == "full":
            return True
        value = job.profiles.get("pegasus", {}).get("enable_for_data_reuse", "false") if job.profiles else "false"
        return value.lower() == "true"

    marked = set()
    for job in wf.jobs:
        outputs = [u.lfn for u in job.uses if u.writes]
        if outputs and considered(job) and all(in_catalog(lfn) for lfn in outputs):
            marked.add(id(job))
    if not marked:
        return []
    removed = set(marked)
    order = graphs.topological_order(wf.jobs, lambda j: j.parents, lambda j: j.children)
    for job in reversed(order):
        if id(job) in removed or not job.children:
            continue
        pending = any(u.writes and u.stage_out and (scope == "partial" or not in_catalog(u.lfn)) for u in job.uses)
        if not pending and all(id(c) in removed for c in job.children):
            removed.add(id(job))
    gone = [j for j in wf.jobs if id(j) in removed]
    kept = [j for j in wf.jobs if id(j) not in removed]
    for job in kept:
        job.parents = [p for p in job.parents if id(p) not in removed]
        job.children = [c for c in job.children if id(c) not in removed]
    for k, job in enumerate(kept):
        job.index = k
    wf.jobs = kept
    return gone
