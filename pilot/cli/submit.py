"""``pilot submit``: plan a workflow (or take a submit directory) and drive its clusters to the end."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pilot.errors import OutOfSpace, UsageError
from pilot.util import stdstreams
from pilot.util.argtypes import positive_seconds, whole_number
from pilot.util.cmdline import Parser

if TYPE_CHECKING:
    from pilot.submit.session import SiteChoice


def _action(p: argparse.ArgumentParser, dest: str) -> argparse.Action:
    return next(a for a in p._actions if a.dest == dest)


# Counts the options take (retries, pilot jobs, nodes, seconds idle): at most 6 digits.
_count = whole_number(0, 999999)
_positive_count = whole_number(1, 999999)


def site_choices(spec: str | None, sets: list[str]) -> list[SiteChoice] | None:
    """``--site`` and ``--set`` of pilot submit and pilot cancel: the sites named, each with the overrides."""
    from pilot.cli.plan import site_overrides
    from pilot.submit.session import SiteChoice

    if spec is None:
        return None
    overrides = site_overrides(sets)
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise UsageError(f"--site {spec!r}: name at least one site (see pilot sites)")
    return [SiteChoice(n, overrides) for n in names]


def build_parser() -> argparse.ArgumentParser:
    from pilot.cli.plan import add_plan_arguments
    from pilot.submit.options import DEFAULT_MAX_RESUBMITS, DEFAULT_RETRY

    p = Parser(
        prog="pilot submit",
        description="Plan a workflow (or take a submit directory pilot plan wrote) and run "
        "its clusters as batch jobs through Parsl providers, as DAGMan would: independent branches go on after "
        "a failure, failed clusters are retried, and running it again on the directory retries what failed.",
    )
    add_plan_arguments(p)
    _action(p, "workflow").help = (
        "Pegasus 5 YAML workflow (as Pegasus.api writes it), a PMC .dag, or a submit directory "
        "written by pilot plan / pilot submit (to continue or retry a run)"
    )
    site = _action(p, "site")
    site.required = False
    site.help = (
        "site config(s), comma-separated: names from 'pilot sites' or paths to YAML files; required for a "
        "workflow; for a submit directory the default is the sites it was submitted with"
    )
    p.add_argument(
        "--retry",
        type=_count,
        default=DEFAULT_RETRY,
        metavar="N",
        help="retries of a cluster whose tasks failed, each resuming from its rescue log, for clusters whose "
        f"jobs carry no Pegasus dagman.retry profile (default: {DEFAULT_RETRY}, Pegasus' default)",
    )
    p.add_argument(
        "--max-resubmits",
        type=_count,
        default=DEFAULT_MAX_RESUBMITS,
        metavar="N",
        help="resubmissions of a cluster whose job ran out of wall time, was preempted or vanished "
        f"(node failure); they do not count against --retry (default: {DEFAULT_MAX_RESUBMITS})",
    )
    pilots = p.add_argument_group(
        "pilot jobs",
        "run clusters in pilot jobs that outlive them instead of a batch "
        "job each (late binding); the sizes default to the site's pilot_* keys",
    )
    pilots.add_argument(
        "--pilots",
        type=_count,
        default=0,
        metavar="N",
        help="at most N pilot jobs at once (and no more than the site's max_queued); each ready "
        "cluster starts in one with room (default: 0, a batch job per cluster)",
    )
    pilots.add_argument(
        "--pilot-nodes",
        type=_positive_count,
        metavar="N",
        help="nodes of a pilot job (site key pilot_nodes; " "default: the site's nodes)",
    )
    pilots.add_argument(
        "--pilot-walltime",
        metavar="HH:MM:SS",
        help="wall time of a pilot job (site key pilot_walltime;" " default: the site's max_walltime, else walltime)",
    )
    pilots.add_argument(
        "--pilot-min",
        type=_count,
        metavar="N",
        help="pilot jobs kept while the run lasts " "(site key pilot_min_blocks; default: 0)",
    )
    pilots.add_argument(
        "--pilot-idle",
        type=_count,
        metavar="S",
        help="seconds a pilot job may stay without a "
        "cluster before it ends (site key pilot_idle_timeout; default: 120)",
    )
    p.add_argument(
        "--poll", type=positive_seconds, default=2.0, metavar="S", help="seconds between queue polls (default: 2)"
    )
    p.add_argument(
        "--no-monitord",
        action="store_true",
        help="do not run pegasus-monitord beside the driver (the root "
        "dagman.out and jobstate.log are written all the same; default: run it when pegasus-wms is installed)",
    )
    p.add_argument(
        "--detach", action="store_true", help="run in the background, logging to SUBMIT_DIR/submit.log (default: off)"
    )
    p.add_argument("--result", metavar="FILE", help=argparse.SUPPRESS)  # a nested run's outcome (pilot.submit.nested)
    p.add_argument("-v", "--verbose", action="count", default=0, help="show tracebacks of errors")
    return p


def main(argv: Sequence[str]) -> int:
    ns = build_parser().parse_args(list(argv))
    if ns.result is None:
        return _submit(ns, argv)
    from pilot.submit.nested import write_outcome

    code = 2
    try:
        code = _submit(ns, argv)
        return code
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
        raise
    finally:  # on every exit path, as a pilot run writes its result
        write_outcome(ns.result, ns.workflow, code)


def _submit(ns: argparse.Namespace, argv: Sequence[str]) -> int:
    from pilot.contracts.clusters import is_submit_dir
    from pilot.submit.options import Options
    from pilot.submit.session import recorded_sites

    choices = site_choices(ns.site, ns.set)
    if is_submit_dir(ns.workflow):
        submit_dir = os.path.abspath(ns.workflow)
        choices = choices or recorded_sites(submit_dir)
    else:
        if choices is None:
            raise UsageError("pilot submit: --site is required to plan a workflow (see pilot sites)")
        submit_dir = _plan(ns, argv, choices[0])
    opts = Options(
        retry=ns.retry,
        max_resubmits=ns.max_resubmits,
        poll=ns.poll,
        pilots=ns.pilots,
        pilot_nodes=ns.pilot_nodes,
        pilot_walltime=ns.pilot_walltime,
        pilot_min=ns.pilot_min,
        pilot_idle=ns.pilot_idle,
    )
    if ns.detach:
        from pilot.submit.daemon import LOG_FILE, detach

        pid = detach(submit_dir, lambda: _drive(submit_dir, choices, opts, not ns.no_monitord))
        print(
            f"pilot submit: driving {submit_dir} in the background (pid {pid}); log: "
            f"{os.path.join(submit_dir, LOG_FILE)}; see: pilot status {submit_dir}"
        )
        return 0
    return _drive(submit_dir, choices, opts, not ns.no_monitord)


def _plan(ns: argparse.Namespace, argv: Sequence[str], site: SiteChoice) -> str:
    """Plan the workflow on the first site (task paths come from its catalog entries); print what pilot plan
    prints, less its hint to submit the plan: here the submission follows at once."""
    from pilot.cli.plan import plan_request, planned

    result = planned(plan_request(ns, argv, site.load()), "pilot submit")
    print("\n".join(result.lines()))
    return result.submit_dir


def _drive(submit_dir: str, choices, opts, monitord: bool) -> int:
    from pilot.submit.daemon import parsl_to_log
    from pilot.submit.session import drive

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    parsl_to_log(submit_dir)
    try:
        outcome = drive(submit_dir, choices, opts, monitord=monitord)
    except OSError as exc:
        if not stdstreams.is_no_space(exc):
            raise
        # The state on disk is the last one saved: resuming submits nothing twice (pilot.submit.driver).
        raise OutOfSpace(
            f"pilot submit: cannot write {exc.filename or 'in ' + submit_dir}: {exc.strerror}; free space "
            f"and resume with: pilot submit {submit_dir}"
        ) from None
    if outcome.cancelled:
        print(
            f"pilot submit: stopped by pilot cancel, which cancels its batch jobs. Run it again with: "
            f"pilot submit {submit_dir}",
            file=sys.stderr,
        )
        return 130
    if outcome.stopped:
        print(
            f"pilot submit: stopped; {_left_text(outcome.queued, outcome.in_doubt, submit_dir)}. "
            f"Resume with: pilot submit {submit_dir}",
            file=sys.stderr,
        )
        return 130
    print(outcome.status)
    for line in outcome.problems:
        print(line, file=sys.stderr)
    return 0 if outcome.ok else 1


def _left_text(queued: list[str], in_doubt: list[str], submit_dir: str) -> str:
    """What a stopped pilot submit leaves in the queues, as it is: the jobs it knows, those it cannot be sure of."""
    said = (
        [f"{len(queued)} batch job(s) keep running ({' '.join(queued[:10])}{' ...' if len(queued) > 10 else ''})"]
        if queued
        else []
    )
    if in_doubt:
        said.append(
            f"{len(in_doubt)} submission(s) the scheduler did not confirm (e.g. {in_doubt[0]}): a restart or "
            f"pilot cancel looks for them by name"
        )
    if not said:
        return "no batch job of this run is in a queue"
    return "; ".join(said) + f" (pilot cancel {submit_dir} ends them)"
