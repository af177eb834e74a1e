"""pegasus-plan, pegasus-run, pegasus-status and pegasus-remove answered by pilot, as Pegasus.api calls them.

Pegasus.api's ``Workflow.plan(submit=True).wait()`` runs ``$PEGASUS_HOME/bin/pegasus-plan ... --json``
(PEGASUS_HOME: two levels above the ``pegasus-version`` found on PATH), reads ``submit_dir`` from the
JSON it prints on stdout, loads ``braindump.yml`` there, and then polls the submit directory's
``*.dag.dagman.out`` files itself (and ``condor_q -json``) until the root DAG's EXITING line.
``.remove()`` runs pegasus-remove DIR, ``.run()`` pegasus-run --json DIR, and ``.analyze()`` /
``.statistics()`` the pegasus-wms tools of those names. pilot writes the braindump and the root
dagman.out in DAGMan's format, so the tools here only translate command lines: pegasus-plan's
options into pilot plan's (pilot submit --detach's with --submit), and print what Pegasus.api
parses. ``pilot pegasus-shims DIR`` writes the executables that call :func:`tool`.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from pilot import __version__
from pilot.errors import PilotError, UsageError
from pilot.util.boundedload import load_pegasus

# The environment variable naming the pilot site config the shims plan for (pilot pegasus-shims --site);
# unset: the first of pegasus-plan's --sites, as the name of a pilot site config.
SITE_ENV = "PILOT_PEGASUS_SITE"

# pegasus-plan options pilot has no use for: what Pegasus does with them is HTCondor's or the Java
# planner's business (names, JVM options, DAGMan arguments); one warning each, the plan goes on.
IGNORED = {
    "basename": "--basename",
    "job_prefix": "--job-prefix",
    "forward": "--forward",
    "force_replan": "--force-replan",
    "relative_submit_dir": "--relative-submit-dir",
    "randomdir": "--randomdir",
    "java": "-X",
}
# Options that say where data comes from or goes to in ways pilot's plan cannot follow: refused, since
# planning without them would read or write other files than the user asked for.
REFUSED = {
    "input_dir": "name the input files in the replica catalog (Workflow.add_replica_catalog) instead",
    "output_dir": "pilot stages outputs to the output site's storage directory; set that directory in the site catalog",
    "staging_site": "pilot runs jobs on the execution site's shared file system (sharedfs); leave staging_sites out",
    "transformations_dir": "name the executables in the transformation catalog instead",
    "reuse": "give the earlier run's outputs as a replica file with cache=[...] instead",
}


@dataclass
class PlanCall:
    """One pegasus-plan command line, as pilot will run it."""

    pilot_argv: list[str]  # pilot submit|plan and its options, the workflow last
    submit_dir: str  # absolute, as Pegasus.api's wait compares it with os.walk's paths
    submit: bool
    json: bool
    warnings: list[str] = field(default_factory=list)


def plan_parser() -> argparse.ArgumentParser:
    """pegasus-plan's options as Pegasus.api's get_planner_args spells them (and pegasus-plan's short forms)."""
    p = argparse.ArgumentParser(prog="pegasus-plan", description="pegasus-plan answered by pilot (pilot pegasus-shims)")
    p.add_argument("workflow", nargs="?", default="workflow.yml")
    p.add_argument("-D", dest="props", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--conf", "-c")
    p.add_argument("--sites", "-s")
    p.add_argument("--output-sites", "-o")
    p.add_argument("--cluster", "-C")
    p.add_argument("--cache", action="append", default=[])
    p.add_argument("--inherited-rc-files", action="append", default=[])
    p.add_argument("--dir", "-d")
    p.add_argument("--relative-dir")
    p.add_argument("--cleanup")
    p.add_argument("--force", "-f", action="store_true")
    p.add_argument("--submit", action="store_true")
    p.add_argument("--json", "-j", action="store_true")
    p.add_argument("--verbose", "-v", action="count", default=0)
    p.add_argument("--quiet", "-q", action="count", default=0)
    for name in ("basename", "job-prefix", "forward", "relative-submit-dir"):
        p.add_argument(f"--{name}", action="append")
    p.add_argument("--force-replan", action="store_true")
    p.add_argument("--randomdir", nargs="?", const=True)
    p.add_argument("-X", dest="java", action="append")
    for name in ("input-dir", "output-dir", "staging-site", "transformations-dir", "reuse"):
        p.add_argument(f"--{name}")
    return p


def _listed(values: list[str]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def workflow_name(path: str) -> str:
    """The workflow's name (its YAML ``name``), else the file's stem: Pegasus' run directories are named by it."""
    with contextlib.suppress(PilotError, OSError):  # a missing or unreadable workflow is pilot plan's to report
        data = load_pegasus(path)
        name = data.get("name") if isinstance(data, dict) else None
        if isinstance(name, str) and name and "/" not in name:
            return name
    return os.path.splitext(os.path.basename(path))[0] or "workflow"


def run_dir(base: str, name: str, user: str) -> str:
    """Pegasus' default submit directory: BASE/USER/pegasus/NAME/runNNNN, the first number not yet taken."""
    parent = os.path.join(base, user, "pegasus", name)
    n = 1
    while os.path.exists(os.path.join(parent, f"run{n:04d}")):
        n += 1
    return os.path.join(parent, f"run{n:04d}")


def plan_call(
    argv: Sequence[str], site_env: str | None = None, cwd: str | None = None, user: str | None = None
) -> PlanCall:
    """pilot's command line for one pegasus-plan command line (bad options: UsageError)."""
    ns = plan_parser().parse_args(argv)
    for name, how in REFUSED.items():
        if getattr(ns, name) is not None:
            raise UsageError(f"pegasus-plan: --{name.replace('_', '-')} is not supported by pilot: {how}")
    warnings = [
        f"pegasus-plan: {option} has no effect in pilot; ignored"
        for name, option in IGNORED.items()
        if getattr(ns, name)
    ]
    for pair in ns.props:
        if "=" not in pair or pair.startswith("="):
            raise UsageError(f"pegasus-plan: -D{pair}: expected -Dkey=value, e.g. -Dpegasus.mode=development")
    sites = _listed([ns.sites or "local"])
    # pilot submit drives clusters on several sites (planned for the first); pilot plan takes one
    site = site_env or (",".join(sites) if ns.submit else sites[0])
    base = os.path.abspath(os.path.join(cwd or os.getcwd(), ns.dir or "."))
    if ns.relative_dir:
        submit_dir = os.path.normpath(os.path.join(base, ns.relative_dir))
    else:
        submit_dir = run_dir(base, workflow_name(ns.workflow), user or getpass.getuser())
    args = ["submit" if ns.submit else "plan", "--site", site, "--dir", submit_dir]
    if ns.output_sites:
        args += ["--output-sites", ns.output_sites]
    if ns.cluster:
        args += ["--cluster", ns.cluster]
    if ns.cleanup:
        args += ["--cleanup", ns.cleanup]
    if ns.conf:
        args += ["--conf", ns.conf]
    for pair in ns.props:  # over the --conf file, as in Pegasus
        args += ["-D", pair]
    for cache in _listed(ns.cache + ns.inherited_rc_files):  # both are replica files read after the catalog
        args += ["--cache", cache]
    if ns.force:
        args.append("--force")
    if ns.verbose:
        args.append("-v")
    if ns.submit:
        args.append("--detach")
    args.append(ns.workflow)
    return PlanCall(args, submit_dir, ns.submit, ns.json, warnings)


def _pilot(args: Sequence[str], capture: bool = False) -> subprocess.CompletedProcess:
    """``pilot ARGS`` with this interpreter (the shims may run under another Python than pilot's)."""
    pipe = subprocess.PIPE if capture else None
    return subprocess.run([sys.executable, "-m", "pilot", *args], text=True, stdout=pipe, stderr=pipe)


def _plan(argv: Sequence[str]) -> int:
    call = plan_call(argv, os.environ.get(SITE_ENV) or None)
    for line in call.warnings:
        print(line, file=sys.stderr)
    done = _pilot(call.pilot_argv, capture=True)
    # pilot's own lines go to stderr: stdout is the JSON Pegasus.api reads whole
    sys.stderr.write(done.stdout + done.stderr)
    if done.returncode != 0:
        return done.returncode
    message = (
        f"pilot submit drives {call.submit_dir} in the background; see: pegasus-status {call.submit_dir}"
        if call.submit
        else f"pilot planned the workflow into {call.submit_dir}; run it with: " f"pegasus-run {call.submit_dir}"
    )
    if call.json:
        print(json.dumps({"submit_dir": call.submit_dir, "message": message, "planner": "pilot " + __version__}))
    else:
        print(f"{message}\n\nYour workflow's submit directory:\n{call.submit_dir}")
    return 0


def _dir_parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=f"{prog} answered by pilot (pilot pegasus-shims)")
    p.add_argument("submit_dir")
    p.add_argument("--verbose", "-v", action="count", default=0)
    return p


def _run(argv: Sequence[str]) -> int:
    p = _dir_parser("pegasus-run")
    p.add_argument("--json", "-j", action="store_true")
    p.add_argument("--grid", action="store_true")  # a Globus check pilot has no use for
    ns = p.parse_args(list(argv))
    submit_dir = os.path.abspath(ns.submit_dir)
    done = _pilot(["submit", submit_dir, "--detach"], capture=True)
    sys.stderr.write(done.stdout + done.stderr)
    if done.returncode == 0 and ns.json:
        print(json.dumps({"submit_dir": submit_dir}))
    return done.returncode


def status_table(dagman_out: str, dag_name: str) -> str:
    """pegasus-status -l's table for the root DAG, from the last counts block and EXITING line of its dagman.out
    (the format Pegasus.api's Client._parse_status_output matches)."""
    counts, total, state = [0] * 7, 0, "Running"
    with open(dagman_out, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            words = line.split()
            if "nodes total:" in line and len(words) >= 4 and words[3].isdigit():
                total = int(words[3])
            elif len(words) == 9 and all(w.isdigit() for w in words[2:]):
                done, pre, queued, post, ready, unready, failed = (int(w) for w in words[2:])
                counts = [unready, ready, pre, queued, post, done, failed]
                state = "Failure" if failed else "Running"
            elif "EXITING WITH STATUS" in line:
                state = "Success" if words[-1] == "0" else "Failure"
    percent = 100.0 * counts[5] / total if total else 0.0
    values = "".join(f"{v:>6}" for v in counts)
    header = " UNRDY READY   PRE  IN_Q  POST  DONE  FAIL %DONE STATE   DAGNAME"
    return f"{header}\n{values} {percent:5.1f} {state:<7} *{dag_name}"


def _status(argv: Sequence[str]) -> int:
    p = _dir_parser("pegasus-status")
    p.add_argument("--long", "-l", action="store_true")
    p.add_argument("--jsonrv", "-j", action="store_true")
    ns = p.parse_args(list(argv))
    from pilot.contracts.rootfiles import read_braindump

    done = _pilot(["status", ns.submit_dir])
    if done.returncode == 2:  # not a submit directory: pilot status has said why
        return 2
    dag = str(read_braindump(ns.submit_dir)["dag"])
    out = os.path.join(ns.submit_dir, dag + ".dagman.out")
    if os.path.isfile(out):
        print("\n" + status_table(out, dag))
    return 0  # as pegasus-status: a running or failed run is information, not an error of the command


def _remove(argv: Sequence[str]) -> int:
    ns = _dir_parser("pegasus-remove").parse_args(list(argv))
    return _pilot(["cancel", ns.submit_dir]).returncode


def _delegated(tool_name: str, argv: Sequence[str]) -> int:
    """pegasus-analyzer and pegasus-statistics are pegasus-wms' own: they read what pilot writes for them."""
    from pilot.submit.monitord import pegasus_cli

    cmd = pegasus_cli(tool_name)
    if cmd is None:
        raise UsageError(
            f"{tool_name}: pegasus-wms is not installed (pip install pegasus-wms); "
            "pilot status DIR and pilot report DIR show the run meanwhile"
        )
    return subprocess.call([*cmd, *argv])


def _condor_q(argv: Sequence[str]) -> int:
    """No HTCondor job is pilot's: an empty queue (Pegasus.api's status asks condor_q -json)."""
    print("[]" if "-json" in argv else "pilot runs no HTCondor jobs; see pilot status SUBMIT_DIR")
    return 0


def _version(argv: Sequence[str]) -> int:  # noqa: ARG001 - a subcommand handler's signature
    print(f"pilot {__version__}")
    return 0


TOOLS = {
    "pegasus-plan": _plan,
    "pegasus-run": _run,
    "pegasus-status": _status,
    "pegasus-remove": _remove,
    "pegasus-version": _version,
    "condor_q": _condor_q,
    "pegasus-analyzer": lambda argv: _delegated("pegasus-analyzer", argv),
    "pegasus-statistics": lambda argv: _delegated("pegasus-statistics", argv),
}


def tool(name: str, argv: Sequence[str]) -> int:
    """The entry point of the executable NAME that pilot pegasus-shims wrote."""
    from pilot.cli.common import guarded

    return guarded(lambda: TOOLS[name](list(argv)), argv, name)
