"""Containers: a job whose transformation names one runs inside it, as Pegasus' container wrapper runs it.

Pegasus runs a containerized job through PegasusLite (its condorio and
nonsharedfs configurations; it refuses containers in sharedfs, the one pilot
plans for). pilot goes beyond it: the task's command becomes the container
runtime's, with the words Pegasus' wrapper writes, the host's paths put for
PegasusLite's: the job's directory (its working directory on the shared
scratch) for ``$PWD``, and the job itself for ``/srv/<launch script>``.

- singularity (run by the site's ``apptainer`` or ``singularity``):
  ``RUNTIME exec --no-home [--nv] --bind DIR:/srv --pwd /srv [--env K=V]...
  [--bind MOUNT]... [container.arguments] IMAGE PFN ARGS`` (Singularity.java;
  ``--pwd`` does what the launch script's ``cd /srv`` does there, ``--env`` what
  it does with the container's env profiles, and ``--nv`` comes with a gpus
  request). IMAGE is the image staged into the job's directory under Pegasus'
  name for it (``<name>.simg`` from docker:// and shub://, else the name with
  the URL's suffix), or with ``bypass`` the image URL itself, which the runtime
  pulls.
- docker (run by the site's ``docker``, ``podman`` or ``podman-hpc``):
  ``RUNTIME run --rm [--gpus all | --device nvidia.com/gpu=all] -v DIR:/srv -w /srv
  [-e NAME]... [-e K=V]... [-v MOUNT]... [container.arguments] IMAGE PFN ARGS`` (Docker.java's
  ``docker run`` with its volume, working directory and env words, and no
  network option, as there; a gpus request passes the GPUs as ``--nv`` does for
  singularity: ``--gpus all`` on docker, CDI's device name on podman, which has
  no ``--gpus``; ``--rm`` for the ``docker rm`` after it). The image is the
  docker-archive tar staged into the job's directory, and the stage-in job that
  brings it loads it (pilot.data.images), where Pegasus' wrapper runs ``docker
  load`` in every job. podman runs the staged file itself (IMAGE is
  ``docker-archive:DIR/<name>``), which every node sees on the shared scratch,
  whatever node-local store it has; the load there only checks that it loads.
  docker and podman-hpc run from their store: the stage-in job loads the image
  once under a name the plan gives it (``localhost/pilot-<name>:<hash of the
  workflow's directory and the URL>``), which is IMAGE (and podman-hpc's
  ``migrate`` makes it seen on every compute node). With ``bypass`` a
  ``docker://`` image is run by its reference, which the runtime pulls.
- shifter: ``shifter --image IMAGE --volume [MOUNT;]...DIR:/scratch
  --workdir=/scratch [container.arguments] PFN ARGS`` (Shifter.java), IMAGE as
  Pegasus names a shifter image (``docker:ubuntu:22.04``); shifter images are
  pulled by shifterimg beforehand, never staged.

A staged executable is run at its path inside the container: the job's
directory is bound at /srv (/scratch for shifter), so ``/srv/<its name>``.

Which runtimes a site's nodes have is its ``container_runtimes`` key; a job
in a container of a kind none of them runs is refused at plan time, naming
the job, the container, its kind and what the site offers.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from dataclasses import dataclass, replace
from typing import Any

from pilot.errors import ConfigError
from pilot.planner import replaced
from pilot.planner.expand import expand
from pilot.planner.model import ContainerSpec, Job
from pilot.planner.yamlvalues import fail, flag, need_list, need_text, optional_text
from pilot.sites import SiteConfig
from pilot.siteschema import CONTAINER_RUNTIMES

SINGULARITY_SUFFIXES = (".img", ".tar", ".tar.gz", ".tar.bz2", ".sif", ".simg")  # Container.java's list
WORKDIR = {"singularity": "/srv", "docker": "/srv", "shifter": "/scratch"}  # the job's directory inside (Pegasus')
PULLED = ("docker", "shub", "library")  # URL schemes pegasus-transfer pulls with a container tool, by the type
NO_LOAD = "-"  # the runtime word of a staged image that is used as it is staged (pilot.data.images reads it)


@dataclass(frozen=True)
class StagedImage:
    """A container's image as the stage-in job brings it into the workflow's directory."""

    lfn: str  # its name there (image_lfn)
    url: str  # where pegasus-transfer reads it
    kind: str  # pegasus-transfer's type for a pulled image: how it pulls (docker save, or apptainer pull)
    runtime: str  # the runtime that loads it after the transfer, or NO_LOAD
    tag: str  # the name it is loaded under, or NO_LOAD: loaded only to be checked (podman runs the file)
    image: str  # IMAGE of the task's command


def read(name: str, raw: dict, env: dict[str, str], path: str, cpath: str) -> ContainerSpec:
    """One ``containers[]`` entry; every value is one word, as it goes into the task's command line."""
    kind = need_text(raw.get("type", ""), path, f"{cpath}.type")
    if kind not in ("singularity", "docker", "shifter"):
        raise fail(path, f"{cpath}.type", f"{kind!r}: use singularity, docker or shifter")
    if "image" not in raw:
        raise fail(path, cpath, "missing 'image' (the container's image URL)")
    image = expand(need_text(raw["image"], path, f"{cpath}.image"), f"{path}: {cpath}.image")
    mounts = tuple(
        expand(need_text(m, path, f"{cpath}.mounts[{k}]"), f"{path}: {cpath}.mounts[{k}]")
        for k, m in enumerate(need_list(raw.get("mounts"), path, f"{cpath}.mounts", "of HOST:CONTAINER"))
    )
    for key, value in (("image", image), *((f"mounts[{k}]", m) for k, m in enumerate(mounts)), *env.items()):
        if not value or any(c.isspace() or c in "\0'\";" for c in value):
            raise fail(
                path,
                f"{cpath}.{key}",
                f"{value!r}: a container's image, mounts and env values are single words "
                "(no spaces, quotes or ';'): they are words of the task's command line",
            )
    return ContainerSpec(
        name=name,
        kind=kind,
        image=image,
        image_site=optional_text(raw, "image.site", path, cpath),
        mounts=mounts,
        bypass=flag(raw, "bypass", False, path, cpath),
        env=tuple(env.items()),
        where=f"{path}: {cpath}",
    )


