"""Containers: the task's command is the one Pegasus' container wrapper writes, the image staged as Pegasus stages
it, or the plan refuses in one line naming the job, the container, its kind and what the site offers.

No container runtime installs on the machines these tests run on (no apptainer or singularity package in
Debian 12, no registry reachable), so the command line pilot writes is checked against the one Pegasus writes
(Singularity.java, Shifter.java), word by word."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from pilot.dag import read_dag
from pilot.errors import ConfigError
from pilot.planner.containers import image_lfn
from pilot.planner.model import ContainerSpec
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site

api = pytest.importorskip("Pegasus.api")


def workflow(tmp: Path, container: api.Container, **profiles) -> Path:
    tc = (
        api.TransformationCatalog()
        .add_containers(container)
        .add_transformations(
            api.Transformation("echo", site="local", pfn="/bin/echo", is_stageable=False, container=container)
        )
    )
    wf = api.Workflow("box").add_transformation_catalog(tc)
    job = api.Job("echo", _id="j").add_args("hi", "there")
    if profiles:
        job.add_pegasus_profile(**profiles)
    wf.add_jobs(job)
    wf.write(str(tmp / "box.yml"))
    return tmp / "box.yml"


def run_plan(tmp: Path, wf: Path, runtimes: str | None):
    site = load_site("local", {"container_runtimes": runtimes or ""})  # "": none, whatever this machine has
    return plan(PlanRequest(workflow=str(wf), site=site, cluster=["whole"], submit_dir=str(tmp / "submit")))


def task_of(result, name: str = "echo_j") -> list[str]:
    dag = read_dag(result.emitted[0].dag)
    return dag.tasks[name].argv


def pegasus_singularity(runtime: str, workdir: str, mounts: list[str], extra: str, image: str, gpus: bool) -> list[str]:
    """Singularity.java's containerRun, with PegasusLite's shell variables put for what they are here: $PWD is the
    job's directory, /srv/<launch script> the job itself (after --pwd /srv, which the script's cd does there), no
    HTCondor scratch directory, the container's env (set by the launch script there) as --env."""
    words = [
        runtime,
        "exec",
        "--no-home",
        *(["--nv"] if gpus else []),
        "--bind",
        f"{workdir}:/srv",
        "--pwd",
        "/srv",
        "--env",
        "CV=1",
    ]
    for m in mounts:
        words += ["--bind", m]
    return [*words, *shlex.split(extra), image]


def test_a_singularity_job_runs_in_apptainer_as_pegasus_wrapper_runs_it_its_image_staged(tmp_path):
    alp = api.Container("alp", api.Container.SINGULARITY, image="docker://alpine:3.18", mounts=["/data:/data:ro"])
    alp.add_env(CV="1")
    result = run_plan(
        tmp_path, workflow(tmp_path, alp, gpus=1, container_arguments="--cleanenv --contain"), "apptainer"
    )
    argv = task_of(result)
    workdir = argv[argv.index("--bind") + 1].rsplit(":/srv", 1)[0]
    assert workdir.endswith("/box/submit")  # the workflow's directory on the shared scratch, where the job runs
    assert argv == [
        *pegasus_singularity("apptainer", workdir, ["/data:/data:ro"], "--cleanenv --contain", "alp.simg", True),
        "/bin/echo",
        "hi",
        "there",
    ]
    # The image comes in as Pegasus stages it: pegasus-transfer from its URL into the job's directory.
    stage_in = next(Path(result.submit_dir).glob("*/stage_in_*.in"))
    entry = next(e for e in json.loads(stage_in.read_text()) if e["lfn"] == "alp.simg")
    assert entry["src_urls"][0]["url"] == "docker://alpine:3.18"
    assert entry["dest_urls"][0] == {"site_label": "local", "url": f"file://{workdir}/alp.simg", "type": "singularity"}


