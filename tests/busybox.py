"""Busybox images built offline, without pytest: what the container tests build their images with, and what the
laptop image's container-demo.sh builds casa-wind's stand-in image with (tests/standin.py, run there from the
repository's tests/ mounted read-only).

A busybox-static root file system (about 2 MB) holding the files a caller names, imported into podman and saved
as the docker-archive tar ``docker save`` writes of a pulled image, which is what a workflow's staging brings.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

APPLETS = ("sh", "sleep", "cat", "echo", "printf", "test", "[", "true", "false", "ls", "pwd", "mkdir", "cp")

Files = dict[str, tuple[str, int]]  # path in the image -> its text, its mode


class Unavailable(Exception):
    """What an image needs is not installed here (the message says what and which package has it)."""


def static_busybox() -> str:
    busybox = shutil.which("busybox")
    if busybox is None:
        raise Unavailable("busybox not installed (apt-get install busybox-static)")
    with open(busybox, "rb") as fh:
        if b"/ld-linux" in fh.read(4096):  # a dynamic executable names its loader in its first page (PT_INTERP)
            raise Unavailable(f"{busybox} is not statically linked (apt-get install busybox-static)")
    return busybox


def busybox_root(root: Path, files: Files | None = None) -> Path:
    """A busybox-static root file system at ``root`` with ``files`` in it; its ``sleep`` is what a container a
    worker starts once for its tasks runs between them."""
    busybox = static_busybox()
    for sub in ("bin", "etc", "srv", "tmp", "proc", "sys", "dev", "home", "mnt", "var/tmp"):
        (root / sub).mkdir(parents=True)
    shutil.copy(busybox, root / "bin" / "busybox")
    for applet in APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    for path, (text, mode) in (files or {}).items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)
    return root


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``argv`` run to its end; a failure raises with the command's stderr, which is what says why."""
    res = subprocess.run(argv, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {res.returncode}: {res.stderr.strip()}")
    return res


def podman_archive(where: Path, name: str, files: Files, env: dict[str, str] | None = None) -> Path:
    """A docker-archive tar ``where/<name>.tar`` of a busybox image holding ``files``, built with podman (``env``
    names its configuration and store); the image is removed from the store again, so only the archive has it."""
    root = busybox_root(where / f"{name}-root", files)
    rootfs = where / f"{name}-rootfs.tar"
    run(["tar", "-C", str(root), "-cf", str(rootfs), "."])
    tag = f"localhost/{name}:test"
    run(["podman", "import", str(rootfs), tag], env)
    archive = where / f"{name}.tar"
    run(["podman", "save", "--format", "docker-archive", "-o", str(archive), tag], env)
    run(["podman", "rmi", tag], env)
    return archive
