"""The workflows pegasus-isi publishes, kept in tests/golden/pegasus-isi as their generators write them.

What the planner and integration tests share: where each one is, the execution site its generator
plans for (what it passes to pegasus-plan --sites), the site config keys pilot's ``local`` site needs
to plan it, and which of the workflow's jobs a submit directory plans.
"""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml

GOLDEN = Path(__file__).resolve().parent / "golden" / "pegasus-isi"


@dataclass(frozen=True)
class Published:
    name: str  # its folder under GOLDEN
    sites: str  # the execution site its generator plans for (pegasus-plan --sites)
    # --set pairs: where its transformations run in Singularity containers, pilot's local site must say
    # it has a runtime for them (pilot refuses to run such a job on the host), as a site with Apptainer would.
    sets: tuple[str, ...] = field(default=())
    workflow: str = "workflow.yml"  # where in its folder the generator writes the workflow

    def copy(self, where: Path) -> Path:
        """A copy of its folder (the planner runs in the workflow's directory, which the test must not write)."""
        return Path(shutil.copytree(GOLDEN / self.name, where / self.name))

    def plan_args(self) -> list[str]:
        """The workflow and the options that plan it as its generator's pegasus-plan would, on pilot's local site."""
        sets = [arg for pair in self.sets for arg in ("--set", pair)]
        return [self.workflow, "--site", "local", "--sites", self.sites, *sets]


CONTAINERS = ("container_runtimes=singularity",)

PUBLISHED = [
    Published("1000genome", "local"),
    Published("rosetta", "condorpool"),
    Published("casa-wind", "condorpool", CONTAINERS),
    Published("earthquake", "condorpool", CONTAINERS),
    Published("lung-instance-segmentation", "condorpool", CONTAINERS),
    Published("montage", "local", workflow="data/montage-workflow.yml"),
]
BY_NAME = {p.name: p for p in PUBLISHED}


def workflow(folder: Path, name: str = "workflow.yml") -> dict:
    return yaml.safe_load((folder / name).read_text())


def job_ids(folder: Path, name: str = "workflow.yml") -> list[str]:
    """The ids of the workflow's jobs, in its order."""
    return [job["id"] for job in workflow(folder, name)["jobs"]]


def planned_ids(submit_dir: Path) -> Counter[str]:
    """How often each job is a task of the plan's cluster DAGs: the ``#@ N TRANSFORMATION ID`` line the planner
    writes above each task names the workflow's job (a data job, the name the planner gave it)."""
    seen: Counter[str] = Counter()
    for dag in submit_dir.glob("*/*.dag"):
        for line in dag.read_text().splitlines():
            if line.startswith("#@ "):
                seen[line.split()[-1]] += 1
    return seen
