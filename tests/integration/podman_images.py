"""Container images built offline during the test session, and a podman that runs them in a private store.

No registry is reachable from the machines the tests run on, so an image is a
busybox-static root file system (2 MB, built in a fraction of a second) with
the files a test puts in it: ``podman import`` of a tar of the directory, then
``podman save`` to a docker-archive tar, the file a workflow's container names
as its ``file://`` image (what ``docker save`` writes from a pulled image).

podman here runs with runc (crun fails on the hybrid cgroups of these machines),
lower default ulimits than its own (which the kernel refuses here), and its own
image store under the test's directory, so nothing of a test stays behind in
the machine's store; the environment that says so is passed on to ``pilot``,
whose stage-in job loads the image with podman and whose tasks run it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

BUSYBOX = "/bin/busybox"  # Debian's busybox-static: one static binary, every applet a link to it
# sleep: what a container that a worker starts once for its tasks (pilot run --containers once) runs between them
APPLETS = ("sh", "cat", "echo", "printf", "test", "[", "ls", "mkdir", "cp", "sleep")

CONTAINERS_CONF = """[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""

STORAGE_CONF = """[storage]
driver = "vfs"
graphroot = "{root}/graph"
runroot = "{root}/run"
"""


def need_podman() -> str:
    """podman's path, or the test skips in one line saying what is missing."""
    podman = shutil.which("podman")
    if podman is None:
        pytest.skip("podman is not installed (apt-get install podman runc)")
    if shutil.which("runc") is None:
        pytest.skip("runc is not installed (apt-get install runc), which podman runs containers with here")
    if not os.access(BUSYBOX, os.X_OK):
        pytest.skip(f"{BUSYBOX} is missing (apt-get install busybox-static), which the test images are built of")
    return podman


class Podman:
    """podman with its configuration and image store under ``where``."""

    def __init__(self, where: Path) -> None:
        self.path = need_podman()
        where.mkdir(parents=True, exist_ok=True)
        (where / "containers.conf").write_text(CONTAINERS_CONF)
        (where / "storage.conf").write_text(STORAGE_CONF.format(root=where / "store"))
        self.env = {**os.environ, "CONTAINERS_CONF": str(where / "containers.conf"),
                    "CONTAINERS_STORAGE_CONF": str(where / "storage.conf")}
        self.where = where

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([self.path, *args], env=self.env, capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)} failed: {done.stderr}")
        return done

    def build(self, name: str, files: dict[str, tuple[str, int]]) -> Path:
        """A docker-archive tar of a busybox image holding ``files`` (path in the image -> text, mode), tagged
        ``localhost/<name>:test``; the image is removed from the store again, so only the archive has it."""
        root = self.where / f"{name}-root"
        (root / "bin").mkdir(parents=True)
        shutil.copy(BUSYBOX, root / "bin" / "busybox")
        for applet in APPLETS:
            (root / "bin" / applet).symlink_to("busybox")
        for path, (text, mode) in files.items():
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            target.chmod(mode)
        rootfs = self.where / f"{name}-rootfs.tar"
        with tarfile.open(rootfs, "w") as tar:
            tar.add(root, arcname=".")
        tag = f"localhost/{name}:test"
        self("import", str(rootfs), tag)
        archive = self.where / f"{name}.tar"
        self("save", "--format", "docker-archive", "-o", str(archive), tag)
        self("rmi", tag)
        return archive

    def close(self) -> None:
        """Remove the store (the image layers in it are root's files, of the test's own directory)."""
        self("rmi", "--all", "--force", check=False)
        shutil.rmtree(self.where / "store", ignore_errors=True)
