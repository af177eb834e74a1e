"""``pilot status``: the clusters of a submit directory and how far each got; the exit status says how the run stands."""

from __future__ import annotations

from collections.abc import Sequence

from pilot.util.cmdline import Parser


def main(argv: Sequence[str]) -> int:
    from pilot.submit.session import status

    p = Parser(
        prog="pilot status",
        description="Show the clusters of a submit directory (waiting, queued with the "
        "scheduler's reason, held, running with tasks done and running now, done, failed, not run) and the "
        "task totals as pegasus-status counts them. Exit status: 0 all done, 1 failed (or cancelled), "
        "2 bad input, 3 not finished (still running, or stopped: resume with pilot submit DIR).",
    )
    p.add_argument("submit_dir", help="a submit directory written by pilot plan or pilot submit")
    p.add_argument("-v", "--verbose", action="count", default=0, help="show tracebacks of errors")
    ns = p.parse_args(list(argv))
    result = status(ns.submit_dir)
    print(result.text)
    return int(result.code)
