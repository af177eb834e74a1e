"""Bad output paths are one line and exit 2 before any task runs."""

from __future__ import annotations

import os

import pytest

from tests.mpi.helpers import run_pilot

pytestmark = pytest.mark.mpi


def one_line(res) -> str:
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


@pytest.fixture
def touching(dagfile, tmp_path):
    marker = tmp_path / "ran"
    return dagfile(f"TASK a /usr/bin/touch {marker}\n", "sub.dag"), marker


def test_stdout_into_a_missing_directory(touching):
    dag, marker = touching
    line = one_line(run_pilot(["-o", "/nonexistent/x", dag]))
    assert line.startswith("/nonexistent/x: cannot open the task stdout file (-o): No such file or directory")
    assert not marker.exists()
    line = one_line(run_pilot(["-e", "/nonexistent/y", dag]))
    assert line.startswith("/nonexistent/y: cannot open the task stderr file (-e)") and not marker.exists()


def test_rescue_log_in_a_missing_or_read_only_place(touching, tmp_path):
    dag, marker = touching
    line = one_line(run_pilot(["-r", str(tmp_path / "missing" / "r.rescue"), dag]))
    assert "missing/r.rescue: cannot write the rescue log: No such file or directory" in line
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        line = one_line(run_pilot(["-r", str(ro / "r.rescue"), dag]))
        assert "cannot write the rescue log: Permission denied" in line
    assert not marker.exists()
    assert not [p for p in tmp_path.rglob("*.tmp.*")]


def test_dag_directory_not_writable(dagfile, tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root can write into a read-only directory")
    marker = tmp_path / "ran"
    sub = tmp_path / "ro"
    sub.mkdir()
    dag = sub / "wf.dag"
    dag.write_text(f"TASK a /usr/bin/touch {marker}\n")
    sub.chmod(0o555)
    try:
        line = one_line(run_pilot(["-n", "-r", str(tmp_path / "r.rescue"), str(dag)]))
        assert "cannot write next to the DAG" in line and not marker.exists()
    finally:
        sub.chmod(0o755)


def test_unterminated_quote_and_nul(dagfile):
    line = one_line(run_pilot([dagfile("TASK a /bin/echo 'oops\n")]))
    assert line.endswith("wf.dag:1: unterminated quote; close it with a matching ' or \" (or escape it with \\)")
    line = one_line(run_pilot([dagfile("TASK a /bin/echo a\0b\n", "nul.dag")]))
    assert "nul.dag:1: NUL byte in the line" in line


def test_task_ids_never_write_outside_the_dag_directory(dagfile, tmp_path):
    sub = tmp_path / "d"
    sub.mkdir()
    dag = sub / "wf.dag"
    dag.write_text("TASK ../escape /bin/echo up\nTASK a/b /bin/echo down\n")
    res = run_pilot(["--per-task-stdio", str(dag)])
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in sub.iterdir() if ".out." in p.name) == ["..%2Fescape.out.000", "a%2Fb.out.000"]
    assert not (tmp_path / "escape.out.000").exists()
