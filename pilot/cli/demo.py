"""``pilot demo``: the whole chain on the bundled workflow, for a first look (and the container).

Plans the example diamond with label clustering for a site (``container``: the
Slurm of containers/Dockerfile; ``local``: this machine), submits and drives it
to the end, shows ``pilot status``, and, when pegasus-wms is installed, shows
the submit directory as the one Pegasus workflow it is: pegasus-status and
pegasus-statistics on the database that the pegasus-monitord started by
``pilot submit`` filled during the run.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
from typing import NoReturn, Sequence

from pilot.errors import ConfigError, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def default_workflow() -> str:
    for candidate in ("diamond.yml", os.path.join("examples", "diamond.yml"), "/opt/examples/diamond.yml"):
        if os.path.exists(candidate):
            return candidate
    raise ConfigError("no example workflow found: pass --workflow PATH (examples/diamond.yml in a checkout)")


def main(argv: Sequence[str]) -> int:
    p = _Parser(prog="pilot demo", description=__doc__.splitlines()[0])
    p.add_argument("--site", default="container", help="site config (default: container)")
    p.add_argument("--workflow", help="Pegasus workflow (default: the bundled diamond)")
    p.add_argument("--dir", help="submit directory (default: a new one under the system temp dir)")
    p.add_argument("-v", "--verbose", action="count", default=0)
    ns = p.parse_args(list(argv))
    workflow = ns.workflow or default_workflow()
    if not os.path.exists(workflow):
        raise ConfigError(f"{workflow}: no such workflow file")
    submit_dir = ns.dir or os.path.join(tempfile.mkdtemp(prefix="pilot-demo-"), "submit")
    me = [sys.executable, "-m", "pilot"]
    print(f"== pilot submit --site {ns.site} --cluster label {workflow}", flush=True)
    code = subprocess.call([*me, "submit", "--site", ns.site, "--cluster", "label", "--poll", "0.5", workflow,
                            "--dir", submit_dir])
    if not os.path.exists(os.path.join(submit_dir, "clusters.yml")):
        return code or 1  # planning failed; pilot submit said why
    print(f"\n== pilot status {submit_dir}", flush=True)
    subprocess.call([*me, "status", submit_dir])
    if importlib.util.find_spec("Pegasus") is not None:
        code = monitoring(submit_dir) or code
    else:
        print("\n(pegasus-wms is not installed: pip install 'pegasus-wms==5.1.*' for monitord and statistics)")
    return code


def monitoring(submit_dir: str) -> int:
    """pegasus-status and pegasus-statistics on the whole run; print its task and job counts."""
    from pilot.submit.monitord import pegasus_cli

    status, stats = pegasus_cli("pegasus-status"), pegasus_cli("pegasus-statistics")
    if status is None or stats is None:
        print("(pegasus-wms is incomplete: no pegasus-status/pegasus-statistics)")
        return 1
    print(f"\n== pegasus-status -Q -l {submit_dir}", flush=True)
    subprocess.call([*status, "-Q", "-l", submit_dir])
    print(f"\n== pegasus-statistics -s all {submit_dir}", flush=True)
    subprocess.run([*stats, "-s", "all", submit_dir], cwd=submit_dir, capture_output=True)
    summary = os.path.join(submit_dir, "statistics", "summary.txt")
    rows: dict[str, list[str]] = {}
    if os.path.exists(summary):
        with open(summary, encoding="utf-8") as fh:
            rows = {line.split()[0]: line.split() for line in fh if line.startswith(("Tasks", "Jobs"))}
    if set(rows) != {"Tasks", "Jobs"}:
        print(f"no statistics (see {os.path.join(submit_dir, 'monitord.out')})")
        return 1
    for kind, what in (("Tasks", "tasks (Pegasus jobs)"), ("Jobs", "jobs (clusters)")):
        r = rows[kind]
        print(f"{what}: succeeded {r[1]}, failed {r[2]}, incomplete {r[3]}, total {r[4]}, retries {r[5]}")
    ok = all(rows[k][1] == rows[k][4] and int(rows[k][4]) > 0 for k in rows)
    return 0 if ok else 1
