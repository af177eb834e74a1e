"""``pilot submit``, ``pilot status``, ``pilot cancel`` (and ``pilot sites``): parse, call pilot.submit, print."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Sequence

from pilot.errors import UsageError
from pilot.util.cmdline import Parser
from pilot.util.tables import table


def _action(p: argparse.ArgumentParser, dest: str) -> argparse.Action:
    return next(a for a in p._actions if a.dest == dest)


def _non_negative(text: str) -> int:
    """A count of retries: 0 or more, of at most 6 digits (int() reads 4,300)."""
    if len(text.strip()) > 6:
        raise argparse.ArgumentTypeError(f"{text[:20]!r} must be at most 999999")
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def _positive(text: str) -> int:
    """A count of nodes: 1 or more."""
    value = _non_negative(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _positive_float(text: str) -> float:
    """Seconds between polls: more than 0 and at most a day (nan and inf are not a time to wait)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value != value:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
    if not value <= 86400:
        raise argparse.ArgumentTypeError(f"{text!r} must be at most 86400 (a day)")
    return value


def _choices(spec: str | None, sets: list[str]):
    from pilot.cli.plan import site_overrides
    from pilot.submit.session import SiteChoice

    if spec is None:
        return None
    overrides = site_overrides(sets)
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise UsageError(f"--site {spec!r}: name at least one site (see pilot sites)")
    return [SiteChoice(n, overrides) for n in names]


def build_submit_parser() -> argparse.ArgumentParser:
    from pilot.cli.plan import add_plan_arguments
    from pilot.submit.options import DEFAULT_MAX_RESUBMITS, DEFAULT_RETRY

    p = Parser(prog="pilot submit", description="Plan a workflow (or take a submit directory pilot plan wrote) and run "
                "its clusters as batch jobs through Parsl providers, as DAGMan would: independent branches go on after "
                "a failure, failed clusters are retried, and running it again on the directory retries what failed.")
    add_plan_arguments(p)
    _action(p, "workflow").help = ("Pegasus 5 YAML workflow (as Pegasus.api writes it), a PMC .dag, or a submit directory "
                                   "written by pilot plan / pilot submit (to continue or retry a run)")
    site = _action(p, "site")
    site.required = False
    site.help = ("site config(s), comma-separated: names from 'pilot sites' or paths to YAML files; required for a "
                 "workflow; for a submit directory the default is the sites it was submitted with")
    p.add_argument("--retry", type=_non_negative, default=DEFAULT_RETRY, metavar="N",
                   help="retries of a cluster whose tasks failed, each resuming from its rescue log, for clusters whose "
                        f"jobs carry no Pegasus dagman.retry profile (default: {DEFAULT_RETRY}, Pegasus' default)")
    p.add_argument("--max-resubmits", type=_non_negative, default=DEFAULT_MAX_RESUBMITS, metavar="N",
                   help="resubmissions of a cluster whose job ran out of wall time, was preempted or vanished "
                        f"(node failure); they do not count against --retry (default: {DEFAULT_MAX_RESUBMITS})")
    pilots = p.add_argument_group("pilot jobs", "run clusters in pilot jobs that outlive them instead of a batch "
                                  "job each (late binding); the sizes default to the site's pilot_* keys")
    pilots.add_argument("--pilots", type=_non_negative, default=0, metavar="N",
                        help="at most N pilot jobs at once (and no more than the site's max_queued); each ready "
                             "cluster starts in one with room (default: 0, a batch job per cluster)")
    pilots.add_argument("--pilot-nodes", type=_positive, metavar="N", help="nodes of a pilot job (site key pilot_nodes; "
                        "default: the site's nodes)")
    pilots.add_argument("--pilot-walltime", metavar="HH:MM:SS", help="wall time of a pilot job (site key pilot_walltime;"
                        " default: the site's max_walltime, else walltime)")
    pilots.add_argument("--pilot-min", type=_non_negative, metavar="N", help="pilot jobs kept while the run lasts "
                        "(site key pilot_min_blocks; default: 0)")
    pilots.add_argument("--pilot-idle", type=_non_negative, metavar="S", help="seconds a pilot job may stay without a "
                        "cluster before it ends (site key pilot_idle_timeout; default: 120)")
    p.add_argument("--poll", type=_positive_float, default=2.0, metavar="S", help="seconds between queue polls (default: 2)")
    p.add_argument("--no-monitord", action="store_true", help="do not run pegasus-monitord beside the driver (the root "
                   "dagman.out and jobstate.log are written all the same; default: run it when pegasus-wms is installed)")
    p.add_argument("--detach", action="store_true", help="run in the background, logging to SUBMIT_DIR/submit.log (default: off)")
    p.add_argument("--result", metavar="FILE", help=argparse.SUPPRESS)  # a nested run's outcome (pilot.submit.nested)
    p.add_argument("-v", "--verbose", action="count", default=0, help="show tracebacks of errors")
    return p


