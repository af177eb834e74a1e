"""pilot run's progress line: its text, log lines clearing it, and when stderr counts as a terminal."""

from __future__ import annotations

import io
import logging
import os
import pty
import subprocess
import sys

from pilot.monitor.liveline import CLEAR, LiveLine

PROBE = [sys.executable, "-c", "from pilot.monitor.liveline import stderr_reaches_terminal as f; print(f())"]


def test_line_is_drawn_at_flushes_cleared_for_log_lines_and_kept_at_the_end():
    out = io.StringIO()
    line = LiveLine(out)
    handler = logging.StreamHandler(out)
    line.attach(handler)
    logger = logging.getLogger("pilot.test-liveline")
    logger.addHandler(handler)
    try:
        line.run_started("wf.dag", 10, 2)
        line.status(3, 2, 4, 1)  # stored only: nothing drawn on the hot path
        assert out.getvalue() == ""
        line.flush()
        assert out.getvalue().startswith(CLEAR + "pilot: 3/10 done, 2 running, 1 failed, 4 ready [0:00:0")
        logger.warning("Task x failed")
        assert out.getvalue().endswith("]" + CLEAR + "Task x failed\n")
        line.status(9, 0, 0, 1)
        line.drained()
        line.flush()  # after the end nothing is redrawn
        assert out.getvalue().endswith(CLEAR + line.text() + "\n")
        line.close()
        assert out.getvalue().endswith("\n")
    finally:
        logger.removeHandler(handler)


def test_stderr_counts_as_a_terminal_only_when_it_is_one_or_a_launcher_forwards_it():
    captured = subprocess.run(PROBE, capture_output=True, text=True)  # a pipe read by this (non-launcher) process
    assert captured.stdout.strip() == "False"
    main, sub = pty.openpty()
    try:
        on_tty = subprocess.run(PROBE, stdout=subprocess.PIPE, stderr=sub, text=True)
        assert on_tty.stdout.strip() == "True"
    finally:
        os.close(main)
        os.close(sub)
