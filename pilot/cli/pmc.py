"""``pilot-mpi-cluster``: flag-compatible stand-in for pegasus-mpi-cluster.

A Pegasus transformation catalog entry for ``pegasus::mpiexec`` can point at
this program instead of PMC. It is ``pilot run`` under PMC's name, which its
messages use.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pilot.cli.common import guarded


def main(argv: Sequence[str] | None = None) -> int:
    from pilot.cli import run

    args = list(sys.argv[1:] if argv is None else argv)
    return guarded(lambda: run.main(args, prog="pilot-mpi-cluster"), args, "pilot-mpi-cluster")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
