"""Pegasus' hierarchical workflows: a ``pegasusWorkflow`` job is a sub-workflow, planned when it becomes ready.

Pegasus plans such a job's workflow at run time (a pegasus-plan PRE script,
``--deferred``), since its file may be written by a job before it, and runs
it as a nested DAGMan. pilot does the same without HTCondor: the job becomes
a cluster of its own (kind ``subworkflow``), never clustered with others,
and when its parents are done ``pilot submit`` plans the workflow into a
nested submit directory and drives it with a nested ``pilot submit``.

What the plan fixes now, so that the driver needs no planner:

- where the workflow file will be: its replica (a local path, which must
  exist now), or, when a job of this workflow writes it, that job's
  directory on the site's shared scratch (it is read there at run time);
- the nested submit directory, ``<file stem>_<job id>.000`` beside the
  clusters: pegasus-monitord follows a sub-workflow into the directory named
  by its job's ``_CONDOR_DAGMAN_LOG`` with ``.NNN`` added, and falls back to
  ``.000`` (Pegasus' rescue mode, which a retry here is: the nested run
  resumes, as a sub-workflow does without ``--force-replan``);
- the ``pilot plan`` options: the job's own pegasus-plan arguments (those
  pilot has; any other is refused now, naming it), else the parent's
  ``--cluster``, ``--output-sites`` and ``--cleanup``; the parent's
  properties (``--conf``, as Pegasus passes its submit directory's
  properties down) and catalog files; and, as Pegasus passes its cache file
  (PM-1766), a replica file of the job's inputs that jobs of this workflow
  write, in the parent's directory (``--cache``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from pilot.contracts.clusters import SubworkflowSpec
from pilot.errors import ConfigError
from pilot.planner import replicas
from pilot.planner.datalayout import DataLayout
from pilot.planner.model import Job, JobType, SubJob, Workflow
from pilot.planner.yamlvalues import fail
from pilot.util.safeopen import make_dir, open_file

CACHE_SUFFIX = ".cache.yml"

# pegasus-plan options a sub-workflow job may pass, and the pilot plan option each becomes (None: dropped,
# as it changes only how much the planner logs).
WITH_VALUE = {
    "--cluster": "--cluster",
    "-C": "--cluster",
    "--output-sites": "--output-sites",
    "--output-site": "--output-sites",
    "-o": "--output-sites",
    "--cleanup": "--cleanup",
    "--conf": "--conf",
    "--cache": "--cache",
    "-c": "--cache",
    "--sites": None,
    "-s": None,
}
PATHS = ("--conf", "--cache")  # made absolute from where the parent is planned
FLAGS = {
    "--force": "--force",
    "-f": "--force",
    "--verbose": None,
    "-v": None,
    "--quiet": None,
    "-q": None,
    "--submit": None,
    "-S": None,
}  # --submit: a sub-workflow is run once planned in any case
REFUSED_HINT = (
    "pilot plans a sub-workflow into a directory of its own under the parent's submit directory "
    "and runs it on the parent's sites; options it takes: " + ", ".join(sorted({*WITH_VALUE, *FLAGS}))
)


def plan_options(lfn: str, words: list[str], path: str, ypath: str) -> SubJob:
    """A pegasusWorkflow job's file and arguments (pegasus-plan options), these as pilot plan options."""
    out: list[str] = []
    sites: tuple[str, ...] = ()
    k = 0
    while k < len(words):
        word = words[k]
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        if (
            name.startswith("-") and not name.startswith("--") and len(name) > 2 and set(name[1:]) <= {"v", "q"}
        ) or name.startswith("-X"):
            k += 1  # -vvv: how much the planner logs; -X: options of pegasus-plan's JVM, which pilot has not
            continue
        if name in FLAGS and not eq:
            flag = FLAGS[name]
            if flag:
                out.append(flag)
            k += 1
            continue
        if name in WITH_VALUE:
            if eq:
                value = inline
            elif k + 1 < len(words):
                value, k = words[k + 1], k + 1
            else:
                raise fail(path, f"{ypath}.arguments", f"{name} needs a value")
            k += 1
            option = WITH_VALUE[name]
            if option is None:
                sites = tuple(s.strip() for s in value.split(",") if s.strip())
            else:
                out += [option, value]
            continue
        raise fail(
            path,
            f"{ypath}.arguments",
            f"pegasus-plan option {word!r} of a sub-workflow is not supported: " + REFUSED_HINT,
        )
    return SubJob(lfn=lfn, options=tuple(out), sites=sites)


@dataclass(frozen=True)
class SubPlan:
    """A sub-workflow job as the plan leaves it for pilot submit."""

    workflow: str  # absolute path of its workflow file (maybe not there yet: a parent job writes it)
    submit_dir: str  # nested submit directory, relative to the parent's
    plan_args: tuple[str, ...]
    cache: list[tuple[str, str]]  # (lfn, path) of its inputs that jobs of the parent write
    site: str  # the site handle those paths are on


