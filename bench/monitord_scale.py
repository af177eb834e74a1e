"""Monitoring at scale: a whole workflow of N one-shot tasks through ``pilot submit --site local``, monitord on.

    python bench/monitord_scale.py [--tasks 250000] [--baseline] [--dir DIR] [--plan-in-submit]

The workflow (Pegasus 5 YAML, N independent ``/bin/true`` jobs) is planned
with ``--cluster whole`` and run by ``pilot submit --site local`` with the live
pegasus-monitord, as a user runs it. While it runs, the process tree is looked
at twice a second; each process's peak RSS is the kernel's high-water mark
(VmHWM), so a peak between two looks is not missed. Printed:

- submit wall: ``pilot submit`` from start to exit;
- run: the cluster's batch job, its EXECUTE to JOB_TERMINATED in the root
  jobstate.log;
- monitord lag: from the end of that job until pegasus-monitord exited, and its
  ratio to the run (target: at most 0.10);
- peak RSS of the driver (``pilot submit``), the master (rank 0 of ``pilot run``)
  and pegasus-monitord (the largest of the live one and a replay, if any);
- whether pegasus-statistics counts every task as succeeded and the workflow
  as succeeded, and whether ``monitord.incomplete`` was left.

``--baseline`` also runs the same plan with ``--no-monitord`` and prints the
ratio of the two submit walls. ``--plan-in-submit`` has ``pilot submit`` plan
the workflow itself (``pilot submit --site local --cluster whole --dir DIR
WORKFLOW``), as a user runs it, so the driver's peak RSS includes the plan
(target: at most 400 MB for 250,000 jobs).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from pilot.submit.monitord import INCOMPLETE, pegasus_cli  # noqa: E402 - after the sys.path set-up above


def write_workflow(base: str, n: int) -> str:
    """N independent /bin/true jobs, laid out as Pegasus.api writes them (the API takes minutes for 250,000)."""
    path = os.path.join(base, "flat.yml")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("pegasus: 5.0.4\nname: flat\n")
        fh.write(
            "transformationCatalog:\n  transformations:\n  - name: 'true'\n    sites:\n    - name: local\n"
            "      pfn: /bin/true\n      type: installed\n"
        )
        fh.write(
            f"siteCatalog:\n  sites:\n  - name: local\n    directories:\n"
            f"    - type: sharedScratch\n      path: {base}/scratch\n"
            f"    - type: localStorage\n      path: {base}/output\n"
        )
        fh.write("jobs:\n")
        for i in range(n):
            fh.write(f"- type: job\n  name: 'true'\n  id: j{i}\n  arguments: []\n")
    return path


def plan(workflow: str, submit: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pilot", "plan", workflow, "--site", "local", "--cluster", "whole", "--dir", submit],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _hwm_kib(pid: int) -> int:
    """The process's peak resident set (VmHWM) so far, KiB; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


_PILOT_RUN = re.compile(r"(^|[ /])pilot run( |$)")


def _role(proc: psutil.Process, sub: str) -> str | None:
    """monitord, master (rank 0 of the cluster's pilot run) or None. The batch job is not the driver's
    descendant (the local provider detaches it), so processes are found by command line and directory."""
    try:
        cmd = " ".join(proc.cmdline())
        if "pegasus-monitord" in cmd and proc.cwd() == sub:
            return "monitord"
        if _PILOT_RUN.search(cmd) and proc.cwd().startswith(sub + os.sep):
            return "master" if proc.environ().get("PMI_RANK") == "0" else None
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    return None


def submit(sub: str, monitord: bool, workflow: str | None = None) -> dict:
    """Run pilot submit on ``sub`` (planning ``workflow`` into it first when given); its wall time, the peak RSS
    per role (MiB) and when monitord was last seen."""
    sub = os.path.realpath(sub)
    what = [sub] if workflow is None else ["--cluster", "whole", "--dir", sub, workflow]
    cmd = [sys.executable, "-m", "pilot", "submit", "--site", "local", *what] + ([] if monitord else ["--no-monitord"])
    start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = {"driver": 0, "master": 0, "monitord": 0}
    roles: dict[int, str | None] = {}
    monitord_seen = 0.0
    while proc.poll() is None:
        peak["driver"] = max(peak["driver"], _hwm_kib(proc.pid))
        for kid in psutil.process_iter():
            role = roles.get(kid.pid)
            if kid.pid not in roles:
                role = _role(kid, sub)
                try:
                    if role is not None or time.time() - kid.create_time() > 2:  # a young one may not have exec'd yet
                        roles[kid.pid] = role
                except psutil.Error:
                    pass
            if role is not None:
                peak[role] = max(peak[role], _hwm_kib(kid.pid))
                if role == "monitord":
                    monitord_seen = time.time()
        time.sleep(0.5)
    wall = time.time() - start
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        sys.exit(f"pilot submit exited {proc.returncode}:\n{err[-2000:]}")
    return {"wall": wall, "peak": {k: v / 1024 for k, v in peak.items()}, "monitord_end": monitord_seen, "log": err}


