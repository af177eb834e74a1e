"""The test suite's cleanup of killed MPICH jobs' segments keeps every segment a live process maps."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from tests import mpich_shm


@pytest.mark.skipif(not os.path.isdir(mpich_shm.SHM_DIR), reason="no /dev/shm")
def test_only_segments_no_live_process_maps_are_removed():
    tag = uuid.uuid4().hex[:8]
    stale, live = (os.path.join(mpich_shm.SHM_DIR, f"mpich_shm_{tag}_{n}") for n in (0, 1))
    for path in (stale, live):
        with open(path, "wb") as fh:
            fh.write(b"\0" * 4096)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import mmap, sys\nf = open(sys.argv[1], 'r+b')\nm = mmap.mmap(f.fileno(), 4096)\n"
            "print('ready', flush=True)\nsys.stdin.read()",
            live,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        removed = mpich_shm.remove_stale()
        assert os.path.basename(stale) in removed and not os.path.exists(stale)
        assert os.path.exists(live)
    finally:
        holder.communicate("")
        for path in (stale, live):
            if os.path.exists(path):
                os.unlink(path)