def prepare(wf: Workflow, lay: DataLayout, exec_handle: str, defaults: list[str]) -> dict[int, SubPlan]:
    """Each sub-workflow job's SubPlan (by job index): its file found, its options checked.
    ``defaults``: the parent's pilot plan options the job's own override (see the module doc)."""
    dax = JobType.DAX
    subjobs = [job for job in wf.jobs if job.type is dax and job.subworkflow is not None]
    if not subjobs:
        return {}  # most workflows: no pass over a million jobs' files
    writers = {u.lfn: job for job in wf.jobs for u in job.uses if u.writes}
    out: dict[int, SubPlan] = {}
    for job in subjobs:
        sub = job.subworkflow
        assert sub is not None
        other = [s for s in sub.sites if s != exec_handle]
        if other:
            raise ConfigError(
                f"{job.where}: --sites {','.join(sub.sites)}: a sub-workflow runs on its parent's site "
                f"({exec_handle}); drop --sites from its arguments, or plan the sub-workflow on its own"
            )
        if sub.lfn in writers:
            workflow = lay.workdir.file(sub.lfn)[0]
            if id(job) not in _descendants(writers[sub.lfn]):
                raise ConfigError(
                    f"{job.where}: its workflow file {sub.lfn!r} is written by {writers[sub.lfn].where}, "
                    "which is not its parent: add the dependency, so the file exists when it is planned"
                )
        else:
            workflow = _replica_path(wf, job, sub.lfn)
        given = {o for o in sub.options if o.startswith("--")}
        args = [os.path.abspath(a) if k and sub.options[k - 1] in PATHS else a for k, a in enumerate(sub.options)]
        for k in range(0, len(defaults), 2):
            if defaults[k] not in given:
                args += defaults[k : k + 2]
        cache = [
            (u.lfn, lay.workdir.file(u.lfn)[0]) for u in job.uses if u.reads and u.lfn in writers and u.lfn != sub.lfn
        ]
        out[job.index] = SubPlan(workflow, nested_dir(job), tuple(args), cache, exec_handle)
    return out


def nested_dir(job_or_cluster) -> str:
    """The nested submit directory of a sub-workflow job (or its cluster), relative to the parent's."""
    job = job_or_cluster.jobs[0] if hasattr(job_or_cluster, "jobs") else job_or_cluster
    return f"{job.name}_{job.id}.000"


def _descendants(job: Job) -> set[int]:
    seen: set[int] = set()
    todo = list(job.children)
    while todo:
        j = todo.pop()
        if id(j) not in seen:
            seen.add(id(j))
            todo += j.children
    return seen  # ids of the jobs below ``job``


def _replica_path(wf: Workflow, job: Job, lfn: str) -> str:
    """The sub-workflow file from the replica catalog: a local copy (pilot submit reads it on this host)."""
    copies = replicas.find(wf.catalogs, lfn)
    for copy in copies:
        path = replicas.path_of(replicas.url_of(copy.pfn))
        if path is not None and os.path.isfile(path):
            return os.path.abspath(path)
    named = ", ".join(c.pfn for c in copies) or "no replica"
    raise ConfigError(
        f"{job.where}: sub-workflow file {lfn!r} is not a file here ({named}): add its path to the "
        "replica catalog (site local), or let a parent job write it"
    )


def write(cdir: str, name: str, plan: SubPlan) -> str:
    """The job's directory and its cache file; returns the nominal DAG path (``<dag>.result`` is where the nested
    pilot submit says how it ended)."""
    make_dir(cdir)
    if plan.cache:
        lines = ["pegasus: '5.0'", "replicas:"]
        for lfn, path in plan.cache:
            lines += [
                f"- lfn: {json.dumps(lfn)}",
                f"  pfns: [{{site: {json.dumps(plan.site)}, pfn: {json.dumps(path)}}}]",
            ]
        with open_file(os.path.join(cdir, name + CACHE_SUFFIX), "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
    return os.path.join(cdir, name + ".dag")


def spec_of(plan: SubPlan, cdir: str, submit_dir: str) -> SubworkflowSpec:
    """The ``subworkflow:`` entry of clusters.yml for the job whose directory is ``cdir``."""
    args = list(plan.plan_args)
    if plan.cache:
        args += ["--cache", os.path.join(os.path.relpath(cdir, submit_dir), os.path.basename(cdir) + CACHE_SUFFIX)]
    return SubworkflowSpec(
        workflow=plan.workflow, submit_dir=os.path.join(submit_dir, plan.submit_dir), plan_args=tuple(args)
    )