def submit_main(argv: Sequence[str]) -> int:
    ns = build_submit_parser().parse_args(list(argv))
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

    choices = _choices(ns.site, ns.set)
    if is_submit_dir(ns.workflow):
        submit_dir = os.path.abspath(ns.workflow)
        choices = choices or recorded_sites(submit_dir)
    else:
        if choices is None:
            raise UsageError("pilot submit: --site is required to plan a workflow (see pilot sites)")
        submit_dir = _plan(ns, argv)
    opts = Options(retry=ns.retry, max_resubmits=ns.max_resubmits, poll=ns.poll, pilots=ns.pilots,
                   pilot_nodes=ns.pilot_nodes, pilot_walltime=ns.pilot_walltime, pilot_min=ns.pilot_min,
                   pilot_idle=ns.pilot_idle)
    if ns.detach:
        from pilot.submit.daemon import LOG_FILE, detach

        pid = detach(submit_dir, lambda: _drive(submit_dir, choices, opts, not ns.no_monitord))
        print(f"pilot submit: driving {submit_dir} in the background (pid {pid}); log: "
              f"{os.path.join(submit_dir, LOG_FILE)}; see: pilot status {submit_dir}")
        return 0
    return _drive(submit_dir, choices, opts, not ns.no_monitord)


def _plan(ns: argparse.Namespace, argv: Sequence[str]) -> str:
    from pilot.cli.plan import plan_from_args, summary

    site_spec = ns.site
    ns.site = site_spec.split(",")[0]  # the plan's site: task paths come from its catalog entries
    result = plan_from_args(ns, argv)
    ns.site = site_spec
    # The plan's hint to submit it is for pilot plan; here the submission follows at once.
    print("\n".join(line for line in summary(result).splitlines() if "submit with:" not in line))
    return result.submit_dir


def _drive(submit_dir: str, choices, opts, monitord: bool) -> int:
    from pilot.submit.session import drive

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    logging.getLogger("parsl").setLevel(logging.WARNING)
    outcome = drive(submit_dir, choices, opts, monitord=monitord)
    if outcome.cancelled:
        print(f"pilot submit: stopped by pilot cancel, which cancels its batch jobs. Run it again with: "
              f"pilot submit {submit_dir}", file=sys.stderr)
        return 130
    if outcome.stopped:
        print(f"pilot submit: stopped; batch jobs keep running. Resume with: pilot submit {submit_dir}", file=sys.stderr)
        return 130
    print(outcome.status)
    for line in outcome.problems:
        print(line, file=sys.stderr)
    return 0 if outcome.ok else 1


def status_main(argv: Sequence[str]) -> int:
    from pilot.submit.session import status

    p = Parser(prog="pilot status", description="Show the clusters of a submit directory (waiting, queued with the "
                "scheduler's reason, held, running with tasks done and running now, done, failed, not run) and the "
                "task totals as pegasus-status counts them. Exit status: 0 all done, 1 failed (or cancelled), "
                "2 bad input, 3 not finished (still running, or stopped: resume with pilot submit DIR).")
    p.add_argument("submit_dir", help="a submit directory written by pilot plan or pilot submit")
    p.add_argument("-v", "--verbose", action="count", default=0, help="show tracebacks of errors")
    ns = p.parse_args(list(argv))
    result = status(ns.submit_dir)
    print(result.text)
    return int(result.code)


