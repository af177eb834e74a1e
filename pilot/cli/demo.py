"""``pilot demo``: the whole chain on the bundled example workflow, for a first look.

Plans the example diamond (installed with the package, so it runs from any
directory) with label clustering for a site, submits and drives it to the
end, shows ``pilot status``, and, when pegasus-wms is installed, runs
pegasus-monitord and pegasus-statistics on every cluster and sums the jobs.
The default site, ``local``, needs no batch system, only an ``mpiexec``
(the MPICH wheel's, or one on PATH); the container image passes
``--site container`` for its Slurm.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from typing import NoReturn, Sequence

import pilot
from pilot.errors import ConfigError, UsageError

DEFAULT_SITE = "local"
DESCRIPTION = (
    "Run the whole chain on the bundled example workflow (Pegasus' diamond: four echo jobs in three labels): "
    "plan it with label clustering, submit and drive its three batch jobs on a site, show pilot status and, "
    "when pegasus-wms is installed, pegasus-monitord and pegasus-statistics for every cluster."
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def bundled_workflow() -> str:
    """The example diamond installed with the package (examples/diamond.yml in the source tree)."""
    return os.path.join(os.path.dirname(os.path.abspath(pilot.__file__)), "examples", "diamond.yml")


def _check_launcher(site_name: str) -> None:
    """A site without a batch system runs the pilot under this machine's mpiexec: say how to get one first."""
    from pilot.sites import load_site

    site = load_site(site_name)
    if site.scheduler != "local":
        return
    here = os.path.join(os.path.dirname(sys.executable), site.launcher)
    if not os.path.exists(here) and shutil.which(site.launcher) is None:
        raise ConfigError(
            f"pilot demo --site {site_name}: no {site.launcher} next to {sys.executable} or on PATH; "
            f"install one with pip install 'pilot-hpc[mpich]' (or load your MPI module)"
        )


def main(argv: Sequence[str]) -> int:
    p = _Parser(prog="pilot demo", description=DESCRIPTION)
    p.add_argument("--site", default=DEFAULT_SITE,
                   help=f"site config (default: {DEFAULT_SITE}, this machine without a batch system; "
                   "container: the Slurm of the container image)")
    p.add_argument("--workflow", help="Pegasus workflow (default: the bundled diamond)")
    p.add_argument("--dir", help="submit directory (default: a new one under the system temp dir)")
    p.add_argument("-v", "--verbose", action="count", default=0, help="show tracebacks of errors")
    ns = p.parse_args(list(argv))
    workflow = ns.workflow or bundled_workflow()
    if not os.path.exists(workflow):
        if ns.workflow:
            raise ConfigError(f"{workflow}: no such workflow file")
        raise ConfigError(f"{workflow}: the bundled example is missing: reinstall pilot-hpc, or pass --workflow PATH")
    _check_launcher(ns.site)
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