def test_a_bypassed_image_is_used_from_its_url_and_shifter_runs_as_pegasus_runs_it(tmp_path):
    alp = api.Container("alp", api.Container.SINGULARITY, image="docker://alpine:3.18", bypass_staging=True)
    alp.add_env(CV="1")
    argv = task_of(run_plan(tmp_path, workflow(tmp_path, alp), "singularity"))
    assert argv[-4:] == ["docker://alpine:3.18", "/bin/echo", "hi", "there"] and argv[0] == "singularity"
    assert "--nv" not in argv
    sh = api.Container("sh", api.Container.SHIFTER, image="shifter:///ubuntu:22.04", mounts=["/global/cfs:/cfs"])
    (tmp_path / "s").mkdir()
    argv = task_of(run_plan(tmp_path / "s", workflow(tmp_path / "s", sh), "apptainer,shifter"))
    workdir = argv[argv.index("--volume") + 1].split(";")[1].rsplit(":/scratch", 1)[0]
    # Shifter.java: shifter --image LFN --volume MOUNT;$PWD:/scratch --workdir=/scratch ./<script>
    assert argv == [
        "shifter",
        "--image",
        "ubuntu:22.04",
        "--volume",
        f"/global/cfs:/cfs;{workdir}:/scratch",
        "--workdir=/scratch",
        "/bin/echo",
        "hi",
        "there",
    ]


@pytest.mark.parametrize(
    "kind,image,lfn",
    [
        ("singularity", "docker://alpine:3.18", "c.simg"),
        ("singularity", "shub://x/y", "c.simg"),
        ("singularity", "file:///images/centos.sif", "c.sif"),
        ("singularity", "https://h/i/img.tar.gz", "c.tar.gz"),
        ("singularity", "library://a/b/c:1.0", "c"),
        ("singularity", "/images/noext", "c"),
        ("shifter", "shifter:///centos:7", "centos:7"),
        ("shifter", "docker://ubuntu:22.04", "docker:ubuntu:22.04"),
        ("docker", "docker://alpine:3.18", "c"),
        ("docker", "file:///images/c.tar", "c"),
    ],
)
def test_image_names_are_pegasus_names(kind, image, lfn):
    assert image_lfn(ContainerSpec("c", kind, image)) == lfn


def test_containers_a_site_cannot_run_are_refused_naming_job_container_kind_and_what_the_site_offers(tmp_path):
    alp = api.Container("alp", api.Container.SINGULARITY, image="docker://alpine:3.18")
    with pytest.raises(
        ConfigError,
        match=r"jobs\[0\] \(id j\): transformation echo runs in singularity container alp "
        r"\(image docker://alpine:3.18\) on site local, and site local offers no "
        r"container runtime: add its runtime",
    ):
        run_plan(tmp_path, workflow(tmp_path, alp), None)
    box = api.Container("box", api.Container.DOCKER, image="docker://alpine:3.18")
    with pytest.raises(
        ConfigError,
        match=r"runs in docker container box .* offers apptainer: add its runtime to the "
        r"site's container_runtimes \(podman-hpc, podman, docker\)",
    ):
        run_plan(tmp_path, workflow(tmp_path, box), "apptainer")
    odd = api.Container("odd", api.Container.SINGULARITY, image="https://h/img.zip")
    with pytest.raises(ConfigError, match=r"'.zip' is not a singularity image suffix"):
        run_plan(tmp_path, workflow(tmp_path, odd), "apptainer")
    spaced = api.Container("sp", api.Container.SINGULARITY, image="docker://alpine", mounts=["/a b:/c"])
    with pytest.raises(ConfigError, match=r"containers\[0\]\.mounts\[0\]: '/a b:/c': a container's image, mounts"):
        run_plan(tmp_path, workflow(tmp_path, spaced), "apptainer")


def test_a_site_names_only_runtimes_pilot_runs():
    with pytest.raises(ConfigError, match=r"container_runtimes.*'rkt' is not a container runtime pilot runs"):
        load_site("local", {"container_runtimes": "rkt"})


def pegasus_docker(runtime: str, workdir: str, mounts: list[str], extra: str, image: str, gpus: bool) -> list[str]:
    """Docker.java's ``docker run`` with PegasusLite's shell variables put for what they are here: $PWD is the job's
    directory, bound at /srv, the working directory there; the container's env as -e; --gpus all with a gpus
    request (CDI's device on podman, which has no --gpus); --rm for the ``docker rm`` after it; IMAGE the name the
    stage-in job loaded the staged archive under (docker_init's ``docker load``, once here), or on podman the
    staged archive itself."""
    gpu = (["--gpus", "all"] if runtime == "docker" else ["--device", "nvidia.com/gpu=all"]) if gpus else []
    words = [runtime, "run", "--rm", *gpu, "-v", f"{workdir}:/srv", "-w", "/srv", "-e", "CV=1"]
    for m in mounts:
        words += ["-v", m]
    return [*words, *shlex.split(extra), image]


