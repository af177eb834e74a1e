"""nonsharedfs and condorio: which tasks of a cluster run in a directory of their own, and with which files.

In those data configurations Pegasus runs each job through PegasusLite in a directory of the worker node's
own, its inputs brought in and its outputs taken out. pilot keeps the workflow's directory on the shared
scratch as the place files are staged to and from (the part of Pegasus' staging site), and runs each
compute task in a directory of its own on node-local storage (pilot.runtime.taskdir): the planner writes
each cluster's ``<dag>.taskfiles`` (pilot.contracts.taskfiles) and gives its ``pilot run`` the options
that read it. So the shared file system sees a link and a rename per file a task declares, not every
temporary file the task makes.

What stays in the workflow's directory: the data jobs (create-dir, stage-in/out, chmod, registration,
cleanup), which work on that directory itself, and a job in a container, whose runtime mounts the
workflow's directory as the job's working directory (planner.containers).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pilot.contracts.taskfiles import taskfiles_path, write_taskfiles
from pilot.planner.datalayout import SHAREDFS, DataLayout
from pilot.planner.model import Cluster, JobType
from pilot.util.safeopen import make_dir

_COMPUTE = JobType.COMPUTE


@dataclass(frozen=True)
class TaskDirPlan:
    """What a plan gives the clusters whose tasks run in directories of their own."""

    local_scratch: str | None  # --local-scratch (None: the node's $TMPDIR, else /tmp)

    def write(self, dag_file: str, cluster: Cluster) -> tuple[str, ...]:
        """Write the cluster's task files beside its DAG; the ``pilot run`` options that read them, or ()
        where no task of the cluster runs in a directory of its own (a data job's cluster)."""
        lists = [
            (
                job.task_id,
                [u.lfn for u in job.uses if u.reads],
                [u.lfn for u in job.uses if u.writes and not u.optional],
                [u.lfn for u in job.uses if u.writes and u.optional],
            )
            for job in cluster.jobs
            if job.type is _COMPUTE and job.command is None and job.wrapper is None
        ]
        if not lists:
            return ()
        path = taskfiles_path(dag_file)
        make_dir(os.path.dirname(path))
        write_taskfiles(path, lists)
        options = ("--task-files", os.path.basename(path))
        return options + ("--local-scratch", self.local_scratch) if self.local_scratch else options


def plan_for(lay: DataLayout) -> TaskDirPlan | None:
    """The task directories of a plan (None: sharedfs, every task runs in the workflow's directory)."""
    if lay.configuration == SHAREDFS:
        return None
    return TaskDirPlan(lay.local_scratch)