def job_span(sub: str) -> tuple[float, float]:
    """(start, end) epoch of the cluster's batch job, from the root jobstate.log."""
    start = end = 0.0
    with open(os.path.join(sub, "jobstate.log"), encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) > 2 and parts[2] == "EXECUTE":
                start = float(parts[0])
            elif len(parts) > 2 and parts[2] == "JOB_TERMINATED":
                end = float(parts[0])
    return start, end


def statistics(sub: str) -> tuple[int | None, int | None, str]:
    """(tasks succeeded, tasks in all, the workflow's state word) as pegasus-statistics reports them."""
    cmd = pegasus_cli("pegasus-statistics")
    if cmd is None:
        sys.exit("pegasus-statistics not found: pip install pegasus-wms")
    out = subprocess.run([*cmd, "-o", os.path.join(sub, "statistics"), sub], capture_output=True, text=True).stdout
    m = re.search(r"^Tasks\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", out, re.M)
    state = "failed" if "Workflow failed" in out or "failed" in out.split("Summary")[0].lower() else "ok"
    if m is None:
        return None, None, out[-500:]
    return int(m.group(1)), int(m.group(6)), state


def cluster_tasks(sub: str) -> int:
    with open(os.path.join(sub, "clusters.yml"), encoding="utf-8") as fh:
        return sum(int(line.split(":")[1]) for line in fh if line.startswith("  tasks:"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=250_000)
    ap.add_argument("--baseline", action="store_true", help="also run without monitord and print the wall ratio")
    ap.add_argument("--dir", default=None, help="where the runs go (default: the system temp dir)")
    ap.add_argument(
        "--plan-in-submit",
        action="store_true",
        help="let pilot submit plan the workflow (the driver's " "peak RSS then includes the plan's)",
    )
    args = ap.parse_args()
    if args.plan_in_submit and args.baseline:
        ap.error("--baseline copies a planned directory: leave out --plan-in-submit")
    base = tempfile.mkdtemp(prefix="pilot-monitord-", dir=args.dir)
    try:
        t = time.time()
        wf = write_workflow(base, args.tasks)
        sub = os.path.join(base, "submit")
        if not args.plan_in_submit:
            plan(wf, sub)
            print(
                f"{args.tasks} jobs ({cluster_tasks(sub)} tasks with Pegasus' data jobs), whole cluster, written "
                f"and planned in {time.time() - t:.1f} s"
            )
        if args.baseline:
            plain = os.path.join(base, "plain")
            shutil.copytree(sub, plain, symlinks=True)
        on = submit(sub, monitord=True, workflow=wf if args.plan_in_submit else None)
        total = cluster_tasks(sub)
        start, end = job_span(sub)
        run = end - start
        lag = on["monitord_end"] - end
        ok, all_tasks, state = statistics(sub)
        p = on["peak"]
        print(
            f"submit wall {on['wall']:.1f} s; run (batch job) {run:.1f} s; monitord lag after the run "
            f"{lag:.1f} s = {lag / run if run else float('nan'):.3f} of the run (target <= 0.10)"
        )
        print(f"peak RSS: driver {p['driver']:.0f} MiB, master {p['master']:.0f} MiB, monitord {p['monitord']:.0f} MiB")
        print(
            f"pegasus-statistics: {ok} of {all_tasks} tasks succeeded (planned {total}); "
            f"every task counted: {ok == total == all_tasks}; workflow {state}; "
            f"monitord.incomplete left: {os.path.exists(os.path.join(sub, INCOMPLETE))}"
        )
        if "replaying" in on["log"]:
            print("(monitord's DB was completed by a replay after the run: see submit.log)")
        if args.baseline:
            off = submit(plain, monitord=False)
            print(
                f"without monitord: submit wall {off['wall']:.1f} s, driver {off['peak']['driver']:.0f} MiB, "
                f"master {off['peak']['master']:.0f} MiB; wall ratio on/off {on['wall'] / off['wall']:.3f}"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
