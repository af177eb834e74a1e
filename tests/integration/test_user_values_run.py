"""Values full of shell metacharacters that a plan accepts run for real without running anything of theirs.

``pilot submit --site local`` with the real pegasus-transfer (create-dir, stage-in, stage-out, cleanup), the
real mpiexec and the registration job, on a workflow whose input and output lfns, job argument, env profile and
site directories hold ``$(touch PWNED)``, backticks, ``;``, ``"``, ``\\`` and spaces: the job reads and writes
the files by those names, and no file named PWNED appears anywhere.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import mpiexec

pytestmark = [pytest.mark.mpi]
NASTY = ' $(touch PWNED);`touch PWNED`"\\x'
WORD = "$(touch${IFS}PWNED);`touch${IFS}PWNED`&|>x"  # one argument word: Pegasus joins arguments with spaces


def test_metacharacters_in_every_field_run_nothing(tmp_path):
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    lfn_in, lfn_out = "in" + NASTY, "out" + NASTY
    scratch, storage = tmp_path / ("scratch" + NASTY), tmp_path / ("output" + NASTY)
    inputs = tmp_path / ("input" + NASTY)
    inputs.mkdir()
    (inputs / lfn_in).write_text("hello\n")
    script = tmp_path / "show.sh"  # the input (its name is no argument: Pegasus would split it at its space)
    script.write_text('#!/bin/sh\ncat in* && printf "%s\\n" "$1" "$UV"\n')
    script.chmod(0o755)
    data = {
        "pegasus": "5.0.4",
        "name": "nasty",
        "siteCatalog": {
            "sites": [
                {
                    "name": "local",
                    "directories": [
                        {
                            "type": kind,
                            "path": str(path),
                            "fileServers": [{"url": f"file://{path}", "operation": "all"}],
                        }
                        for kind, path in (("sharedScratch", scratch), ("localStorage", storage))
                    ],
                }
            ]
        },
        "replicaCatalog": {"replicas": [{"lfn": lfn_in, "pfns": [{"site": "local", "pfn": str(inputs / lfn_in)}]}]},
        "transformationCatalog": {
            "transformations": [{"name": "show", "sites": [{"name": "local", "pfn": str(script), "type": "installed"}]}]
        },
        "jobs": [
            {
                "type": "job",
                "name": "show",
                "id": "j1",
                "arguments": [WORD],
                "stdout": lfn_out,
                "uses": [
                    {"lfn": lfn_in, "type": "input"},
                    {"lfn": lfn_out, "type": "output", "stageOut": True, "registerReplica": True},
                ],
                "profiles": {"env": {"UV": NASTY}},
            }
        ],
        "jobDependencies": [],
    }
    wf = tmp_path / "nasty.yml"
    wf.write_text(yaml.safe_dump(data))
    sub = tmp_path / "sub"
    res = subprocess.run(
        [sys.executable, "-m", "pilot", "submit", "--poll", "0.2", "--site", "local", str(wf), "--dir", str(sub)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert (storage / lfn_out).read_text() == f"hello\n{WORD}\n{NASTY}\n"
    db = sqlite3.connect(sub / "nasty-0.replicas.db")
    assert db.execute("select lfn, pfn from rc_lfn natural join rc_pfn").fetchall() == [
        (lfn_out, f"file://{storage}/{lfn_out}")
    ]
    db.close()
    assert not list(tmp_path.rglob("PWNED")) and not (Path.cwd() / "PWNED").exists()


@pytest.mark.parametrize("where", ["lfn", "scratch"])
def test_a_quote_that_would_end_pegasus_transfers_quoting_is_refused_before_anything_runs(tmp_path, where):
    """pegasus-transfer runs ``cp -f -R -L '<src>' '<dst>'`` and ``mkdir -p '<dir>'`` through a shell."""
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    nasty = "x'$(touch PWNED)'x"
    lfn = "in" + nasty if where == "lfn" else "in.txt"
    scratch = tmp_path / ("scratch" + nasty if where == "scratch" else "scratch")
    (tmp_path / "in.txt").write_text("hello\n")
    data = {
        "pegasus": "5.0.4",
        "name": "quote",
        "siteCatalog": {
            "sites": [
                {
                    "name": "local",
                    "directories": [
                        {
                            "type": "sharedScratch",
                            "path": str(scratch),
                            "fileServers": [{"url": f"file://{scratch}", "operation": "all"}],
                        }
                    ],
                }
            ]
        },
        "replicaCatalog": {"replicas": [{"lfn": lfn, "pfns": [{"site": "local", "pfn": str(tmp_path / "in.txt")}]}]},
        "transformationCatalog": {
            "transformations": [{"name": "true", "sites": [{"name": "local", "pfn": "/bin/true", "type": "installed"}]}]
        },
        "jobs": [{"type": "job", "name": "true", "id": "j1", "arguments": [], "uses": [{"lfn": lfn, "type": "input"}]}],
        "jobDependencies": [],
    }
    wf = tmp_path / "quote.yml"
    wf.write_text(yaml.safe_dump(data))
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
            str(wf),
            "--output-sites",
            "none",
            "--dir",
            str(tmp_path / "sub"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert '"\'"' in res.stderr
    assert not list(tmp_path.rglob("PWNED"))


def test_jobs_whose_names_and_ids_join_alike_both_run(tmp_path):
    """Jobs a_b + c and a + b_c both make the name a_b_c: two clusters, two directories, and both jobs run."""
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    out = tmp_path / "ran"
    out.mkdir()
    tx = [
        {"name": name, "sites": [{"name": "local", "pfn": "/usr/bin/touch", "type": "installed"}]}
        for name in ("a_b", "a")
    ]
    data = {
        "pegasus": "5.0.4",
        "name": "coll",
        "transformationCatalog": {"transformations": tx},
        "jobs": [
            {"type": "job", "name": "a_b", "id": "c", "arguments": [str(out / "first")], "uses": []},
            {"type": "job", "name": "a", "id": "b_c", "arguments": [str(out / "second")], "uses": []},
        ],
        "jobDependencies": [],
    }
    wf = tmp_path / "coll.yml"
    wf.write_text(yaml.safe_dump(data))
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
            "--cluster",
            "none",
            "--output-sites",
            "none",
            str(wf),
            "--dir",
            str(tmp_path / "sub"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["first", "second"]
