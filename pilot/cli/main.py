"""``pilot``: subcommand dispatch over the one table of commands.

Each command NAME is the module ``pilot.cli.NAME`` (a dash in NAME is an underscore there), whose ``main(argv)``
parses, calls the library, prints and returns the exit code; it is imported
only when it is the command run (``pilot run`` starts on every MPI rank).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from pilot import __version__
from pilot.cli.common import guarded

# name -> what ``pilot --help`` says of it, in the order it says it
COMMANDS = {
    "submit": "plan a workflow and run its clusters as batch jobs (pilot submit --site NAME WORKFLOW)",
    "status": "show the clusters of a submit directory",
    "cancel": "cancel every batch job of a submit directory",
    "sites": "list the site configs (pilot sites show NAME)",
    "demo": "the whole chain on the bundled workflow (plan, submit, status, monitoring)",
    "plan": "cluster a Pegasus workflow into PMC DAGs and batch scripts",
    "run": "run a PMC-format DAG under MPI (mpiexec -n N pilot run [options] DAG)",
    "report": "timeline PNG and numbers of a run (pilot report SUBMIT_DIR|CLUSTER_DIR|DAG [--json])",
    "pegasus-shims": "write pegasus-plan, pegasus-run, ... that run a Pegasus.api script through pilot (DIR/bin)",
}
VERSION = ("-V", "--version", "version")
HELP = ("-h", "--help", "help")


def usage() -> str:
    lines = [f"  {name:<9} {summary}" for name, summary in COMMANDS.items()]
    lines.append(f"  {'version':<9} print the version")
    return (
        "usage: pilot <command> [options]\n\ncommands:\n"
        + "\n".join(lines)
        + "\n\n'pilot <command> --help' describes a command."
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv else ""
    if command in COMMANDS:
        entry = importlib.import_module(f"pilot.cli.{command.replace('-', '_')}").main
        return guarded(lambda: entry(argv[1:]), argv[1:], f"pilot {command}")
    return guarded(lambda: _top(argv), argv, "pilot")  # help and version go through the same guard: | head, > /dev/full


def _top(argv: list[str]) -> int:
    """``pilot``, ``pilot --help``, ``pilot version`` and an unknown command."""
    if not argv or argv[0] in HELP:
        print(usage())
        return 0 if argv else 2
    if argv[0] in VERSION:
        print(f"pilot {__version__}")
        return 0
    print(
        f"pilot: unknown command {argv[0]!r}; commands: {', '.join([*COMMANDS, 'version'])} (see pilot --help)",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
