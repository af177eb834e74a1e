"""``pilot cancel``: stop the driver of a submit directory, cancel every batch job it submitted and end any
pilot run of its clusters that outlived its job; exit 1, with one line per thing, when something still runs."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pilot.cli.submit import site_choices
from pilot.util.cmdline import Parser


def main(argv: Sequence[str]) -> int:
    from pilot.contracts.clusters import is_submit_dir
    from pilot.submit.daemon import parsl_to_log
    from pilot.submit.session import cancel

    p = Parser(
        prog="pilot cancel",
        description="Stop the pilot submit driving a submit directory (if one still does), "
        "cancel every batch job it submitted and end any pilot run of its clusters that outlived its job (found "
        "by its DAG lock on this host). Exit status: 0 when nothing of the run is left running, 1 when something "
        "could not be ended (one line each; those clusters keep their state).",
    )
    p.add_argument("submit_dir", help="a submit directory written by pilot plan or pilot submit")
    p.add_argument("--site", help="site config(s) the run used (default: those recorded in submit.state.json)")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a site config key (repeatable)"
    )
    p.add_argument("-v", "--verbose", action="count", default=0, help="show tracebacks of errors")
    ns = p.parse_args(list(argv))
    if is_submit_dir(ns.submit_dir):  # (a wrong directory is told so by cancel, and gets no log)
        parsl_to_log(ns.submit_dir)
    cancelled = cancel(ns.submit_dir, site_choices(ns.site, ns.set))
    if cancelled is None:
        print("pilot cancel: nothing was submitted from this directory")
        return 0
    ids = cancelled.job_ids
    print(f"pilot cancel: cancelled {len(ids)} batch job(s){': ' + ' '.join(ids) if ids else ''}")
    for line in cancelled.ended:
        print(f"pilot cancel: {line}")
    for line in cancelled.left:
        print(f"pilot cancel: {line}", file=sys.stderr)
    return 1 if cancelled.left else 0
