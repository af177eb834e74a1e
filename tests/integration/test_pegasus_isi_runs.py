"""Stand-in variants of the workflows pegasus-isi publishes, run end to end with pilot submit --site local.

A copy of each golden folder (tests/golden/pegasus-isi) is made runnable here, and nothing else of it
changes: the generator's directory (/tmp/pegasus-isi/<name>) becomes the copy's, so scratch, storage and
replicas lie under the test's directory; every pfn of the transformation catalog becomes one stand-in script,
run on the host (a transformation's container is dropped: the test machine has no Singularity); every input
replica becomes a small file. The stand-in knows each job by the task name pilot run gives it ($PMC_TASK,
``<transformation>_<job id>``): from a map the test writes from the workflow it reads the job's declared
inputs (each must be the replica or the output of the job that made it, so a file staged from the wrong place
fails the job) and writes its declared outputs, and notes the job's id in a ledger.

The run then shows every job ran once, every input was staged in, every output marked stageOut is in the
output site's storage directory, and those marked registerReplica too are in the output replica catalog.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.conftest import mpiexec
from tests.pegasus_isi import BY_NAME, job_ids, workflow

pytestmark = [pytest.mark.mpi]
PILOT = [sys.executable, "-m", "pilot"]
GENERATED_IN = "/tmp/pegasus-isi"  # where the generators ran (tests/golden/pegasus-isi/README.md)

STANDIN = """#!{python}
import json, os, sys

jobs = json.load(open({map!r}))
task = os.environ["PMC_TASK"]
ids = [i for i in jobs if task == i or task.endswith("_" + i)]
if not ids:
    sys.exit("stand-in: no job of the workflow is task " + task)
job = max(ids, key=len)
for lfn in jobs[job]["inputs"]:
    with open(lfn) as f:
        text = f.read()
    if text not in (jobs[job]["expect"][lfn],):
        sys.exit("stand-in: " + job + ": input " + lfn + " holds " + repr(text))
for lfn in jobs[job]["outputs"]:
    with open(lfn, "w") as f:
        f.write(job + " wrote " + lfn + "\\n")
with open({ledger!r}, "a") as f:
    f.write(job + "\\n")
"""


def _uses(job: dict, kind: str) -> list[dict]:
    return [use for use in job.get("uses", []) if use["type"] == kind]


def _replica_content(lfn: str) -> str:
    return f"replica {lfn}\n"


class StandIn:
    """The copy of a golden folder, made runnable with stand-ins (the module's docstring says how)."""

    def __init__(self, name: str, where: Path) -> None:
        self.folder = BY_NAME[name].copy(where)
        self.published = BY_NAME[name]
        for path in self.folder.glob("*.yml"):
            path.write_text(path.read_text().replace(f"{GENERATED_IN}/{name}", str(self.folder)))
        self.wf = workflow(self.folder)
        self.ledger = where / "ledger.txt"
        self._write_map(where / "jobs.json")
        script = where / "standin.py"
        script.write_text(STANDIN.format(python=sys.executable, map=str(where / "jobs.json"), ledger=str(self.ledger)))
        script.chmod(0o755)
        self._catalog("transformations.yml", "transformationCatalog", lambda tc: self._stand_in_executables(tc, script))
        self._catalog("replicas.yml", "replicaCatalog", self._stand_in_replicas)

    def _write_map(self, path: Path) -> None:
        made_by = {use["lfn"]: job["id"] for job in self.wf["jobs"] for use in _uses(job, "output")}
        jobs = {}
        for job in self.wf["jobs"]:
            inputs = [use["lfn"] for use in _uses(job, "input")]
            expect = {lfn: (f"{made_by[lfn]} wrote {lfn}\n" if lfn in made_by else _replica_content(lfn))
                      for lfn in inputs}
            jobs[job["id"]] = {"inputs": inputs, "expect": expect,
                               "outputs": [use["lfn"] for use in _uses(job, "output")]}
        path.write_text(json.dumps(jobs))

    def _catalog(self, file: str, key: str, change) -> None:
        """Change the catalog where the generator put it: its own file, else inline in the workflow."""
        path = self.folder / file
        if path.exists():
            catalog = yaml.safe_load(path.read_text())
            change(catalog)
            path.write_text(yaml.safe_dump(catalog))
        elif key in self.wf:
            change(self.wf[key])
            (self.folder / "workflow.yml").write_text(yaml.safe_dump(self.wf))

    @staticmethod
    def _stand_in_executables(tc: dict, script: Path) -> None:
        for tx in tc.get("transformations", []):
            for site in tx["sites"]:
                site["pfn"] = str(script)
                site.pop("container", None)
        tc.pop("containers", None)

    def _stand_in_replicas(self, rc: dict) -> None:
        for replica in rc.get("replicas", []):
            for pfn in replica["pfns"]:
                path = Path(pfn["pfn"].removeprefix("file://"))
                assert path.is_relative_to(self.folder), f"replica {replica['lfn']} outside the copy: {path}"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(_replica_content(replica["lfn"]))

    def storage(self) -> Path:
        """The output site's (local's) storage directory in the site catalog."""
        sites = self.wf.get("siteCatalog") or yaml.safe_load((self.folder / "sites.yml").read_text())
        local = next(site for site in sites["sites"] if site["name"] == "local")
        return Path(next(d["path"] for d in local["directories"] if d["type"] in ("localStorage", "sharedStorage")))

    def outputs(self, *, registered: bool) -> set[str]:
        """The outputs marked stageOut (and registerReplica, where ``registered``)."""
        return {use["lfn"] for job in self.wf["jobs"] for use in _uses(job, "output")
                if use.get("stageOut", True) and (use.get("registerReplica", True) or not registered)}

    def submit(self, sub: Path, cluster: str) -> subprocess.CompletedProcess:
        if mpiexec() is None:
            pytest.skip("no mpiexec (pip install mpich)")
        # monitord is left out: rosetta's properties send its events to a public AMQP server.
        args = [*PILOT, "submit", "workflow.yml", "--site", "local", "--sites", self.published.sites,
                "--cluster", cluster, "--dir", str(sub), "--poll", "0.2", "--no-monitord"]
        return subprocess.run(args, cwd=self.folder, capture_output=True, text=True, timeout=300)


def registered_lfns(sub: Path) -> set[str]:
    lfns: set[str] = set()
    for db_path in sub.glob("*.replicas.db"):
        db = sqlite3.connect(db_path)
        lfns |= {lfn for (lfn,) in db.execute("select lfn from rc_lfn")}
        db.close()
    return lfns


@pytest.mark.parametrize(("name", "cluster"), [("1000genome", "horizontal"), ("rosetta", "whole"),
                                               ("earthquake", "whole"), ("casa-wind", "horizontal")])
def test_stand_in_of_a_published_workflow_runs_each_job_once_and_moves_its_files(tmp_path, name, cluster):
    run = StandIn(name, tmp_path)
    sub = tmp_path / "sub"
    res = run.submit(sub, cluster)
    assert res.returncode == 0, res.stdout + res.stderr
    jobs = job_ids(run.folder)
    assert Counter(run.ledger.read_text().split()) == Counter(jobs)
    staged = {p.name: p.read_text() for p in run.storage().rglob("*") if p.is_file()}
    wanted = run.outputs(registered=False)
    assert wanted and set(staged) == wanted
    assert all(text.endswith(f" wrote {lfn}\n") for lfn, text in staged.items())
    assert registered_lfns(sub) == run.outputs(registered=True)