@pytest.mark.parametrize("runtime,gpus", [("podman", True), ("docker", True), ("podman-hpc", False)])
def test_a_docker_job_runs_on_the_sites_docker_or_podman_from_the_image_its_stage_in_job_brings(
    tmp_path, runtime, gpus
):
    box = api.Container("Box", api.Container.DOCKER, image="docker://alpine:3.18", mounts=["/data:/data:ro"])
    box.add_env(CV="1")
    profiles = {"gpus": 1} if gpus else {}
    result = run_plan(
        tmp_path, workflow(tmp_path, box, container_arguments="--network none", **profiles), f"apptainer,{runtime}"
    )
    argv = task_of(result)
    workdir = argv[argv.index("-v") + 1].rsplit(":/srv", 1)[0]
    assert workdir.endswith("/box/submit")
    image = argv[-4]
    if runtime == "podman":  # it runs the staged file, which every node sees on the shared scratch
        assert image == f"docker-archive:{workdir}/Box"
    else:  # they run their store's image: the stage-in job loads it under the plan's name
        assert image.startswith("localhost/pilot-box:") and len(image.rsplit(":", 1)[1]) == 16
    assert argv == [
        *pegasus_docker(runtime, workdir, ["/data:/data:ro"], "--network none", image, gpus),
        "/bin/echo",
        "hi",
        "there",
    ]
    # Staged once, as Pegasus stages it (pegasus-transfer's docker handler: docker pull, docker save), then loaded
    # into the runtime by the job that staged it, under the name the task runs.
    stage_in = next(Path(result.submit_dir).glob("*/stage_in_*.in"))
    entry = next(e for e in json.loads(stage_in.read_text()) if e["lfn"] == "Box")
    assert entry["src_urls"][0]["url"] == "docker://alpine:3.18"
    assert entry["dest_urls"][0] == {"site_label": "local", "url": f"file://{workdir}/Box", "type": "docker"}
    command = read_dag(result.emitted[0].dag).tasks[stage_in.stem].argv
    assert command[1:3] == ["-m", "pilot.data.images"]
    tag = "-" if runtime == "podman" else image  # podman's load only checks that the archive loads
    assert command[3:8] == [runtime, f"{workdir}/Box", tag, "docker://alpine:3.18", "--"]


def test_a_staged_executable_runs_at_its_path_inside_the_container(tmp_path):
    box = api.Container("box", api.Container.DOCKER, image="file:///images/box.tar")
    tc = (
        api.TransformationCatalog()
        .add_containers(box)
        .add_transformations(
            api.Transformation("run", site="local", pfn="file:///opt/tools/run.sh", is_stageable=True, container=box)
        )
    )
    box.add_env(CV="1")
    job = api.Job("run", _id="j").add_args("x").add_env(GREETING="hi", CV="2")
    wf = api.Workflow("box").add_transformation_catalog(tc).add_jobs(job)
    wf.write(str(tmp_path / "box.yml"))
    argv = task_of(run_plan(tmp_path, tmp_path / "box.yml", "podman"), "run_j")
    assert argv[-2:] == ["/srv/run", "x"]  # the job's directory, where it was staged, is /srv inside
    # The job's env profiles reach it in the container by name (podman passes none by itself), the container's
    # own by value.
    assert argv[argv.index("-w") + 2 : argv.index("-w") + 6] == ["-e", "GREETING", "-e", "CV=1"]


def test_a_bypassed_docker_image_is_pulled_by_the_runtime_and_only_a_docker_url_can_be(tmp_path):
    box = api.Container("box", api.Container.DOCKER, image="docker://alpine:3.18", bypass_staging=True)
    box.add_env(CV="1")
    result = run_plan(tmp_path, workflow(tmp_path, box), "docker")
    assert task_of(result)[-4:] == ["alpine:3.18", "/bin/echo", "hi", "there"]
    assert not list(Path(result.submit_dir).glob("*/stage_in_*.in"))  # nothing staged
    (tmp_path / "f").mkdir()
    tar = api.Container("tar", api.Container.DOCKER, image="file:///images/t.tar", bypass_staging=True)
    with pytest.raises(
        ConfigError,
        match=r"image file:///images/t.tar: a docker container used from its URL "
        r"\(bypass\) needs a docker:// image",
    ):
        run_plan(tmp_path / "f", workflow(tmp_path / "f", tar), "podman")


def test_docker_podman_and_podman_hpc_run_docker_containers():
    assert load_site("local", {"container_runtimes": "docker,podman,podman-hpc"}).container_runtimes == [
        "docker",
        "podman",
        "podman-hpc",
    ]
