"""``pilot demo``: the whole chain on the bundled workflow, for a first look (and the container).

Plans the example diamond with label clustering for a site (``container``: the
Slurm of containers/Dockerfile; ``local``: this machine), submits and drives it
to the end, shows ``pilot status``, and, when pegasus-wms is installed, runs
pegasus-monitord and pegasus-statistics on every cluster and sums the jobs.
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
    """pegasus-monitord and pegasus-statistics on each cluster; print the job counts."""
    spec = importlib.util.find_spec("Pegasus")
    cli = os.path.join(list(spec.submodule_search_locations)[0], "cli")  # type: ignore[union-attr]
    env = dict(os.environ, HOME=tempfile.mkdtemp(prefix="pilot-demo-home-"))
    totals = [0, 0, 0, 0]
    print("\n== pegasus-monitord + pegasus-statistics per cluster", flush=True)
    for name in sorted(os.listdir(submit_dir)):
        cdir = os.path.join(submit_dir, name)
        dagman_out = os.path.join(cdir, f"{name}.dag.dagman.out")
        if not os.path.exists(dagman_out):
            continue
        subprocess.run([sys.executable, os.path.join(cli, "pegasus-monitord.py"), "-r", os.path.basename(dagman_out)],
                       cwd=cdir, env=env, capture_output=True)
        subprocess.run([sys.executable, os.path.join(cli, "pegasus-statistics.py"), "-s", "all", "."], cwd=cdir, env=env,
                       capture_output=True)
        summary = os.path.join(cdir, "statistics", "summary.txt")
        jobs = None
        if os.path.exists(summary):
            with open(summary, encoding="utf-8") as fh:
                jobs = next((line.split() for line in fh if line.startswith("Jobs")), None)
        if not jobs:
            print(f"{name}: no statistics (see {cdir})")
            return 1
        counts = [int(x) for x in jobs[1:5]]
        totals = [a + b for a, b in zip(totals, counts)]
        print(f"{name}: jobs succeeded {counts[0]}, failed {counts[1]}, incomplete {counts[2]}, total {counts[3]}")
    print(f"all clusters: jobs succeeded {totals[0]}, failed {totals[1]}, incomplete {totals[2]}, total {totals[3]}")
    return 0 if totals[0] == totals[3] and totals[3] > 0 else 1
