"""Stand-in variants of the workflows pegasus-isi publishes (tests/golden/pegasus-isi), made runnable anywhere.

A copy of each golden folder is made runnable, and nothing else of it changes: the generator's directory
(/tmp/pegasus-isi/<name>) becomes the copy's, so scratch, storage and replicas lie under the copy's directory;
every pfn of the transformation catalog becomes one stand-in script, run on the host (StandIn drops a
transformation's container: a test machine has no Singularity); every input replica becomes a small file. The
stand-in knows each job by the task name pilot run gives it ($PMC_TASK, ``<transformation>_<job id>``): from a
map written from the workflow it reads the job's declared inputs (each must be the replica or the output of the
job that made it, so a file staged from the wrong place fails the job) and writes its declared outputs, and
notes the job's id in a ledger.

CasaWindInImage keeps casa-wind's containers: their image becomes a busybox image built here, offline, which alone
holds a shell stand-in at each containerized transformation's installed pfn.

No pytest here: the laptop image's container-demo.sh runs casa-wind's image variant with
``python -m tests.standin casa-wind DIR`` from the repository's tests/ mounted read-only, so that the image holds
no test code.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from pilot.contracts.jobstate import Event, jobstate_path, read_jobstate
from tests import busybox
from tests.pegasus_isi import BY_NAME, workflow

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


def uses(job: dict, kind: str) -> list[dict]:
    return [use for use in job.get("uses", []) if use["type"] == kind]


def replica_content(lfn: str) -> str:
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
        made_by = {use["lfn"]: job["id"] for job in self.wf["jobs"] for use in uses(job, "output")}
        jobs = {}
        for job in self.wf["jobs"]:
            inputs = [use["lfn"] for use in uses(job, "input")]
            expect = {
                lfn: (f"{made_by[lfn]} wrote {lfn}\n" if lfn in made_by else replica_content(lfn)) for lfn in inputs
            }
            jobs[job["id"]] = {
                "inputs": inputs,
                "expect": expect,
                "outputs": [use["lfn"] for use in uses(job, "output")],
            }
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

    def _stand_in_executables(self, tc: dict, script: Path) -> None:
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
                path.write_text(replica_content(replica["lfn"]))

    def storage(self) -> Path:
        """The output site's (local's) storage directory in the site catalog."""
        sites = self.wf.get("siteCatalog") or yaml.safe_load((self.folder / "sites.yml").read_text())
        local = next(site for site in sites["sites"] if site["name"] == "local")
        return Path(next(d["path"] for d in local["directories"] if d["type"] in ("localStorage", "sharedStorage")))

    def outputs(self, *, registered: bool) -> set[str]:
        """The outputs marked stageOut (and registerReplica, where ``registered``)."""
        return {
            use["lfn"]
            for job in self.wf["jobs"]
            for use in uses(job, "output")
            if use.get("stageOut", True) and (use.get("registerReplica", True) or not registered)
        }

    def staged_wrong(self) -> list[str]:
        """What is wrong with the outputs staged out: each marked stageOut must be in storage, as its job wrote it."""
        staged = {p.name: p.read_text() for p in self.storage().rglob("*") if p.is_file()}
        wanted = self.outputs(registered=False)
        wrong = [f"{lfn}: not staged out" for lfn in sorted(wanted - set(staged))]
        wrong += [f"{lfn}: staged out but not an output marked stageOut" for lfn in sorted(set(staged) - wanted)]
        return wrong + [
            f"{lfn}: holds {text!r}"
            for lfn, text in sorted(staged.items())
            if lfn in wanted and not text.endswith(f" wrote {lfn}\n")
        ]


Build = Callable[[str, busybox.Files], Path]  # an image's name and files -> the docker-archive tar holding them


class CasaWindInImage(StandIn):
    """casa-wind's stand-in with its container kept: the published image (docker://pegasus/casa-wind) becomes a
    busybox image ``build`` makes, holding at each containerized transformation's installed pfn a shell stand-in
    for its one job, which checks the job's inputs and writes its outputs as the host's stand-in does; gunzip,
    installed on the host, runs the host's stand-in."""

    def __init__(self, where: Path, build: Build) -> None:
        self.build = build
        super().__init__("casa-wind", where)

    def _stand_in_executables(self, tc: dict, script: Path) -> None:
        files = {}
        for tx in tc["transformations"]:
            for site in tx["sites"]:
                if site.get("container"):
                    files[site["pfn"]] = (self._shell_stand_in(tx["name"]), 0o755)
                else:
                    site["pfn"] = str(script)
        archive = self.build("casa-wind", files)
        for container in tc["containers"]:
            container.update({"type": "docker", "image": f"file://{archive}", "image.site": "local"})
        self.in_image = sorted(files)

    def _shell_stand_in(self, transformation: str) -> str:
        jobs = [job for job in self.wf["jobs"] if job["name"] == transformation]
        assert len(jobs) == 1, f"{transformation}: the shell stand-in knows one job, the workflow has {len(jobs)}"
        job, made_by = jobs[0], {u["lfn"]: j["id"] for j in self.wf["jobs"] for u in j["uses"] if u["type"] == "output"}
        lines = ["#!/bin/sh", "set -e"]
        for use in uses(job, "input"):
            lfn = use["lfn"]
            expect = f"{made_by[lfn]} wrote {lfn}" if lfn in made_by else f"replica {lfn}"
            lines.append(
                f'[ "$(cat {shlex.quote(lfn)})" = {shlex.quote(expect)} ] || '
                f'{{ echo "stand-in: {job["id"]}: input {lfn} is not what was staged" >&2; exit 1; }}'
            )
        for use in uses(job, "output"):
            lines.append(
                f"printf '%s\\n' {shlex.quote(job['id'] + ' wrote ' + use['lfn'])} > {shlex.quote(use['lfn'])}"
            )
        return "\n".join(lines) + "\n"

    def on_host(self) -> list[str]:
        """The jobs whose transformation is installed on the host (gunzip), which the host's stand-in runs."""
        return [job["id"] for job in self.wf["jobs"] if job["name"] == "gunzip"]

    def submit_args(self, sub: Path) -> list[str]:
        """pilot submit's arguments (after ``pilot``) that run it on the local site with podman."""
        return [
            "submit",
            "workflow.yml",
            "--site",
            "local",
            "--sites",
            self.published.sites,
            "--set",
            "container_runtimes=podman",
            "--cluster",
            "horizontal",
            "--dir",
            str(sub),
            "--poll",
            "0.2",
            "--no-monitord",
        ]


