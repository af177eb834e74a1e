"""The one place that runs scheduler commands (squeue, qstat, ...): never through a shell.

Parsing lives in pure functions of each scheduler module, which take an
``Output`` and can be tested on captured output; only ``run_command`` starts
processes. A command that cannot run or times out is a transient
``SubmitError`` naming the command and its stderr, so the driver retries
instead of guessing.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from pilot.errors import SubmitError

log = logging.getLogger("pilot.submit")

# Seconds a scheduler command may take before the driver says that it waits for it (a hung controller makes
# sbatch or squeue wait up to the site's cmd_timeout, which is a minute by default: no silence that long).
SLOW_COMMAND = 10.0


@dataclass(frozen=True)
class Output:
    """What one scheduler command printed, and how it exited."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str = ""

    def failure(self) -> SubmitError:
        """The error for a command that failed: its own words, on one line."""
        said = " / ".join(line.strip() for line in self.stderr.splitlines() if line.strip()) or "no message"
        return SubmitError(f"{' '.join(self.argv[:1])} failed (exit {self.returncode}): {said}", transient=True)


def run_command(argv: Sequence[str], timeout: float) -> Output:
    """Run ``argv`` and return its output whatever its exit status; raise only if it could not run."""
    try:
        res = run_saying_waits(argv, timeout)
    except FileNotFoundError:
        raise SubmitError(
            f"{argv[0]}: command not found (is the scheduler's client on PATH?)", transient=True
        ) from None
    except OSError as exc:
        raise SubmitError(f"{argv[0]}: cannot run: {exc.strerror}", transient=True) from None
    except subprocess.TimeoutExpired:
        raise SubmitError(f"{argv[0]}: no answer within {timeout:g} s", transient=True) from None
    return Output(tuple(argv), res.returncode, res.stdout, res.stderr)


def run_saying_waits(
    argv: Sequence[str], timeout: float | None, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True, timeout=timeout)`` without stdin, which logs one
    line when the command has not answered within SLOW_COMMAND seconds (and how long it is given)."""
    with subprocess.Popen(
        list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, cwd=cwd
    ) as proc:
        try:
            try:
                out, err = proc.communicate(timeout=SLOW_COMMAND if timeout is None else min(SLOW_COMMAND, timeout))
            except subprocess.TimeoutExpired:
                if timeout is not None and timeout <= SLOW_COMMAND:
                    raise
                log.warning(
                    "%s has not answered for %g s; waiting%s (site key cmd_timeout)",
                    argv[0],
                    SLOW_COMMAND,
                    "" if timeout is None else f" up to {timeout:g} s",
                )
                out, err = proc.communicate(timeout=None if timeout is None else timeout - SLOW_COMMAND)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