def image_lfn(spec: ContainerSpec) -> str:
    """Pegasus' name for the container's image (Container.computeLFN)."""
    scheme, sep, rest = spec.image.partition("://")
    if not sep:
        scheme, rest = "file", spec.image
    if spec.kind == "shifter":
        rest = rest.lstrip("/")
        return rest if scheme.lower() == "shifter" else f"{scheme}:{rest}"
    if spec.kind == "docker":
        return spec.name  # an archive of the image (docker save's), whatever its URL
    if scheme.lower() in ("docker", "shub"):
        return spec.name + ".simg"
    base = os.path.basename(rest)
    if ":" in base or "." not in base:
        return spec.name
    suffix = base[base.index(".") :]
    if suffix not in SINGULARITY_SUFFIXES:
        raise ConfigError(
            f"{spec.where}: image {spec.image}: {suffix!r} is not a singularity image suffix "
            f"({', '.join(SINGULARITY_SUFFIXES)})"
        )
    return spec.name + suffix


def staged_image(spec: ContainerSpec, runtime: str, workdir: str) -> StagedImage | None:
    """The image to stage into the workflow's directory, and how it is loaded there; None when it is not staged."""
    if spec.kind == "shifter" or spec.bypass:
        return None
    url = spec.image if "://" in spec.image else "file://" + os.path.abspath(spec.image)
    lfn = image_lfn(spec)
    if spec.kind == "singularity":
        return StagedImage(lfn, url, "singularity", NO_LOAD, NO_LOAD, lfn)
    if runtime == "podman":
        return StagedImage(lfn, url, "docker", runtime, NO_LOAD, f"docker-archive:{workdir}/{lfn}")
    return StagedImage(lfn, url, "docker", runtime, loaded_name(spec, workdir), loaded_name(spec, workdir))


def loaded_name(spec: ContainerSpec, workdir: str) -> str:
    """The name a docker image is loaded under: the container's, tagged by the workflow's directory and the image's
    URL, so two workflows (or two versions of one image) never take each other's image."""
    name = re.sub(r"[^a-z0-9._-]+", "-", spec.name.lower()).strip("-._") or "image"
    tag = hashlib.sha256(f"{workdir}\0{spec.image}".encode()).hexdigest()[:16]
    return f"localhost/pilot-{name}:{tag}"


