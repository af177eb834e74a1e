"""The one place that turns exceptions into exit codes and one-line messages."""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable, Sequence

from pilot.errors import PilotError
from pilot.util import stdstreams

# What a shell reports for a program that SIGPIPE ended: ``yes | head -1`` and ``pilot status DIR | head -1``
# read the same to a script (Python ignores SIGPIPE, so the closed pipe comes as BrokenPipeError instead).
EXIT_CLOSED_PIPE = 128 + 13


def wants_traceback(argv: Sequence[str]) -> bool:
    return any(a == "--verbose" or (a.startswith("-") and not a.startswith("--") and set(a[1:]) == {"v"}) for a in argv)


def _print_traceback() -> None:
    import traceback  # only with -v: every MPI rank imports this module at start-up

    traceback.print_exc()


def guarded(func: Callable[[], int], argv: Sequence[str], prog: str) -> int:
    """Run ``func``; a PilotError becomes one line on stderr and its exit code.

    Output that cannot be written is the user's situation too: a reader that closed the pipe (``| head``)
    ends the command quietly, as SIGPIPE ends other Unix tools; a full disk, or a stdout that fails
    otherwise (a terminal gone: EIO), is one line that says what could not be written, exit status 1.
    stdout is flushed here so that its last buffered lines fail here, not in the interpreter's exit,
    which would report them as "Exception ignored" and exit 120.
    """
    stdout = sys.stdout = stdstreams.Watched(sys.stdout)
    try:
        try:
            code = func()
        except SystemExit:  # argparse's --help and --version: their text is flushed here too
            stdout.flush()
            raise
        stdout.flush()
        return code
    except PilotError as err:
        if wants_traceback(argv):
            _print_traceback()
        _say(_one_line(str(err)))
        return err.exit_code
    except KeyboardInterrupt:
        _say(f"{prog}: interrupted")
        return 130
    except OSError as err:
        if err is stdout.error:
            stdstreams.discard(stdout.stream)
            if err.errno == errno.EPIPE:
                return EXIT_CLOSED_PIPE  # the reader has what it wanted: nothing to say
        elif not stdstreams.is_no_space(err):
            return _internal(err, argv, prog)
        if wants_traceback(argv):
            _print_traceback()
        what = "its output (standard output)" if err is stdout.error else err.filename or "a file"
        how = "free space (or write elsewhere)" if stdstreams.is_no_space(err) else "send the output elsewhere"
        _say(f"{prog}: cannot write {what}: {err.strerror}; {how} and rerun the command")
        return 1
    except Exception as err:  # noqa: BLE001 - a bug: say so plainly, details on request
        return _internal(err, argv, prog)
    finally:
        sys.stdout = stdout.stream


def _internal(err: Exception, argv: Sequence[str], prog: str) -> int:
    if wants_traceback(argv):
        _print_traceback()
    _say(f"{prog}: internal error: {type(err).__name__}: {_one_line(str(err))} (run with -v for the traceback)")
    return 70


def _say(line: str) -> None:
    """One line on stderr; a stderr that cannot take it (closed, full) is left silent, not a second error."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        stdstreams.discard(sys.stderr)


def _one_line(text: str) -> str:
    return " ".join(text.split("\n"))