def main() -> int:
    """casa-wind's image variant run end to end with pilot submit on podman, in ``where``; podman's configuration
    and store are the environment's. Exits 1 with what went wrong: the failed clusters' stderr (their tasks'), or
    what is wrong with the outputs."""
    parser = argparse.ArgumentParser(prog="python -m tests.standin", description=main.__doc__)
    parser.add_argument("workflow", choices=["casa-wind"])
    parser.add_argument("where", type=Path, help="an empty directory for the copy, its image and its run")
    where = parser.parse_args().where.resolve()
    where.mkdir(parents=True, exist_ok=True)
    run = CasaWindInImage(where, lambda name, files: busybox.podman_archive(where, name, files))
    sub = where / "submit"
    res = subprocess.run([sys.executable, "-m", "pilot", *run.submit_args(sub)], cwd=run.folder, timeout=600)
    if res.returncode != 0:
        failed = {line.job for line in read_jobstate(jobstate_path(str(sub))) if line.event == Event.JOB_FAILURE.value}
        for err in sorted(p for cluster in failed for p in (sub / cluster).glob("*.err.*") if p.is_file()):
            print(
                f"--- {err.relative_to(sub)}",
                *err.read_text(errors="replace").splitlines()[-20:],
                sep="\n",
                file=sys.stderr,
            )
        return 1
    ran = sorted(run.ledger.read_text().split()) if run.ledger.exists() else []
    wrong = run.staged_wrong() + (
        []
        if ran == sorted(run.on_host())
        else [f"the host's stand-in ran {ran}, not the jobs installed on the host only"]
    )
    for line in wrong:
        print(f"casa-wind: {line}", file=sys.stderr)
    if not wrong:
        print(
            f"casa-wind: its {len(run.wf['jobs']) - len(ran)} container jobs ran in their image on podman, "
            f"{len(ran)} on the host, and its {len(run.outputs(registered=False))} outputs were staged out"
        )
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
