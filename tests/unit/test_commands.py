"""The ``pilot`` command table and ``pilot run``'s reading of its command line on every MPI rank."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from pilot.cli import main as cli_main
from pilot.cli import run as cli_run
from pilot.errors import UsageError

CLI = Path(cli_main.__file__).parent
# the dispatch, the error wrapper, pilot-mpi-cluster, the pegasus-* executables pilot pegasus-shims writes
NOT_COMMANDS = {"__init__", "main", "common", "pmc", "pegasus_tools"}


def test_every_command_is_a_module_of_the_same_name_and_every_such_module_a_command():
    modules = {p.stem for p in CLI.glob("*.py")} - NOT_COMMANDS
    assert modules == {name.replace("-", "_") for name in cli_main.COMMANDS}  # pilot pegasus-shims: pegasus_shims.py
    for name in cli_main.COMMANDS:
        assert callable(importlib.import_module(f"pilot.cli.{name.replace('-', '_')}").main), name


def test_help_lists_every_command_once_and_an_unknown_one_names_them(capsys):
    assert cli_main.main(["--help"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    assert listed == [*cli_main.COMMANDS, "version"]
    assert cli_main.main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ", ".join([*cli_main.COMMANDS, "version"]) in err


def test_no_command_is_usage_and_exit_2(capsys):
    assert cli_main.main([]) == 2
    assert "usage: pilot <command>" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--help"], ["-V", "x.dag"], ["--version"]])
def test_only_rank_0_prints_help_and_version(monkeypatch, capsys, argv):
    monkeypatch.setenv("PMI_RANK", "3")
    assert cli_run.main(argv) == 0
    assert capsys.readouterr() == ("", "")


def test_a_bad_command_line_is_said_once_by_rank_0(monkeypatch, capsys):
    monkeypatch.setenv("PMI_RANK", "2")
    assert cli_run.main(["-t", "0", "x.dag"]) == 2
    assert capsys.readouterr() == ("", "")
    monkeypatch.setenv("PMI_RANK", "0")
    with pytest.raises(UsageError, match="-t/--tries: '0' must be at least 1"):
        cli_run.main(["-t", "0", "x.dag"], prog="pilot-mpi-cluster")


def test_the_options_go_to_the_runtime(monkeypatch):
    seen = []
    monkeypatch.setattr(cli_run.launch, "run", lambda opts, prog, **_: seen.append((opts, prog)) or 7)
    monkeypatch.delenv("PMI_RANK", raising=False)
    assert cli_run.main(["-t", "3", "--max-wall-time", "0", "x.dag"], prog="pilot-mpi-cluster") == 7
    ((opts, prog),) = seen
    assert (opts.dag, opts.tries, opts.max_wall_time, prog) == ("x.dag", 3, None, "pilot-mpi-cluster")
