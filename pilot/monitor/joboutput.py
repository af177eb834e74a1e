"""The POST step of one cluster attempt: keep its job output as ``<cluster>.out.NNN``, say how it ended.

A cluster's batch job runs ``pilot run -o <cluster>.out -e <cluster>.err
--invocation-records``: the -o file collects its tasks' stdout, an invocation
record and a ``[cluster-task]`` record per task, and the ``[cluster-summary]``.
After each attempt the driver renames both files to the attempt's number, as
pegasus-exitcode does for a Pegasus job (DAGMan's POST script), which is where
pegasus-monitord reads a clustered job's records. A file the job never wrote
(it died first) is created empty, so the tools point at files that exist.

Runnable as the root DAG's POST script: ``python -m pilot.monitor.joboutput
CLUSTER_DIR CLUSTER`` takes the first unused number and exits 0 when the
pilot's result says the cluster is done, 1 otherwise.
"""

from __future__ import annotations

import os
import sys

from pilot.contracts.result import ResultError, RunResult, read_result
from pilot.util.safeopen import open_file


def rotate(cluster_dir: str, cluster: str, seq: int | None = None) -> tuple[str, str]:
    """Rename ``<cluster>.out``/``.err`` to ``.out.NNN``/``.err.NNN``; return the new paths."""
    base = os.path.join(cluster_dir, cluster)
    if seq is None:
        seq = 0
        while os.path.exists(f"{base}.out.{seq:03d}"):
            seq += 1
    paths = []
    for kind in ("out", "err"):
        target = f"{base}.{kind}.{seq:03d}"
        try:
            os.replace(f"{base}.{kind}", target)
        except FileNotFoundError:
            open_file(target, "a").close()
        paths.append(target)
    return paths[0], paths[1]


def outcome(cluster_dir: str, cluster: str) -> tuple[int, RunResult | None]:
    """(exit status of the attempt as DAGMan would see it, the pilot's result or None).

    No result, or one that cannot be read, is a failed attempt (status 1): the
    driver reports the unreadable file itself.
    """
    try:
        result = read_result(os.path.join(cluster_dir, cluster + ".dag"))
    except ResultError:
        return 1, None
    if result is None:
        return 1, None
    return (0 if result.ok else result.exit_code or 1), result


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m pilot.monitor.joboutput CLUSTER_DIR CLUSTER", file=sys.stderr)
        return 2
    rotate(argv[0], argv[1])
    return 0 if outcome(argv[0], argv[1])[0] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
