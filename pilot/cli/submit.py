"""``pilot submit``, ``pilot status``, ``pilot cancel``: the cluster DAG through Parsl providers."""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import signal
import sys
from typing import NoReturn, Sequence

from pilot.errors import ConfigError, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


LOCK = "submit.lock"


def _sites(spec: str, sets: list[str]):
    from pilot.cli.plan import site_overrides
    from pilot.sites import load_site

    overrides = site_overrides(sets)
    return [load_site(name.strip(), overrides) for name in spec.split(",") if name.strip()]


def _driver(submit_dir: str, sites, opts=None):
    from providers import provider_for
    from pilot.submit.driver import Driver, Options

    return Driver(submit_dir, sites, {s.name: provider_for(s) for s in sites}, opts or Options())


def _lock(submit_dir: str) -> int:
    fd = os.open(os.path.join(submit_dir, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError(f"{submit_dir}: another pilot submit drives this directory (see pilot status; pilot cancel stops it)") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def submit_main(argv: Sequence[str]) -> int:
    from pilot.cli.plan import add_plan_arguments, plan_from_args, summary

    p = _Parser(prog="pilot submit", description="Plan a workflow (or take a planned submit directory) and run its "
                "clusters as batch jobs through Parsl providers, like DAGMan would.")
    add_plan_arguments(p)
    p.set_defaults(cluster="whole")
    p.add_argument("--max-resubmits", type=int, default=3, help="resubmissions of a cluster that ran out of time (default 3)")
    p.add_argument("--poll", type=float, default=2.0, help="seconds between queue polls (default 2)")
    p.add_argument("--no-monitord", action="store_true", help="do not run pegasus-monitord beside the driver "
                   "(the root dagman.out and jobstate.log are written all the same)")
    p.add_argument("--detach", action="store_true", help="run in the background, logging to SUBMIT_DIR/submit.log")
    p.add_argument("-v", "--verbose", action="count", default=0)
    ns = p.parse_args(list(argv))
    sites = _sites(ns.site, ns.set)
    site_spec = ns.site
    if os.path.isdir(ns.workflow) and os.path.exists(os.path.join(ns.workflow, "clusters.yml")):
        submit_dir = os.path.abspath(ns.workflow)
    else:
        ns.site = site_spec.split(",")[0]  # the plan's site: task paths come from its catalog entries
        result = plan_from_args(ns, argv)
        ns.site = site_spec
        print(summary(result))
        submit_dir = result.submit_dir
    if ns.detach:
        return _detach(submit_dir, sites, ns)
    return _drive(submit_dir, sites, ns, tty=sys.stderr.isatty())


def _drive(submit_dir: str, sites, ns, tty: bool) -> int:
    from pilot.submit.driver import Options
    from pilot.submit.monitord import require_root_files, root_monitoring

    require_root_files(submit_dir)
    lock = _lock(submit_dir)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    logging.getLogger("parsl").setLevel(logging.WARNING)
    stop = {"flag": False}

    def on_signal(signum, frame):  # noqa: ARG001
        stop["flag"] = True

    signal.signal(signal.SIGTERM, on_signal)
    opts = Options(max_resubmits=ns.max_resubmits, poll=ns.poll, on_change=_progress(tty))
    driver = _driver(submit_dir, sites, opts)
    try:
        with root_monitoring(driver, run_monitord=not ns.no_monitord):
            driver.run(lambda: stop["flag"])
    except KeyboardInterrupt:
        stop["flag"] = True
    finally:
        os.close(lock)
    if stop["flag"]:
        print(f"pilot submit: stopped; batch jobs keep running. Resume with: pilot submit --site {ns.site} {submit_dir}",
              file=sys.stderr)
        return 130
    print(status_table(submit_dir))
    failed = [c for c in driver.state.clusters.values() if c.state != "done"]
    if failed:
        print("pilot submit: not done: " + ", ".join(f"{c.name} ({c.state}{': ' + c.reason if c.reason else ''})" for c in failed),
              file=sys.stderr)
        return 1
    return 0


def _progress(tty: bool):
    def show(driver) -> None:
        counts: dict[str, int] = {}
        for c in driver.state.clusters.values():
            counts[c.state] = counts.get(c.state, 0) + 1
        line = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        if tty:
            sys.stderr.write(f"\r\x1b[Kclusters: {line}")
            sys.stderr.flush()
        else:
            logging.getLogger("pilot.submit").info("clusters: %s", line)

    return show


def _detach(submit_dir: str, sites, ns) -> int:
    log = os.path.join(submit_dir, "submit.log")
    pid = os.fork()
    if pid:
        print(f"pilot submit: driving {submit_dir} in the background (pid {pid}); log: {log}; see: pilot status {submit_dir}")
        return 0
    os.setsid()
    if os.fork():
        os._exit(0)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    try:
        code = _drive(submit_dir, sites, ns, tty=False)
    except Exception as exc:  # the parent is gone: the log is the only place to say it
        print(f"pilot submit: {exc}", file=sys.stderr)
        code = 1
    os._exit(code)


def status_table(submit_dir: str) -> str:
    from pilot.submit.driver import read_clusters
    from pilot.submit.state import SubmitState

    state = SubmitState.load(submit_dir)
    rows = [("cluster", "job id", "state", "done/total", "attempts", "site", "note")]
    for c in read_clusters(submit_dir):
        cs = state.clusters.get(c.name) if state else None
        done = _done_tasks(c.dag)
        rows.append((c.name, (cs.job_id if cs else None) or "-", cs.state if cs else "waiting", f"{done}/{c.tasks}",
                     str(cs.attempts if cs else 0), (cs.site if cs else None) or "-", (cs.reason if cs else "") or ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows)


def _done_tasks(dag: str) -> int:
    from pilot.dag.rescue import read_rescue
    from pilot.errors import DagError

    try:
        return len(read_rescue(dag + ".rescue"))
    except DagError:  # unreadable: the status table still shows the rest
        return 0


def status_main(argv: Sequence[str]) -> int:
    p = _Parser(prog="pilot status", description="Show the clusters of a submit directory: batch job, state, tasks done.")
    p.add_argument("submit_dir")
    p.add_argument("-v", "--verbose", action="count", default=0)
    ns = p.parse_args(list(argv))
    print(status_table(ns.submit_dir))
    return 0


def cancel_main(argv: Sequence[str]) -> int:
    from pilot.submit.state import SubmitState

    p = _Parser(prog="pilot cancel", description="Stop the driver and cancel every batch job it submitted.")
    p.add_argument("submit_dir")
    p.add_argument("--site", help="site config(s) used by pilot submit (default: as recorded)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("-v", "--verbose", action="count", default=0)
    ns = p.parse_args(list(argv))
    if not os.path.exists(os.path.join(ns.submit_dir, "clusters.yml")):
        raise ConfigError(f"{ns.submit_dir}: no clusters.yml: is this a directory written by pilot plan?")
    _stop_driver(ns.submit_dir)
    state = SubmitState.load(ns.submit_dir)
    if state is None:
        print("pilot cancel: nothing was submitted from this directory")
        return 0
    names = ns.site or ",".join(sorted({c.site for c in state.clusters.values() if c.site}))
    if not names:
        print("pilot cancel: nothing was submitted from this directory")
        return 0
    from pilot.submit.monitord import cancel_monitoring

    driver = _driver(ns.submit_dir, _sites(names, ns.set))
    with cancel_monitoring(driver):
        cancelled = driver.cancel_all()
    print(f"pilot cancel: cancelled {len(cancelled)} batch job(s){': ' + ' '.join(cancelled) if cancelled else ''}")
    return 0


def _stop_driver(submit_dir: str) -> None:
    """SIGTERM a running pilot submit (its pid is in the lock file) so it submits nothing more."""
    path = os.path.join(submit_dir, LOCK)
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return  # nobody holds it
    except BlockingIOError:
        pid = int((os.pread(fd, 32, 0).decode().strip() or "0"))
        if pid:
            os.kill(pid, signal.SIGTERM)
        fcntl.flock(fd, fcntl.LOCK_EX)  # wait until it let go
    finally:
        os.close(fd)


def sites_main(argv: Sequence[str]) -> int:
    from pilot.sites import shipped_sites, site_path

    p = _Parser(prog="pilot sites", description="List the shipped site configs, or show one.")
    p.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    p.add_argument("name", nargs="?")
    p.add_argument("-v", "--verbose", action="count", default=0)
    ns = p.parse_args(list(argv))
    if ns.action == "show":
        if not ns.name:
            raise UsageError("pilot sites show NAME: which site? (see pilot sites)")
        with open(site_path(ns.name), encoding="utf-8") as fh:
            print(fh.read(), end="")
        return 0
    import yaml

    for name, path in shipped_sites().items():
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
        print(f"{name:<16} {data.get('scheduler', 'local'):<7} {data.get('description', '')}")
    return 0
