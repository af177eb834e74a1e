"""Container runtimes for the tests, with images built offline during the test session (no registry is reached).

- ``rootfs``: a busybox-static root file system (about 2 MB), with ``/etc/only-in-image`` (a file no host has,
  for a job to show it ran in the image) and ``/srv`` (where jobs' directories are bound).
- ``podman``: podman with the repository's containers/containers.conf and a storage of the session's own; the
  image imported as IMAGE and saved as a docker-archive tar (what the workflow's staging brings).
- ``dockerd``: a dockerd of the session's own (private data root, exec root and socket, no iptables, no bridge),
  the archive loaded into it; ended when the session ends.
- ``squashfs``: the root file system as a SquashFS image, for Charliecloud's ch-run and the apptainer stand-in
  (tests/bin/apptainer).

A fixture whose runtime is not installed skips its tests with one line saying what is missing.
Import the fixtures into the test module that uses them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple

import pytest

from tests import busybox
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parent.parent
IMAGE = "localhost/pilot-test:busybox"
ONLY_IN_IMAGE = "/etc/only-in-image"
IMAGE_TEXT = "made in the test image\n"
IMAGE_ENV = ("PILOT_IMAGE_VAR", "set-in-the-image")  # in the podman and docker image's config, as an ENV line sets it
STANDIN = REPO / "tests" / "bin"


class Runtime(NamedTuple):
    """A runtime ready for tests: the environment its command needs (added to the test's own), and its image."""

    name: str
    env: dict[str, str]
    image: str


def need(*programs: str) -> None:
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (apt-get install the packages .ci/run names)")


def _run(argv: list[str], env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    full = {**os.environ, **(env or {})}
    res = subprocess.run(argv, env=full, capture_output=True, text=True, timeout=300, **kw)
    if res.returncode != 0:
        pytest.fail(f"{' '.join(argv)} exited {res.returncode}: {res.stderr.strip()}")
    return res


def busybox_root(root: Path, files: busybox.Files | None = None) -> Path:
    """tests/busybox.py's busybox root file system; a test skips where busybox-static is not installed."""
    try:
        return busybox.busybox_root(root, files)
    except busybox.Unavailable as why:
        pytest.skip(str(why))


@pytest.fixture(scope="session")
def rootfs(tmp_path_factory) -> Path:
    return busybox_root(tmp_path_factory.mktemp("rootfs") / "root", {ONLY_IN_IMAGE: (IMAGE_TEXT, 0o644)})


class PrivatePodman:
    """podman with the repository's containers.conf and an image store of its own under ``where``, so nothing of a
    test stays in the machine's store; ``env`` says so to whatever runs podman (pilot's stage-in jobs and tasks)."""

    def __init__(self, where: Path) -> None:
        need("podman", "runc")
        where.mkdir(parents=True, exist_ok=True)
        (where / "storage.conf").write_text(
            f'[storage]\ndriver = "vfs"\ngraphroot = "{where}/graph"\n' f'runroot = "{where}/run"\n'
        )
        self.env = {
            "CONTAINERS_CONF": str(REPO / "containers" / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(where / "storage.conf"),
        }
        self.where = where

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        return _run(["podman", *args], self.env)

    def build(self, name: str, files: busybox.Files) -> Path:
        """A docker-archive tar of a busybox image holding ``files`` (tests/busybox.py), only the archive has it."""
        try:
            return busybox.podman_archive(self.where, name, files, self.env)
        except busybox.Unavailable as why:
            pytest.skip(str(why))

    def close(self) -> None:
        """End what is left and remove the store (root's files, in the test's own directory)."""
        for args in (["rm", "-a", "-f", "-t", "0"], ["rmi", "--all", "--force"]):
            subprocess.run(["podman", *args], env={**os.environ, **self.env}, capture_output=True, timeout=120)
        shutil.rmtree(self.where / "graph", ignore_errors=True)


@pytest.fixture(scope="session")
def podman(rootfs, tmp_path_factory) -> Runtime:
    runtime = PrivatePodman(tmp_path_factory.mktemp("podman"))
    tar = runtime.where / "rootfs.tar"
    _run(["tar", "-C", str(rootfs), "-cf", str(tar), "."])
    runtime("import", "--change", "ENV {}={}".format(*IMAGE_ENV), str(tar), IMAGE)
    runtime("save", "--format", "docker-archive", "-o", str(runtime.where / "image.tar"), IMAGE)
    yield Runtime("podman", runtime.env, IMAGE)
    subprocess.run(
        ["podman", "rm", "-a", "-f", "-t", "0"], env={**os.environ, **runtime.env}, capture_output=True, timeout=120
    )


@pytest.fixture(scope="session")
def docker_archive(podman) -> Path:
    """The image as a docker-archive tar (podman save), as a workflow's staging brings it."""
    path = Path(podman.env["CONTAINERS_STORAGE_CONF"]).parent / "image.tar"
    assert path.is_file()
    return path


@pytest.fixture(scope="session")
def dockerd(docker_archive) -> Runtime:
    need("dockerd", "docker")
    home = Path(tempfile.mkdtemp(prefix="pd", dir="/tmp"))  # short: the socket path is at most 107 bytes
    sock = f"unix://{home}/docker.sock"
    env = {"DOCKER_HOST": sock}
    with open(home / "dockerd.log", "wb") as log:
        proc = subprocess.Popen(
            [
                "dockerd",
                "--data-root",
                str(home / "data"),
                "--exec-root",
                str(home / "x"),
                "-H",
                sock,
                "--pidfile",
                str(home / "dockerd.pid"),
                "--iptables=false",
                "--bridge=none",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    try:

        def up() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"dockerd exited {proc.returncode}: {(home / 'dockerd.log').read_text()[-2000:]}")
            return subprocess.run(["docker", "info"], env={**os.environ, **env}, capture_output=True).returncode == 0

        wait_for(up, 60, "dockerd answering on its socket", every=0.2)
        _run(["docker", "load", "-i", str(docker_archive)], env)
        yield Runtime("docker", env, IMAGE)
        subprocess.run(
            ["docker", "rm", "-f", *_run(["docker", "ps", "-aq"], env).stdout.split()],
            env={**os.environ, **env},
            capture_output=True,
            timeout=120,
        )
    finally:
        proc.send_signal(signal.SIGTERM)  # dockerd stops its containerd and containers, then exits
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def squashfs(rootfs, tmp_path_factory) -> Path:
    need("mksquashfs", "ch-run")
    image = tmp_path_factory.mktemp("squashfs") / "image.sqfs"
    _run(["mksquashfs", str(rootfs), str(image), "-quiet", "-noappend", "-all-root"])
    return image


@pytest.fixture
def apptainer_standin(squashfs, tmp_path) -> Runtime:
    """The apptainer stand-in (tests/bin/apptainer: ch-run under apptainer's command line) first on PATH, its
    instances recorded under the test's own directory. The image is the SquashFS file's path."""
    env = {
        "PATH": f"{STANDIN}{os.pathsep}{os.environ['PATH']}",
        "PILOT_APPTAINER_STANDIN_STATE": str(tmp_path / "apptainer-standin"),
        "USER": os.environ.get("USER", "root"),
    }
    return Runtime("apptainer", env, str(squashfs))
