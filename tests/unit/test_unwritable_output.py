"""Every command that prints, with its stdout on a full disk or on a pipe whose reader has gone.

A full disk (``> /dev/full``) is the user's situation: one line that says the
output could not be written, exit status 1, no traceback. A reader that closed
the pipe early (``| head -1``) ends the command quietly with 141, the status a
shell shows for a tool that SIGPIPE ended. Each command runs as
``python -m pilot`` with the real streams.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pilot.cli.demo import bundled_workflow
from pilot.contracts.taskrecord import cluster_task

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> Path:
    """A submit directory of the bundled diamond, planned for the local site."""
    where = tmp_path_factory.mktemp("planned")
    sub = where / "sub"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "plan",
            "--site",
            "local",
            "--cluster",
            "label",
            bundled_workflow(),
            "--dir",
            str(sub),
        ],
        capture_output=True,
        text=True,
        cwd=where,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    return sub


def report_args(where: Path) -> list[str]:
    """pilot report on a DAG and the captured stdout of its run."""
    (where / "w.dag").write_text("TASK a /bin/true\n")
    (where / "run.out").write_text(cluster_task("a", 1_800_000_000.0, 1.0, 0, "/bin/true", "h", 1, 1, 0))
    return ["report", str(where / "w.dag"), "--stdout", str(where / "run.out"), "--no-png"]


def commands(planned: Path, where: Path) -> dict[str, list[str]]:
    return {
        "status": ["status", str(planned)],
        "sites": ["sites"],
        "sites show": ["sites", "show", "local"],
        "version": ["version"],
        "help": ["--help"],
        "plan --help": ["plan", "--help"],  # argparse's own help text
        "run --version": ["run", "--version"],  # and its version line
        "plan": ["plan", "--site", "local", bundled_workflow(), "--dir", str(where / "plan")],
        "report": report_args(where),
        "report --json": [*report_args(where), "--json"],
        # the demo's first line comes before it plans: its own directory, never a temporary one left behind
        "demo": ["demo", "--dir", str(where / "demo")],
    }


NAMES = [
    "status",
    "sites",
    "sites show",
    "version",
    "help",
    "plan --help",
    "run --version",
    "plan",
    "report",
    "report --json",
    "demo",
]


@pytest.fixture(params=["buffered", "unbuffered"])
def buffering(request) -> dict[str, str]:
    """The environment: stdout buffered as Python has it by default (the last lines are written at exit), or
    written at once (PYTHONUNBUFFERED)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if request.param == "unbuffered":
        env["PYTHONUNBUFFERED"] = "1"
    return env


def run_with_stdout(argv: list[str], stdout: int, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pilot", *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        timeout=TIMEOUT,
        env=env,
    )


@pytest.mark.parametrize("name", NAMES)
def test_output_to_a_full_disk_is_one_line_and_exit_1(name, planned, tmp_path, buffering):
    argv = commands(planned, tmp_path)[name]
    with open("/dev/full", "wb") as full:
        done = run_with_stdout(argv, full.fileno(), tmp_path, buffering)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert lines[-1].endswith(
        ": cannot write its output (standard output): No space left on device; "
        "free space (or write elsewhere) and rerun the command"
    ), done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


@pytest.mark.parametrize("name", NAMES)
def test_a_reader_that_closed_the_pipe_ends_the_command_quietly(name, planned, tmp_path, buffering):
    argv = commands(planned, tmp_path)[name]
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line (| head -1 on a status longer than a pipe holds)
    try:
        done = run_with_stdout(argv, write_end, tmp_path, buffering)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, "")
