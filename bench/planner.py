"""Planner scale: synthetic Pegasus workflows of 10^4..10^6 jobs, label+horizontal clustering.

    python bench/planner.py [--max 1000000]

Targets: 10^6 jobs in < 60 s and < 4 GB peak memory. Each size is
planned in a fresh process (peak RSS from getrusage); the time is also shown as a
ratio against libyaml parsing the same file (events only), the floor any reader pays.
All sizes share one scratch directory, removed at the end: deleting thousands of
files right before a run slows file creation on some disks (ext4 with discard).
Workflow shape: stages of 1,000 jobs (each job feeds 10 of the next stage), a
tenth of the stages labelled in groups of 250 jobs, clusters.size 250 on the
others: a few hundred tasks per batch job, as one would cluster a million short
tasks to stay within queue limits. Each cluster costs a directory and four files
(DAG, batch script, braindump.yml, static bp), so the file system's create rate
sets much of the time: about 0.3 ms a file on this machine's disk.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

STAGE = 1000


def write_workflow(path: str, n: int) -> None:
    """Pegasus 5 YAML in the layout Pegasus.api writes (jobs, jobDependencies, inline catalogs)."""
    stages = max(1, n // STAGE)
    with open(path, "w") as fh:
        fh.write("pegasus: 5.0.4\nname: synthetic\ntransformationCatalog:\n  transformations:\n")
        for s in range(10):
            fh.write(f"  - name: t{s}\n    sites:\n    - name: local\n      pfn: /bin/true\n      type: installed\n"
                     f"    profiles:\n      pegasus:\n        clusters.size: 250\n")
        fh.write("jobs:\n")
        for i in range(n):
            stage = i // STAGE
            fh.write(f"- type: job\n  name: t{stage % 10}\n  id: ID{i:07d}\n  arguments: [-i, f.{i}, -o, f.{i}.out]\n  uses: []\n")
            if stage % 10 == 0:
                fh.write(f"  profiles:\n    pegasus:\n      label: stage{stage}_{(i % STAGE) // 250}\n")
        fh.write("jobDependencies:\n")
        for i in range(n):
            stage, k = divmod(i, STAGE)
            if stage + 1 < stages:
                base = (stage + 1) * STAGE + (k // 10) * 10
                fh.write(f"- id: ID{i:07d}\n  children: [{', '.join(f'ID{base + c:07d}' for c in range(10))}]\n")


CHILD = r"""
import resource, sys, time, yaml
sys.path.insert(0, sys.argv[3])
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site
t = time.perf_counter()
res = plan(PlanRequest(workflow=sys.argv[1], site=load_site("local"), cluster=["label", "horizontal"], submit_dir=sys.argv[2]))
took = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.perf_counter()
with open(sys.argv[1], "rb") as fh:  # the floor: libyaml's events for the file, nothing kept
    for _ in yaml.parse(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        pass
load = time.perf_counter() - t
print(took, load, rss, len(res.emitted))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=1_000_000)
    args = ap.parse_args()
    repo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    sizes = [n for n in (10_000, 100_000, 1_000_000) if n <= args.max]
    base = None
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            wf = os.path.join(tmp, f"wf{n}.yml")
            write_workflow(wf, n)
            out = subprocess.run([sys.executable, "-c", CHILD, wf, os.path.join(tmp, f"submit{n}"), repo],
                                 capture_output=True, text=True, check=True).stdout.split()
            took, load, rss, clusters = float(out[0]), float(out[1]), float(out[2]), int(out[3])
            base = base or took / n
            print(f"{n:>8} jobs: plan {took:6.1f} s ({took / load:.1f}x parsing the YAML, {took / n / base:.2f}x the "
                  f"per-job time at {sizes[0]}), peak {rss:6.0f} MB, {clusters} clusters")


if __name__ == "__main__":
    main()
