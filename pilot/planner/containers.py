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
- shifter: ``shifter --image IMAGE --volume [MOUNT;]...DIR:/scratch
  --workdir=/scratch [container.arguments] PFN ARGS`` (Shifter.java), IMAGE as
  Pegasus names a shifter image (``docker:ubuntu:22.04``); shifter images are
  pulled by shifterimg beforehand, never staged.
- docker: refused (no HPC site runs a docker daemon for its users); declare
  the image as a singularity container (``docker://`` images run there).

Which runtimes a site's nodes have is its ``container_runtimes`` key; a job
in a container of a kind none of them runs is refused at plan time, naming
the job, the container, its kind and what the site offers.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from pilot.errors import ConfigError
from pilot.planner.expand import expand
from pilot.planner.model import ContainerSpec, Job
from pilot.planner.yamlvalues import fail, flag, need_list, need_text, optional_text
from pilot.siteschema import CONTAINER_RUNTIMES
from pilot.sites import SiteConfig

SINGULARITY_SUFFIXES = (".img", ".tar", ".tar.gz", ".tar.bz2", ".sif", ".simg")  # Container.java's list
WORKDIR = {"singularity": "/srv", "shifter": "/scratch"}  # where the job's directory is inside (Pegasus')


def read(name: str, raw: dict, env: dict[str, str], path: str, cpath: str) -> ContainerSpec:
    """One ``containers[]`` entry; every value is one word, as it goes into the task's command line."""
    kind = need_text(raw.get("type", ""), path, f"{cpath}.type")
    if kind not in ("singularity", "docker", "shifter"):
        raise fail(path, f"{cpath}.type", f"{kind!r}: use singularity, docker or shifter")
    if "image" not in raw:
        raise fail(path, cpath, "missing 'image' (the container's image URL)")
    image = expand(need_text(raw["image"], path, f"{cpath}.image"), f"{path}: {cpath}.image")
    mounts = tuple(expand(need_text(m, path, f"{cpath}.mounts[{k}]"), f"{path}: {cpath}.mounts[{k}]")
                   for k, m in enumerate(need_list(raw.get("mounts"), path, f"{cpath}.mounts", "of HOST:CONTAINER")))
    for key, value in (("image", image), *((f"mounts[{k}]", m) for k, m in enumerate(mounts)), *env.items()):
        if not value or any(c.isspace() or c in "\0'\";" for c in value):
            raise fail(path, f"{cpath}.{key}", f"{value!r}: a container's image, mounts and env values are single words "
                       "(no spaces, quotes or ';'): they are words of the task's command line")
    return ContainerSpec(name, kind, image, optional_text(raw, "image.site", path, cpath), mounts,
                         flag(raw, "bypass", False, path, cpath), tuple(env.items()), f"{path}: {cpath}")


def image_lfn(spec: ContainerSpec) -> str:
    """Pegasus' name for the container's image (Container.computeLFN)."""
    scheme, sep, rest = spec.image.partition("://")
    if not sep:
        scheme, rest = "file", spec.image
    if spec.kind == "shifter":
        rest = rest.lstrip("/")
        return rest if scheme.lower() == "shifter" else f"{scheme}:{rest}"
    if scheme.lower() in ("docker", "shub"):
        return spec.name + ".simg"
    base = os.path.basename(rest)
    if ":" in base or "." not in base:
        return spec.name
    suffix = base[base.index("."):]
    if suffix not in SINGULARITY_SUFFIXES:
        raise ConfigError(f"{spec.where}: image {spec.image}: {suffix!r} is not a singularity image suffix "
                          f"({', '.join(SINGULARITY_SUFFIXES)})")
    return spec.name + suffix


def staged_image(spec: ContainerSpec) -> tuple[str, str] | None:
    """(lfn, URL) of the image to stage into the job's directory; None when it is not staged."""
    if spec.kind != "singularity" or spec.bypass:
        return None
    url = spec.image if "://" in spec.image else "file://" + os.path.abspath(spec.image)
    return image_lfn(spec), url


def runtime_for(job: Job, spec: ContainerSpec, site: SiteConfig, handle: str) -> str:
    """The site's runtime for the container's kind, or one line saying what the site offers."""
    for runtime in site.container_runtimes:
        if CONTAINER_RUNTIMES[runtime] == spec.kind:
            return runtime
    offers = ", ".join(site.container_runtimes) or "no container runtime"
    hint = ("declare it as a singularity container (docker:// images run there)" if spec.kind == "docker"
            else f"add its runtime to the site's container_runtimes ({', '.join(CONTAINER_RUNTIMES)})")
    raise ConfigError(f"{job.where}: transformation {job.tx_label} runs in {spec.kind} container {spec.name} "
                      f"(image {spec.image}) on site {handle}, and site {site.name} offers {offers}: {hint}, "
                      "or remove 'container' from the transformation's site entry to run it on the host")


def wrapper(spec: ContainerSpec, runtime: str, workdir: str, profiles: dict[str, Any]) -> list[str]:
    """The words before the job's executable: its container's runtime command (see the module doc)."""
    extra = shlex.split(profiles.get("container.arguments", "") or "")
    inside = WORKDIR[spec.kind]
    if spec.kind == "shifter":
        volumes = ";".join([*spec.mounts, f"{workdir}:{inside}"])
        return ["shifter", "--image", image_lfn(spec), "--volume", volumes, f"--workdir={inside}", *extra]
    words = [runtime, "exec", "--no-home"]
    if str(profiles.get("gpus", "") or "0") not in ("", "0"):
        words.append("--nv")
    words += ["--bind", f"{workdir}:{inside}", "--pwd", inside]
    for key, value in spec.env:
        words += ["--env", f"{key}={value}"]
    for mount in spec.mounts:
        words += ["--bind", mount]
    image = staged_image(spec)
    return [*words, *extra, image[0] if image else spec.image.removeprefix("file://")]
