"""Planner scale: ``pilot plan`` of synthetic Pegasus workflows of 10^4..10^6 jobs, each against baselines.

    python bench/planner.py [--max 1000000] [--base /path/to/other/checkout] [--repeat N] [--files]

Workflow shape: four levels of n/4 jobs, each job below the first
with two parents on the level above, as Pegasus.api writes it (jobs, then
jobDependencies, an inline transformation catalog): about 125 bytes a job,
125 MB for a million. Planned with ``--cluster whole`` for site local, label
free, as a PMC user plans a big workflow. ``--files``: each job also reads its
parents' outputs (the first level a file of the replica catalog) and writes
one file, kept where it is made: the planner then adds its data jobs to the
cluster and orders them among the jobs, which the plain shape never asks of it.

Each size is planned in a fresh process, which reports its peak RSS
(getrusage), the wall time of plan() and the part of it spent in the kernel
(writing the files, faulting memory in); around the plan, in the same process,
libyaml reads the same file as a bare event stream (``yaml.parse`` with
CSafeLoader, nothing built), the floor any reader of the file pays: once
before the plan and once after, and the plan is set against their mean (a
shared machine's speed drifts by a tenth within a minute). Printed per size:

- plan time, and its ratio to that event stream (target: at most 1.0);
- peak RSS (target: at most 1.5 GB at 10^6);
- bytes the plan wrote, and their ratio to the workflow file (target: at most 6);
- time and RSS (above the interpreter's before planning) per job against the smallest size's (linear: near 1.0).

``--base DIR`` plans each workflow with the pilot of another checkout too (a
``git worktree`` of an older commit) in the same run, and prints its figures
on the line below. ``--repeat N`` plans each N times (fresh processes, each
into its own directory) and ends with each size's median ratio. Sizes share
one scratch directory, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

LEVELS = 4


def write_workflow(path: str, n: int, files: bool = False) -> None:
    """n jobs in LEVELS levels; job k of a level has parents k and k-1 (wrapping) of the level above. With
    ``files``, each job reads its parents' outputs (the first level a file of the replica catalog) and writes
    one file of its own, kept where it is made (no stage-out, no registration), as a Pegasus workflow that
    moves data through shared scratch does."""
    width = max(1, n // LEVELS)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(
            "pegasus: 5.0.4\nname: synthetic\ntransformationCatalog:\n  transformations:\n"
            "  - name: step\n    sites:\n    - name: local\n      pfn: /bin/true\n      type: installed\n"
        )
        if files:
            fh.write("replicaCatalog:\n  replicas:\n")
            for i in range(width):
                fh.write(f"  - lfn: f.{i}\n    pfns:\n    - site: local\n      pfn: /data/f.{i}\n")
        fh.write("jobs:\n")
        for i in range(LEVELS * width):
            if not files:
                uses = "  uses: []\n"
            else:
                level, k = divmod(i, width)
                inputs = (
                    [f"f.{k}"] if level == 0 else [f"f.{(level - 1) * width + p}.out" for p in {k, (k - 1) % width}]
                )
                uses = "  uses:\n" + "".join(f"  - lfn: {lfn}\n    type: input\n" for lfn in inputs)
                uses += f"  - lfn: f.{i}.out\n    type: output\n    stageOut: false\n    registerReplica: false\n"
            fh.write(f"- type: job\n  name: step\n  id: ID{i:07d}\n  arguments: [-i, f.{i}, -o, f.{i}.out]\n{uses}")
        fh.write("jobDependencies:\n")
        for i in range((LEVELS - 1) * width):
            level, k = divmod(i, width)
            below = (level + 1) * width
            fh.write(f"- id: ID{i:07d}\n  children: [ID{below + k:07d}, ID{below + (k + 1) % width:07d}]\n")


CHILD = r"""
import os, resource, sys, time, yaml
sys.path.insert(0, sys.argv[3])
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site


def events():
    t = time.perf_counter()
    with open(sys.argv[1], "rb") as fh:  # the floor: libyaml's events for the file, nothing kept
        for _ in yaml.parse(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            pass
    return time.perf_counter() - t


site = load_site("local")
start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # the interpreter and pilot's modules
before = events()
kernel = resource.getrusage(resource.RUSAGE_SELF).ru_stime
t = time.perf_counter()
plan(PlanRequest(workflow=sys.argv[1], site=site, cluster=["whole"], submit_dir=sys.argv[2]))
took = time.perf_counter() - t
kernel = resource.getrusage(resource.RUSAGE_SELF).ru_stime - kernel
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
after = events()
written = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(sys.argv[2]) for f in files)
print(took, (before + after) / 2, rss, written, start, kernel)
"""


def run(repo: str, workflow: str, submit: str) -> tuple[float, float, int, int, int, float]:
    """(plan seconds, event stream seconds, peak RSS bytes, bytes written, RSS bytes before planning, the plan's
    kernel seconds) of one plan in a fresh process."""
    env = {**os.environ, "PYTHONPATH": repo}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, workflow, submit, repo],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=os.path.dirname(submit),
    ).stdout.split()
    return float(out[0]), float(out[1]), int(out[2]), int(out[3]), int(out[4]), float(out[5])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=1_000_000)
    ap.add_argument("--base", help="another checkout of pilot to plan the same workflows with, for comparison")
    ap.add_argument("--repeat", type=int, default=1, help="plans of each workflow by each checkout (median printed)")
    ap.add_argument("--files", action="store_true", help="jobs read their parents' files and write one each")
    args = ap.parse_args()
    repo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    sizes = [n for n in (10_000, 100_000, 1_000_000) if n <= args.max]
    runs = [("this", repo)] + ([("base", os.path.abspath(args.base))] if args.base else [])
    first: dict[str, tuple[float, float]] = {}
    ratios: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            wf = os.path.join(tmp, f"wf{n}.yml")
            write_workflow(wf, n, args.files)
            size = os.path.getsize(wf)
            for k in range(args.repeat):
                for label, checkout in runs:
                    took, events, rss, written, start, kernel = run(
                        checkout, wf, os.path.join(tmp, f"submit{n}-{label}-{k}")
                    )
                    per_job = first.setdefault(label, (took / n, (rss - start) / n))
                    ratios.setdefault((label, n), []).append(took / events)
                    print(
                        f"{label:>4} {n:>8} jobs ({size / 1e6:6.1f} MB): plan {took:6.1f} s ({kernel:4.1f} s in the kernel) = "
                        f"{took / events:4.2f}x libyaml's events ({events:.1f} s); peak {rss / 1e6:6.0f} MB; wrote "
                        f"{written / 1e6:7.1f} MB = {written / size:5.2f}x the workflow; per job vs {sizes[0]}: time "
                        f"{took / n / per_job[0]:.2f}x, RSS above the start {(rss - start) / n / per_job[1]:.2f}x",
                        flush=True,
                    )
    if args.repeat > 1:
        for (label, n), values in ratios.items():
            print(
                f"{label:>4} {n:>8} jobs: median {statistics.median(values):.2f}x libyaml's events over {len(values)} plans "
                f"({min(values):.2f}x-{max(values):.2f}x)"
            )


if __name__ == "__main__":
    main()
