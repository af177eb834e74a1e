"""``pilot demo``: the whole chain on the bundled example workflow, for a first look.

Plans the example diamond (installed with the package, so it runs from any
directory) with label clustering for a site, submits and drives it to the
end, shows ``pilot status``, and, when pegasus-wms is installed, shows the
submit directory as the one Pegasus workflow it is: pegasus-status and
pegasus-statistics on the database that the pegasus-monitord started by
``pilot submit`` filled during the run. The default site, ``local``, needs no
batch system, only an ``mpiexec`` (the MPICH wheel's, or one on PATH); the
container image passes ``--site container`` for its Slurm.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence

import pilot
from pilot.contracts.clusters import is_submit_dir
from pilot.errors import ConfigError
from pilot.util.cmdline import Parser

DEFAULT_SITE = "local"
MONITORING_TOOLS = ("pegasus-status", "pegasus-statistics")
PEGASUS_HINT = "pip install 'pegasus-wms==5.1.*'"
DESCRIPTION = (
    "Run the whole chain on the bundled example workflow (Pegasus' diamond: four echo jobs in three labels): "
    "plan it with label clustering, submit and drive its three batch jobs on a site, show pilot status and, "
    "when pegasus-wms is installed, pegasus-status and pegasus-statistics on the run as one Pegasus workflow."
)


def bundled_workflow() -> str:
    """The example diamond installed with the package (examples/diamond.yml in the source tree)."""
    return os.path.join(os.path.dirname(os.path.abspath(pilot.__file__)), "examples", "diamond.yml")


def _check_launcher(site_name: str) -> None:
    """A site without a batch system runs the pilot under this machine's mpiexec: say how to get one first."""
    from pilot.sites import load_site
    from providers import scheduler_for

    site = load_site(site_name)
    if not scheduler_for(site).single_host:
        return
    here = os.path.join(os.path.dirname(sys.executable), site.launcher)
    if not os.path.exists(here) and shutil.which(site.launcher) is None:
        raise ConfigError(
            f"pilot demo --site {site_name}: no {site.launcher} next to {sys.executable} or on PATH; "
            f"install one with pip install 'pilot-hpc[mpich]' (or load your MPI module)"
        )


def main(argv: Sequence[str]) -> int:
    p = Parser(prog="pilot demo", description=DESCRIPTION)
    p.add_argument(
        "--site",
        default=DEFAULT_SITE,
        help=f"site config (default: {DEFAULT_SITE}, this machine without a batch system; "
        "container: the Slurm of the container image)",
    )
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
    code = subprocess.call(
        [*me, "submit", "--site", ns.site, "--cluster", "label", "--poll", "0.5", workflow, "--dir", submit_dir]
    )
    if not is_submit_dir(submit_dir):
        return code or 1  # planning failed; pilot submit said why
    print(f"\n== pilot status {submit_dir}", flush=True)
    subprocess.call([*me, "status", submit_dir])
    if pegasus_tools():
        code = monitoring(submit_dir) or code
    else:
        # pilot-hpc installs only pegasus-wms.worker (pegasus-transfer): the run is whole without the monitoring tools
        print(
            f"\n(monitoring step skipped: pegasus-wms is not installed; {PEGASUS_HINT} for pegasus-status "
            "and pegasus-statistics on the run)"
        )
    where = os.path.dirname(os.path.abspath(submit_dir))
    print(
        f"\nThe run is in {submit_dir}; its outputs are in {os.path.join(where, 'wf-output')}"
        + ("" if ns.dir else f"; remove it all with: rm -rf {where}")
    )
    return code


def pegasus_tools() -> bool:
    """Whether pegasus-wms's pegasus-status and pegasus-statistics are there (the Pegasus package alone may be
    pegasus-wms.worker's, which pilot-hpc installs for pegasus-transfer)."""
    from pilot.submit.monitord import pegasus_cli

    return all(pegasus_cli(tool) is not None for tool in MONITORING_TOOLS)


def monitoring(submit_dir: str) -> int:
    """pegasus-status and pegasus-statistics on the whole run; print its task and job counts."""
    from pilot.submit.monitord import pegasus_cli
    from pilot.submit.statistics import workflow_statistics

    status = pegasus_cli("pegasus-status")
    assert status is not None  # pegasus_tools() said so
    print(f"\n== pegasus-status -Q -l {submit_dir}", flush=True)
    subprocess.call([*status, "-Q", "-l", submit_dir])
    print(f"\n== pegasus-statistics -s all {submit_dir}", flush=True)
    stats = workflow_statistics(submit_dir)
    if stats is None:
        print(f"no statistics (see {os.path.join(submit_dir, 'monitord.out')})")
        return 1
    for counts, what in ((stats.tasks, "tasks (Pegasus jobs)"), (stats.jobs, "jobs (clusters)")):
        print(
            f"{what}: succeeded {counts.succeeded}, failed {counts.failed}, incomplete {counts.incomplete}, "
            f"total {counts.total}, retries {counts.retries}"
        )
    return 0 if stats.tasks.complete and stats.jobs.complete else 1
