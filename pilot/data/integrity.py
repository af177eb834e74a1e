"""Verify staged files against their sha256: the check stage-in jobs run after pegasus-transfer.

Pegasus verifies a file's checksum (replica catalog ``checksum``, a stageable
executable's or a container image's) where it stages the file, and fails the
job that staged it when the copy differs, so no job reads a corrupt or wrong
input. In the shared file system that pilot plans for, one copy serves every
job of the workflow, so the stage-in job that brings it checks it once, after
its transfer: a mismatch fails that job, with one line naming the file, and
the jobs that read the file never start.

    python -m pilot.data.integrity PATH=SHA256 [PATH=SHA256 ...] -- COMMAND [ARGS...]

COMMAND runs first (no shell); its exit status is kept when it fails.
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys

CHUNK = 1 << 20


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def mismatches(expected: list[tuple[str, str]]) -> list[str]:
    """One line per file whose content is not its checksum (or that cannot be read)."""
    out = []
    for path, sha in expected:
        try:
            found = sha256_of(path)
        except OSError as exc:
            out.append(f"{path}: cannot be checked against its sha256 {sha}: {exc.strerror or exc}")
            continue
        if found != sha.lower():
            out.append(
                f"{path}: sha256 is {found}, the catalog says {sha}: the staged copy is not the file the "
                "workflow names (correct the replica, or its checksum)"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--" not in args or args.index("--") == len(args) - 1:
        print("usage: python -m pilot.data.integrity PATH=SHA256 ... -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    cut = args.index("--")
    expected = [tuple(a.rpartition("=")[::2]) for a in args[:cut]]
    if any(not path for path, _ in expected):
        print("pilot.data.integrity: each file is PATH=SHA256", file=sys.stderr)
        return 2
    rc = subprocess.run(args[cut + 1 :], check=False).returncode
    if rc != 0:
        return 128 - rc if rc < 0 else rc  # a signal, as a shell reports it
    bad = mismatches(expected)  # type: ignore[arg-type]  # rpartition's halves: pairs, though typed as tuples of any length
    for line in bad:
        print(f"integrity check failed: {line}", file=sys.stderr, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    sys.exit(main())
