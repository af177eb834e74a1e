"""``pilot report PATH``: timeline PNG and numbers of a run (submit directory, cluster directory or DAG)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from pilot.util.cmdline import Parser


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="pilot report",
        description="Where the time of a run went: a timeline PNG (one row per worker "
        "slot, one panel per cluster job) and its numbers (makespan, utilisation, critical path, "
        "per-transformation runtimes, tries and failures).",
    )
    p.add_argument("path", help="a submit directory (pilot plan/submit), a cluster directory, or a DAG that ran")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON instead of text")
    p.add_argument(
        "--png",
        metavar="FILE",
        help="where to write the timeline (default: report.png in the directory, " "<dag>.report.png for a DAG)",
    )
    p.add_argument("--no-png", action="store_true", help="numbers only")
    p.add_argument(
        "--stdout",
        action="append",
        default=[],
        metavar="FILE",
        help="also read [cluster-task] records from this captured stdout of pilot run (repeatable)",
    )
    p.add_argument("-v", "--verbose", action="count", default=0, help="show tracebacks of errors")
    return p


def main(argv: Sequence[str]) -> int:
    from pilot.report import plot, runs, stats

    ns = build_parser().parse_args(list(argv))
    clusters = runs.load(ns.path, ns.stdout)
    numbers = stats.summarize(clusters)
    png = None
    hint = None
    if not ns.no_png:
        if plot.available():
            png = ns.png or (os.path.join(ns.path, "report.png") if os.path.isdir(ns.path) else ns.path + ".report.png")
            plot.draw(clusters, numbers, png)
            numbers["png"] = os.path.abspath(png)
        else:
            hint = "pilot report: no timeline: matplotlib is not installed (pip install 'pilot-hpc[plot]')"
    if ns.json:  # a reader that closes the pipe early (| head) ends the command quietly: pilot.cli.common
        json.dump(numbers, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print("\n".join(stats.text(numbers)))
        if png:
            print(f"timeline: {png}")
    if hint:
        print(hint, file=sys.stderr)
    return 0
