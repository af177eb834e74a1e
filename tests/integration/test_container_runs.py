"""Container jobs run for real, in images built here, with pilot submit --site local on podman and docker.

A Pegasus.api workflow's job runs in a docker container whose image is a
``file://`` docker-archive tar built during the test (tests/containers.py,
PrivatePodman): the stage-in job stages the image once into the
workflow's directory, checks its checksum and loads it into the site's
runtime: podman (with the repository's containers.conf and a store of the
test's own), or a dockerd the test session starts with a private root
(tests/containers.py, ``dockerd``; pilot finds it by DOCKER_HOST), where the
load tags the image with the name the plan gave it. The job runs its staged
executable at its path inside the container (/srv), reads a file that only
the image holds, an input staged in beside it and its env profile, and
writes a declared output, which is staged out. An image that is not there,
or that the runtime cannot load, fails the stage-in job in one line naming
the image (and the runtime's message), and the job never starts.

casa-wind, one of the workflows pegasus-isi publishes, runs as its stand-in
(tests/standin.py) with its container kept: the jobs of its
containerized transformations run in a busybox image built here, which alone
holds their installed pfns.

The same workflow with a singularity container whose image is a ``file://``
SquashFS image (named ``.sif``, a suffix Pegasus takes for a singularity
image) runs on ``container_runtimes=apptainer``. apptainer cannot be
installed on the test machines, so this runs the stand-in tests/bin/apptainer,
first on PATH, which maps the apptainer command lines pilot writes onto
Charliecloud's ch-run with the same SquashFS image; that the line is
apptainer's as Pegasus writes it, word for word, is checked by
tests/planner/test_containers.py. A singularity container's SquashFS image
is also staged by its planned stage-in job, run as planned, and checked
against its checksum.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pilot.dag import read_dag
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site
from tests.conftest import mpiexec
from tests.containers import (  # noqa: F401 - fixtures the tests take by name
    IMAGE_TEXT,
    ONLY_IN_IMAGE,
    Runtime,
    apptainer_standin,
    docker_archive,
    dockerd,
    podman,
    rootfs,
    squashfs,
)
from tests.containers import PrivatePodman as Podman
from tests.standin import CasaWindInImage

api = pytest.importorskip("Pegasus.api")

PILOT = [sys.executable, "-m", "pilot"]
MARKER = "this line is only in the image\n"
SCRIPT = '#!/bin/sh\nset -e\ncat /etc/only-in-image "$1" > "$2"\necho "$GREETING" >> "$2"\n'


@pytest.fixture
def own_podman(tmp_path):
    """A podman of the test's own, which builds the test's images (and runs them on a podman site)."""
    runtime = Podman(tmp_path / "podman")
    yield runtime
    runtime.close()


RUNTIMES = ["podman", "docker"]


@pytest.fixture(params=RUNTIMES)
def site_runtime(request, own_podman) -> Runtime:
    """The runtime the site offers (container_runtimes) and the environment pilot submit gets for it."""
    if request.param == "docker":
        return request.getfixturevalue("dockerd")
    return Runtime("podman", own_podman.env, "")


def container_workflow(where: Path, image: str, sha256: str | None = None, kind=api.Container.DOCKER) -> Path:
    """One job in a container (docker's, or ``kind``): a staged script that joins the image's file and its input
    into its output."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "join.sh").write_text(SCRIPT)
    (where / "input.txt").write_text("staged in\n")
    box = api.Container("box", kind, image=image, image_site="local", checksum={"sha256": sha256} if sha256 else None)
    tc = (
        api.TransformationCatalog()
        .add_containers(box)
        .add_transformations(
            api.Transformation(
                "join", site="local", pfn=f"file://{where / 'join.sh'}", is_stageable=True, container=box
            )
        )
    )
    rc = api.ReplicaCatalog().add_replica("local", "input.txt", f"file://{where / 'input.txt'}")
    out = api.File("out.txt")
    job = api.Job("join", _id="j1").add_args("input.txt", out).add_inputs(api.File("input.txt"))
    job.add_env(GREETING="hello")
    job.add_outputs(out, stage_out=True, register_replica=False)
    wf = api.Workflow("boxed").add_transformation_catalog(tc).add_replica_catalog(rc).add_jobs(job)
    sc = api.SiteCatalog().add_sites(
        api.Site("local").add_directories(
            api.Directory(api.Directory.SHARED_SCRATCH, str(where / "scratch")).add_file_servers(
                api.FileServer(f"file://{where / 'scratch'}", api.Operation.ALL)
            ),
            api.Directory(api.Directory.LOCAL_STORAGE, str(where / "output")).add_file_servers(
                api.FileServer(f"file://{where / 'output'}", api.Operation.ALL)
            ),
        )
    )
    wf.add_site_catalog(sc)
    wf.write(str(where / "workflow.yml"))
    return where / "workflow.yml"


def submit(runtime: Runtime, where: Path, *extra: str) -> subprocess.CompletedProcess:
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    args = [
        *PILOT,
        "submit",
        "workflow.yml",
        "--site",
        "local",
        "--set",
        f"container_runtimes={runtime.name}",
        "--dir",
        str(where / "submit"),
        "--poll",
        "0.2",
        "--no-monitord",
        *extra,
    ]
    return subprocess.run(
        args, cwd=where, env={**os.environ, **runtime.env}, capture_output=True, text=True, timeout=300
    )


@pytest.mark.mpi
@pytest.mark.containers
def test_a_docker_container_job_runs_in_its_staged_image_and_its_output_is_staged_out(
    tmp_path, own_podman, site_runtime
):
    archive = own_podman.build("joiner", {"/etc/only-in-image": (MARKER, 0o644)})
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    where = tmp_path / "wf"
    container_workflow(where, f"file://{archive}", sha)
    res = submit(site_runtime, where)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (where / "output" / "out.txt").read_text() == MARKER + "staged in\n" + "hello\n"  # + the job's env
    assert not Path("/etc/only-in-image").exists()  # the file was read inside the image, not on this host
    dags = "\n".join(path.read_text() for path in (where / "submit").rglob("*.dag"))
    task = next(line for line in dags.splitlines() if line.startswith("TASK join_j1 "))
    if site_runtime.name == "podman":
        assert " docker-archive:" in task and "/box /srv/join " in task  # podman ran the staged copy of the image
    else:  # docker ran the image its stage-in job loaded and tagged with the plan's name for it
        image = next(word for word in task.split() if word.startswith("localhost/pilot-box:"))
        assert f" {image} /srv/join " in task
        tags = subprocess.run(
            ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"],
            capture_output=True,
            text=True,
            env={**os.environ, **site_runtime.env},
            timeout=60,
            check=True,
        ).stdout
        assert image in tags.split()


@pytest.mark.mpi
@pytest.mark.containers
def test_a_singularity_container_job_runs_in_its_staged_squashfs_image_on_the_apptainer_stand_in(
    tmp_path, apptainer_standin
):
    """apptainer here is the test stand-in tests/bin/apptainer (ch-run under apptainer's command line), first on
    PATH; the image is a SquashFS file with a .sif name, staged into the workflow's directory as box.sif."""
    sif = tmp_path / "box.sif"
    shutil.copyfile(apptainer_standin.image, sif)
    where = tmp_path / "wf"
    container_workflow(where, f"file://{sif}", hashlib.sha256(sif.read_bytes()).hexdigest(), api.Container.SINGULARITY)
    res = submit(apptainer_standin, where)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (where / "output" / "out.txt").read_text() == IMAGE_TEXT + "staged in\n" + "hello\n"
    assert not Path(ONLY_IN_IMAGE).exists()  # the file was read inside the image, not on this host
    dags = "\n".join(path.read_text() for path in (where / "submit").rglob("*.dag"))
    task = next(line for line in dags.splitlines() if line.startswith("TASK join_j1 "))
    assert " apptainer exec --no-home --bind " in task  # the staged copy, in the job's directory (its cwd):
    assert task.endswith(":/srv --pwd /srv box.sif /srv/join input.txt out.txt")
    calls = Path(apptainer_standin.env["PILOT_APPTAINER_STANDIN_STATE"], "calls.log").read_text()
    assert "box.sif" in calls and "/srv/join" in calls  # the stand-in ran it (its instance, or the task's exec)


def stage_in_failure(where: Path) -> str:
    """What the cluster's tasks said on stderr (kept in the submit directory as <cluster>.err.<attempt>)."""
    return "\n".join(p.read_text(errors="replace") for p in (where / "submit").rglob("*.err.*") if p.is_file())


@pytest.mark.mpi
@pytest.mark.containers
@pytest.mark.parametrize("case", ["missing", "not an image"])
def test_an_image_that_is_not_there_or_cannot_be_loaded_fails_its_stage_in_job_in_one_line(
    tmp_path, site_runtime, case
):
    where = tmp_path / "wf"
    where.mkdir()
    image = where / "box.tar"
    if case == "not an image":
        image.write_text("not a docker archive\n")
    container_workflow(where, f"file://{image}")
    res = submit(site_runtime, where)
    assert res.returncode != 0
    assert not (where / "output" / "out.txt").exists()
    said = res.stdout + res.stderr + stage_in_failure(where)
    if case == "missing":
        assert f"container image file://{image}: no such file" in said, said
    else:
        assert f"container image file://{image}: {site_runtime.name} load failed: " in said, said


@pytest.mark.mpi
@pytest.mark.containers
def test_casa_winds_stand_in_runs_its_container_jobs_in_a_locally_built_image_on_podman(tmp_path, own_podman):
    run = CasaWindInImage(tmp_path, own_podman.build)
    assert all(not Path(pfn).exists() for pfn in run.in_image)  # only the image has them
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    res = subprocess.run(
        [*PILOT, *run.submit_args(tmp_path / "sub")],
        cwd=run.folder,
        env={**os.environ, **own_podman.env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(run.ledger.read_text().split()) == sorted(run.on_host())  # the others ran in the image
    assert run.staged_wrong() == []


@pytest.mark.parametrize("right", [True, False])
def test_a_squashfs_image_is_staged_by_the_planned_stage_in_job_and_checked_against_its_checksum(tmp_path, right):
    """The stage-in job of a singularity container's SquashFS image, run as planned (pegasus-transfer, the checksum
    check, the image check): the image lands once in the workflow's directory under Pegasus' name, or a wrong
    checksum fails the job in one line naming the copy."""
    mksquashfs = shutil.which("mksquashfs")
    if mksquashfs is None:
        pytest.skip("mksquashfs is not installed (apt-get install squashfs-tools)")
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "only-in-image").write_text(MARKER)
    sif = tmp_path / "img.sif"
    subprocess.run([mksquashfs, str(root), str(sif), "-quiet", "-noappend"], check=True, timeout=60)
    sha = hashlib.sha256(sif.read_bytes()).hexdigest() if right else "0" * 64
    box = api.Container("img", api.Container.SINGULARITY, image=f"file://{sif}", checksum={"sha256": sha})
    tc = (
        api.TransformationCatalog()
        .add_containers(box)
        .add_transformations(api.Transformation("cat", site="local", pfn="/bin/cat", is_stageable=False, container=box))
    )
    wf = api.Workflow("sq").add_transformation_catalog(tc).add_jobs(api.Job("cat", _id="j").add_args("/etc/x"))
    wf.write(str(tmp_path / "sq.yml"))
    result = plan(
        PlanRequest(
            workflow=str(tmp_path / "sq.yml"),
            site=load_site("local", {"container_runtimes": "apptainer"}),
            cluster=["whole"],
            submit_dir=str(tmp_path / "submit"),
        )
    )
    tasks = read_dag(result.emitted[0].dag).tasks
    for name in sorted(tasks, key=lambda n: not n.startswith("create_dir")):  # the directory first
        if not name.startswith(("create_dir", "stage_in")):
            continue
        done = subprocess.run(tasks[name].argv, capture_output=True, text=True, timeout=120)
        staged = next(Path(w.rsplit(":", 1)[0]) for w in tasks["cat_j"].argv if w.endswith(":/srv")) / "img.sif"
        if name.startswith("create_dir") or right:
            assert done.returncode == 0, done.stderr
        else:
            assert done.returncode == 1
            assert done.stderr.splitlines()[-1].startswith(f"integrity check failed: {staged}: sha256 is ")
    if right:
        assert staged.read_bytes() == sif.read_bytes()