def runtime_for(job: Job, spec: ContainerSpec, site: SiteConfig, handle: str) -> tuple[str, ContainerSpec]:
    """The site's runtime for the container's kind, and the container as it runs there; or one line saying what the
    site offers.

    A singularity container of a ``docker://`` image runs, on a site with no singularity runtime, as a docker
    container of that image through the site's docker or podman (one warning line): singularity itself would run
    the same image, pulled and converted, with the job's directory at /srv as here. Any other singularity image
    (a .sif file, library://) is singularity's own format, which docker and podman cannot run."""
    for runtime in site.container_runtimes:
        if CONTAINER_RUNTIMES[runtime] == spec.kind:
            return runtime, spec
    if spec.kind == "singularity" and spec.image.lower().startswith("docker://") and not spec.bypass:
        for runtime in site.container_runtimes:
            if CONTAINER_RUNTIMES[runtime] == "docker":
                replaced.note(
                    f"singularity container on {runtime}",
                    spec.where,
                    f"site {site.name} has no apptainer or singularity: the container's docker:// image "
                    f"runs as a docker container on {runtime}, the job's directory at /srv as in "
                    "singularity (the job's env profiles passed in by name)",
                )
                return runtime, replace(spec, kind="docker")
    offers = ", ".join(site.container_runtimes) or "no container runtime"
    runs = [r for r, kind in CONTAINER_RUNTIMES.items() if kind == spec.kind]
    hint = f"add its runtime to the site's container_runtimes ({', '.join(runs)})"
    raise ConfigError(
        f"{job.where}: transformation {job.tx_label} runs in {spec.kind} container {spec.name} "
        f"(image {spec.image}) on site {handle}, and site {site.name} offers {offers}: {hint}, "
        "or remove 'container' from the transformation's site entry to run it on the host"
    )


def wrapper(
    spec: ContainerSpec, runtime: str, workdir: str, profiles: dict[str, Any], env_names: tuple[str, ...] = ()
) -> list[str]:
    """The words before the job's executable: its container's runtime command (see the module doc).

    ``env_names`` are the job's env profiles, which its task gets from pilot run: apptainer and shifter pass the
    caller's environment into the container, docker and podman do not, so each is named there (``-e NAME``, whose
    value the runtime takes from the task's environment, as Docker.java passes a value only the job's shell knows);
    the container's own env profiles are set by value after them, as its launch script sets them."""
    extra = shlex.split(profiles.get("container.arguments", "") or "")
    inside = WORKDIR[spec.kind]
    gpus = str(profiles.get("gpus", "") or "0") not in ("", "0")
    if spec.kind == "shifter":
        volumes = ";".join([*spec.mounts, f"{workdir}:{inside}"])
        return ["shifter", "--image", image_lfn(spec), "--volume", volumes, f"--workdir={inside}", *extra]
    image = staged_image(spec, runtime, workdir)
    if spec.kind == "docker":
        words = [runtime, "run", "--rm"]
        if gpus:
            words += ["--gpus", "all"] if runtime == "docker" else ["--device", "nvidia.com/gpu=all"]
        words += ["-v", f"{workdir}:{inside}", "-w", inside]
        own = {key for key, _ in spec.env}
        for name in env_names:
            words += ["-e", name] if name not in own else []
        for key, value in spec.env:
            words += ["-e", f"{key}={value}"]
        for mount in spec.mounts:
            words += ["-v", mount]
        return [*words, *extra, image.image if image else bypassed_reference(spec)]
    words = [runtime, "exec", "--no-home"]
    if gpus:
        words.append("--nv")
    words += ["--bind", f"{workdir}:{inside}", "--pwd", inside]
    for key, value in spec.env:
        words += ["--env", f"{key}={value}"]
    for mount in spec.mounts:
        words += ["--bind", mount]
    return [*words, *extra, image.image if image else spec.image.removeprefix("file://")]


def bypassed_reference(spec: ContainerSpec) -> str:
    """A docker image used from its URL: the reference the runtime pulls; only a docker:// URL names one."""
    scheme, sep, rest = spec.image.partition("://")
    if sep and scheme.lower() == "docker" and rest.strip("/"):
        return rest.strip("/")
    raise ConfigError(
        f"{spec.where}: image {spec.image}: a docker container used from its URL (bypass) needs a "
        "docker:// image, which the runtime pulls; stage any other image (drop bypass)"
    )
