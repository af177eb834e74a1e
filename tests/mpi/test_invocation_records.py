"""pilot run --invocation-records -o/-e: the job output pegasus-monitord reads, and no file per task."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from tests.mpi.helpers import run_pilot

pytestmark = pytest.mark.mpi

NS = "{http://pegasus.isi.edu/schema/invocation}"
DAG = """#@ 1 ns::ok:1 ID1
TASK ok /bin/sh -c "echo out-ok; echo err-ok >&2"
#@ 2 ns::bad:1 ID2
TASK bad /bin/sh -c "echo err-bad >&2; exit 3"
EDGE ok bad
"""


def test_records_travel_in_the_job_output(tmp_path):
    dag = tmp_path / "c.dag"
    dag.write_text(DAG)
    before = set(p.name for p in tmp_path.iterdir())
    res = run_pilot(["--invocation-records", "-o", "c.out", "-e", "c.err", str(dag)], cwd=tmp_path)
    assert res.returncode == 1
    out = (tmp_path / "c.out").read_text()
    records = {}
    for text in re.findall(r"<invocation .*?</invocation>", out, re.S):
        inv = ET.fromstring(text)
        main = inv.find(f"{NS}mainjob")
        stderr = inv.find(f"{NS}statcall[@id='stderr']/{NS}data")
        records[inv.get("derivation")] = (
            inv.get("transformation"),
            main.find(f"{NS}status/{NS}regular").get("exitcode"),
            main.find(f"{NS}argument-vector/{NS}arg").text,
            stderr.text if stderr is not None else None,
        )
    assert records == {
        "ID1": ("ns::ok:1", "0", '-c "echo out-ok; echo err-ok >&2"', None),  # a task that succeeded: no stderr copy
        "ID2": ("ns::bad:1", "3", '-c "echo err-bad >&2; exit 3"', "err-bad\n"),
    }
    assert "out-ok" in out and out.count("[cluster-task ") == 2
    assert out.rstrip().splitlines()[-1].startswith('[cluster-summary stat="failed", tasks=2')
    assert "err-ok" in (tmp_path / "c.err").read_text()
    created = set(p.name for p in tmp_path.iterdir()) - before
    assert not [n for n in created if n.startswith(("ok.", "bad."))]  # no file per task
