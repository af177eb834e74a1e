"""Container images in a stage-in job: checked before its transfer, loaded into the site's runtime after it.

A container's image is staged once per workflow, as any input, by the
stage-in job that pegasus-transfer runs for it. Two things are added here:

- before the transfer, an image named by a ``file://`` URL that is not there
  fails the job in one line naming the image (pegasus-transfer's own report
  is a page of retries); after a failed transfer, each image it did not bring
  (a registry that cannot be reached, a reference it does not have) is named
  in one line below pegasus-transfer's messages;
- after it (and after its checksum is checked: pilot.data.integrity runs
  inside this), a docker image (a docker-archive tar) is loaded by the site's
  runtime once, where Pegasus' job wrapper runs ``docker load`` in every job.
  docker and podman-hpc run images from their own store, not from a file: the
  image is tagged with the name the plan wrote into the tasks' commands, and
  podman-hpc's ``migrate`` makes it seen on the compute nodes. podman runs the
  staged file itself (``docker-archive:PATH``), so the load only checks that
  it loads (NAME ``-``). An archive the runtime cannot load fails the job in
  one line naming the image and the runtime's message, before any task tries.

    python -m pilot.data.images RUNTIME PATH NAME URL [...] -- COMMAND [ARGS...]

RUNTIME is ``-`` for an image that is used as staged (a singularity image).
COMMAND runs first (no shell); its exit status is kept when it fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from urllib.parse import unquote, urlsplit

NO_LOAD = "-"


MESSAGE_CHARS = 600  # of the runtime's message, kept in the one line


def _one_line(text: str) -> str:
    """The runtime's message as one line (podman lists each format it tried on a line of its own)."""
    joined = " ".join(line.strip() for line in text.splitlines() if line.strip()) or "no message"
    return joined if len(joined) <= MESSAGE_CHARS else joined[:MESSAGE_CHARS] + " ..."


def missing(url: str) -> str | None:
    """One line when a ``file://`` image is not there to be staged."""
    parts = urlsplit(url)
    if parts.scheme != "file" or os.path.exists(unquote(parts.path)):
        return None
    return f"container image {url}: no such file: correct the container's image, or create it"


def loaded_as(stdout: str) -> str | None:
    """The image a ``load`` reports (docker: ``Loaded image: N`` or ``Loaded image ID: sha256:..``; podman:
    ``Loaded image: N`` or ``Loaded image(s): N,M``): the last one, as Pegasus' docker_init takes it."""
    found = None
    for line in stdout.splitlines():
        head, sep, names = line.partition(":")
        if sep and head.strip().startswith("Loaded image"):
            found = names.strip().split(",")[-1].strip() or found
    return found


def load(runtime: str, path: str, name: str, url: str) -> str | None:
    """Load the archive at ``path`` into ``runtime``'s store as ``name``; one line saying why not."""
    steps = [[runtime, "load", "-i", path]]
    for n, argv in enumerate(steps):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
        except OSError as exc:
            return f"container image {url}: cannot run {runtime}: {exc.strerror or exc}"
        if done.returncode != 0:
            return f"container image {url}: {' '.join(argv[:2])} failed: {_one_line(done.stderr + done.stdout)}"
        if n == 0:
            image = loaded_as(done.stdout)
            if image is None:
                return f"container image {url}: {runtime} load named no image: {_one_line(done.stdout + done.stderr)}"
            if name == NO_LOAD:
                break  # loaded to be checked (podman runs the staged file)
            steps.append([runtime, "tag", image, name])
            if os.path.basename(runtime) == "podman-hpc":
                steps.append([runtime, "migrate", name])
    return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cut = args.index("--") if "--" in args else -1
    if cut < 0 or cut % 4 or cut == len(args) - 1:
        print("usage: python -m pilot.data.images RUNTIME PATH NAME URL ... -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    images = [args[k : k + 4] for k in range(0, cut, 4)]
    gone = [line for line in (missing(url) for *_, url in images) if line]
    for line in gone:
        print(line, file=sys.stderr, flush=True)
    if gone:
        return 1
    rc = subprocess.run(args[cut + 1 :], check=False).returncode
    if rc != 0:
        for _, path, _, url in images:  # a registry that cannot be reached, an image it does not have
            if not os.path.exists(path):
                print(
                    f"container image {url}: not staged: the transfer exited {rc} (its messages above say why)",
                    file=sys.stderr,
                    flush=True,
                )
        return 128 - rc if rc < 0 else rc  # a signal, as a shell reports it
    for runtime, path, name, url in images:
        why = None if runtime == NO_LOAD else load(runtime, path, name, url)
        if why:
            print(why, file=sys.stderr, flush=True)
            return 1
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    sys.exit(main())
