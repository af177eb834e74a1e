"""The one place that runs scheduler commands (squeue, qstat, ...): never through a shell.

Parsing lives in pure functions of each scheduler module, which take an
``Output`` and can be tested on captured output; only ``run_command`` starts
processes. A command that cannot run or times out is a transient
``SubmitError`` naming the command and its stderr, so the driver retries
instead of guessing.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Sequence

from pilot.errors import SubmitError


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
        res = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise SubmitError(f"{argv[0]}: command not found (is the scheduler's client on PATH?)", transient=True) from None
    except OSError as exc:
        raise SubmitError(f"{argv[0]}: cannot run: {exc.strerror}", transient=True) from None
    except subprocess.TimeoutExpired:
        raise SubmitError(f"{argv[0]}: no answer within {timeout:g} s", transient=True) from None
    return Output(tuple(argv), res.returncode, res.stdout, res.stderr)
