"""An input whose source cannot be reached fails its stage-in job with pegasus-transfer's own message, at run
time, never the plan: ``pilot submit --site local`` with the real pegasus-transfer, its replica on a site the
site catalog does not describe (``ipac``) at an http URL where nothing listens."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import yaml

from tests.planner.data_wf import data_workflow


def test_an_unreachable_http_source_fails_its_stage_in_job_with_pegasus_transfers_message(tmp_path):
    with socket.socket() as s:  # a port of this machine where nothing listens once it is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    paths = data_workflow(tmp_path)
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    url = f"http://127.0.0.1:{port}/montage/f.a"
    doc["replicaCatalog"]["replicas"][0]["pfns"] = [{"site": "ipac", "pfn": url}]
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    submit = tmp_path / "s"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "submit",
            "--poll",
            "0.2",
            "--site",
            "local",
            paths["workflow"],
            "--conf",
            paths["conf"],
            "--dir",
            str(submit),
            "--cluster",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 1, res.stdout + res.stderr
    assert "stage_in_local_local_0_0: task stage_in_local_local_0_0 failed with exit 1" in res.stdout + res.stderr
    errors = "".join(
        p.read_text() for p in (submit / "stage_in_local_local_0_0").glob("stage_in_local_local_0_0.err.*")
    )
    assert url in errors and "Some transfers failed!" in errors, errors
    assert not (tmp_path / "output" / "f.c").exists()
