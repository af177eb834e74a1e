"""The argument parser of every ``pilot`` command: a bad command line is one line and exit status 2.

argparse itself prints the whole usage and exits; here the error becomes a
``UsageError`` that the CLI wrapper prints as ``prog: message (see prog --help)``.

argparse also makes a help formatter for every ``add_argument`` (to check the
option's metavar), and each one imports shutil (with bz2 and lzma) and asks for
the terminal's width: some 5 ms of CPU for ``pilot run``'s options, on every
MPI rank at start. Here the width is asked for once per process, the way
shutil.get_terminal_size does it, without shutil.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from typing import NoReturn

from pilot.errors import UsageError


def terminal_columns() -> int:
    """$COLUMNS if set, else the width of the terminal on stdout, else 80 (shutil.get_terminal_size's rule)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]  # sys.__stdout__ may be None: the except below handles it
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


@functools.cache
def _help_width() -> int:
    return terminal_columns() - 2  # as argparse takes it


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, with the terminal's width taken once per process."""

    def __init__(
        self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None
    ) -> None:
        super().__init__(prog, indent_increment, max_help_position, _help_width() if width is None else width)


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` that raises ``UsageError`` instead of printing usage and exiting."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")

    def _print_message(self, message: str, file=None) -> None:  # argparse's signature
        """Help and version text, whose write errors argparse drops (``--help > /dev/full`` said nothing, exit 0):
        here they reach the CLI wrapper, which says a full disk in one line and ends quietly on a closed pipe."""
        if message:
            (file or sys.stderr).write(message)
