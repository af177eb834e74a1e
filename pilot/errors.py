"""One error hierarchy so the CLI can print one line and pick the exit code.

Every error a user can cause derives from PilotError; the CLI wrapper
(pilot.cli.common) prints ``str(err)`` on one line (``file:line: message``
where a file is involved) and exits with ``err.exit_code``. Anything else is a
bug: one ``internal error`` line and exit status 70; ``-v`` adds the traceback
in both cases.
"""

from __future__ import annotations


class PilotError(Exception):
    """Base of all user-facing errors."""

    exit_code = 1


class UsageError(PilotError):
    """Bad command line."""

    exit_code = 2


class DagError(PilotError):
    """A problem in a DAG (or rescue) file, located by file and line."""

    exit_code = 2

    def __init__(self, file: str, line: int | None, message: str) -> None:
        self.file = file
        self.line = line
        self.message = message
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {message}")


class ConfigError(PilotError):
    """A problem in a configuration file or value."""

    exit_code = 2


class InfeasibleTask(PilotError):
    """A task asks for more than any host has: it could never run."""

    exit_code = 1


def shown(value: object) -> str:
    """A wrong value as an error line quotes it: its start only (a list of a million items is one line too)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class LockError(PilotError):
    """Another run holds the DAG lock."""

    exit_code = 1


class RunAborted(PilotError):
    """The run stopped before all tasks could finish (wall time, signal, host script)."""

    exit_code = 1


class OutOfSpace(PilotError):
    """A disk (or quota) is full: the message says what could not be written and what to run once there is room."""

    exit_code = 1


class SubmitError(PilotError):
    """A batch submission failed; ``transient`` says whether a retry may help."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient
