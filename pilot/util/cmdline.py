"""The argument parser of every ``pilot`` command: a bad command line is one line and exit status 2.

argparse itself prints the whole usage and exits; here the error becomes a
``UsageError`` that the CLI wrapper prints as ``prog: message (see prog --help)``.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from pilot.errors import UsageError


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` that raises ``UsageError`` instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")
