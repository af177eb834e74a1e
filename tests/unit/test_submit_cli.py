"""pilot submit/status/cancel at the command line: help states defaults, bad input is one line and exit 2."""

from __future__ import annotations

import pytest

from pilot.cli.main import main
from tests.unit.fake_queue import make_plan


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_submit_help_states_defaults_and_accepts_a_submit_dir(capsys):
    with pytest.raises(SystemExit):
        main(["submit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for needle in (
        "(default: 1, Pegasus' default)",
        "--max-resubmits N",
        "(default: 3)",
        "(default: 2)",
        "whole",
        "or a submit directory written by pilot plan",
    ):
        assert needle in text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["submit", "wf.yml"], "--site is required to plan a workflow"),
        (["submit", "--retry", "-1", "--site", "local", "wf.yml"], "argument --retry: '-1' must be at least 0"),
        (["submit", "--poll", "0", "--site", "local", "wf.yml"], "argument --poll: '0' must be more than 0"),
        (["status", "/nonexistent/sub"], "/nonexistent/sub: no clusters.yml"),
        (["cancel", "/nonexistent/sub"], "/nonexistent/sub: no clusters.yml"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err


def test_corrupt_state_is_one_line_naming_the_file(capsys, tmp_path):
    sub = make_plan(tmp_path / "sub", {"a": []})
    (tmp_path / "sub" / "submit.state.json").write_text('{"format": 1, "plan_id": ')
    for command in ("status", "cancel", "submit"):
        code, _, err = run(capsys, command, sub)
        assert code == 2 and f"{sub}/submit.state.json:1: not valid JSON" in err and err.count("\n") == 1, command


def test_status_and_cancel_of_a_plan_never_submitted(capsys, tmp_path):
    sub = make_plan(tmp_path / "sub", {"a": [], "b": ["a"]})
    code, out, _ = run(capsys, "status", sub)
    assert (
        code == 3 and "waiting" in out and out.splitlines()[-1].split() == ["2", "2", "0", "0", "0", "0.0", "Stopped"]
    )
    code, out, _ = run(capsys, "cancel", sub)
    assert code == 0 and "nothing was submitted" in out


def test_submit_lock_is_removed_when_the_driver_lets_go(tmp_path):
    """A finished pilot submit leaves no submit.lock; a file left by a killed one is taken over."""
    import os

    from pilot.submit.lock import LOCK_FILE, SubmitLock, holder

    (tmp_path / LOCK_FILE).write_text("12345\n")  # what a SIGKILLed driver leaves: no lock held on it
    first = SubmitLock(str(tmp_path))
    first.acquire()
    assert holder(str(tmp_path)) == os.getpid()
    first.release()
    assert not (tmp_path / LOCK_FILE).exists() and holder(str(tmp_path)) is None
    again = SubmitLock(str(tmp_path))
    again.acquire()
    assert holder(str(tmp_path)) == os.getpid()
    again.release()