def cancel_main(argv: Sequence[str]) -> int:
    from pilot.submit.session import cancel

    p = Parser(prog="pilot cancel", description="Stop the pilot submit driving a submit directory and cancel every "
                "batch job it submitted.")
    p.add_argument("submit_dir", help="a submit directory written by pilot plan or pilot submit")
    p.add_argument("--site", help="site config(s) the run used (default: those recorded in submit.state.json)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a site config key (repeatable)")
    p.add_argument("-v", "--verbose", action="count", default=0, help="show tracebacks of errors")
    ns = p.parse_args(list(argv))
    cancelled = cancel(ns.submit_dir, _choices(ns.site, ns.set))
    if cancelled is None:
        print("pilot cancel: nothing was submitted from this directory")
        return 0
    print(f"pilot cancel: cancelled {len(cancelled)} batch job(s){': ' + ' '.join(cancelled) if cancelled else ''}")
    return 0


def sites_main(argv: Sequence[str]) -> int:
    from pilot.sites import shipped_sites, site_path

    p = Parser(prog="pilot sites", description="List the shipped site configs, or show one.")
    p.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    p.add_argument("name", nargs="?")
    p.add_argument("--yaml", action="store_true", help="show: print the site file itself")
    p.add_argument("-v", "--verbose", action="count", default=0)
    ns = p.parse_args(list(argv))
    if ns.action == "show":
        if not ns.name:
            raise UsageError("pilot sites show NAME: which site? (see pilot sites)")
        if ns.yaml:
            with open(site_path(ns.name), encoding="utf-8") as fh:
                print(fh.read(), end="")
        else:
            print(site_summary(ns.name))
        return 0
    from pilot.sites import read_site_file

    rows = []
    for name, path in shipped_sites().items():
        data, _ = read_site_file(path)
        rows.append((name, str(data.get("scheduler", "local")), str(data.get("description", ""))))
    print("\n".join(table(rows)))
    return 0


def site_summary(name: str) -> str:
    """What a user needs to know before submitting to a site, one fact a line."""
    from pilot.sites import load_site

    site = load_site(name, need_required=False)

    def size(mb: int | None) -> str:
        return "-" if mb is None else (f"{mb / 1024:g} GiB" if mb >= 1024 else f"{mb} MiB")

    launcher = site.launcher + (" (from the job's PATH after worker_init)" if site.launcher_from == "path" else "")
    rows = [
        ("site", f"{site.name}: {site.description}" if site.description else site.name),
        ("scheduler", site.scheduler),
        ("queue", ", ".join(f"{k} {v}" for k, v in (("partition", site.partition), ("queue", site.queue),
                                                       ("qos", site.qos), ("constraint", site.constraint)) if v) or "-"),
        ("launcher", f"{launcher} {site.launcher_options}".rstrip()),
        ("per node", f"{site.cores_per_node or '?'} cores, {size(site.memory_per_node_mb)} memory, "
                     f"{site.gpus_per_node if site.gpus_per_node is not None else '?'} GPUs; {site.ranks_per_node} ranks"),
        ("nodes", f"{site.nodes} per job{', whole nodes' if site.exclusive else ''}"),
        ("walltime", f"{site.walltime} per job; max walltime {site.max_walltime or 'not stated'}"),
        ("worker_init", "; ".join(site.worker_init) or "-"),
        ("containers", ", ".join(site.container_runtimes) or "none (jobs in containers are refused)"),
        ("required", ", ".join(f"{k} (pass --set {k}=VALUE)" for k in site.required) or "nothing"),
        ("max queued", str(site.max_queued)),
        ("sources", "\n".join(site.sources) or "-"),
        ("file", site.path),
    ]
    cells = []
    for key, value in rows:
        first, *rest = value.split("\n")
        cells += [(key + ":", first)] + [("", more) for more in rest]
    return "\n".join(table(cells, sep=" "))
