"""``pilot``: subcommand dispatch. Each subcommand lives in its own module."""

from __future__ import annotations

import sys
from typing import Sequence

from pilot import __version__
from pilot.cli.common import guarded

USAGE = """usage: pilot <command> [options]

commands:
  submit    plan a workflow and run its clusters as batch jobs (pilot submit --site NAME WORKFLOW)
  status    show the clusters of a submit directory
  cancel    cancel every batch job of a submit directory
  sites     list the site configs (pilot sites show NAME)
  demo      the whole chain on the bundled workflow (plan, submit, status, monitoring)
  plan      cluster a Pegasus workflow into PMC DAGs and batch scripts
  run       run a PMC-format DAG under MPI (mpiexec -n N pilot run [options] DAG)
  report    timeline PNG and numbers of a run (pilot report SUBMIT_DIR|CLUSTER_DIR|DAG [--json])
  version   print the version

'pilot <command> --help' describes a command."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command in ("-V", "--version", "version"):
        print(f"pilot {__version__}")
        return 0
    if command in ("submit", "status", "cancel", "sites"):
        from pilot.cli import submit

        entry = {"submit": submit.submit_main, "status": submit.status_main, "cancel": submit.cancel_main,
                 "sites": submit.sites_main}[command]
        return guarded(lambda: entry(rest), rest, f"pilot {command}")
    if command == "demo":
        from pilot.cli import demo

        return guarded(lambda: demo.main(rest), rest, "pilot demo")
    if command == "plan":
        from pilot.cli import plan

        return guarded(lambda: plan.main(rest), rest, "pilot plan")
    if command == "run":
        from pilot.runtime.launch import run

        return guarded(lambda: run(rest, prog="pilot run"), rest, "pilot run")
    if command == "report":
        from pilot.cli import report

        return guarded(lambda: report.main(rest), rest, "pilot report")
    print(f"pilot: unknown command {command!r}; commands: submit, status, cancel, sites, demo, plan, run, report, version (see pilot --help)", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
