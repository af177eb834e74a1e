"""The one place that turns exceptions into exit codes and one-line messages."""

from __future__ import annotations

import sys
from typing import Callable, Sequence

from pilot.errors import PilotError


def wants_traceback(argv: Sequence[str]) -> bool:
    return any(a == "--verbose" or (a.startswith("-") and not a.startswith("--") and set(a[1:]) == {"v"}) for a in argv)


def _print_traceback() -> None:
    import traceback  # only with -v: every MPI rank imports this module at start-up

    traceback.print_exc()


def guarded(func: Callable[[], int], argv: Sequence[str], prog: str) -> int:
    """Run ``func``; a PilotError becomes one line on stderr and its exit code."""
    try:
        return func()
    except PilotError as err:
        if wants_traceback(argv):
            _print_traceback()
        print(_one_line(str(err)), file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # a bug: say so plainly, details on request
        if wants_traceback(argv):
            _print_traceback()
        print(f"{prog}: internal error: {type(err).__name__}: {_one_line(str(err))} (run with -v for the traceback)", file=sys.stderr)
        return 70


def _one_line(text: str) -> str:
    return " ".join(text.split("\n"))
