"""The master neither spins nor sleeps long; wall-time aborts are quick.

    python bench/latency.py

1. Idle cost: 2 workers run 8 x `sleep 1`; the master's CPU time against its wall
   time (read from /proc when the run ends), as a ratio.
2. Reaction time: a chain of 200 `/bin/true` tasks, each depending on the last; the
   gap between one task's end and the next one's start, from the [cluster-task]
   records, in ms. Every gap is a full round trip worker -> master -> worker.
3. Abort latency: `--max-wall-time 0.05` (3 s) on `sleep 60` tasks, one of which
   ignores SIGTERM; time from the limit to the pilot's exit (target <= 5 s).
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))

from common import pilot, write_dag  # noqa: E402

RECORD = re.compile(r'\[cluster-task name=(\S+), start="([^"]+)", duration=([0-9.]+)')


def master_cpu(tmp: str) -> None:
    dag = write_dag(os.path.join(tmp, "sleep.dag"), (f"TASK s{i} /bin/sleep 1\n" for i in range(8)))
    stats = os.path.join(tmp, "stats")
    # Rank 0 runs under /usr/bin/time, which reports the master's own CPU time.
    cmd = [pilot(3)[0], "-n", "1", "/usr/bin/time", "-o", stats, "-f", "%U %S %e", sys.executable, "-m", "pilot", "run",
           "-s", "-q", dag, ":", "-n", "2", sys.executable, "-m", "pilot", "run", "-s", "-q", dag]
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    user, system, wall = map(float, open(stats).read().split()[-3:])
    print(f"idle master: CPU {user + system:.3f} s over {wall:.2f} s wall while tasks sleep: "
          f"CPU/wall = {(user + system) / wall:.3f}")


def reaction(tmp: str) -> None:
    n = 200
    lines = [f"TASK c{i} /bin/true\n" for i in range(n)] + [f"EDGE c{i} c{i + 1}\n" for i in range(n - 1)]
    dag = write_dag(os.path.join(tmp, "chain.dag"), lines)
    out = subprocess.run(pilot(3, "-s", "-q", dag), capture_output=True, text=True, check=True).stdout
    spans = {}
    for name, start, duration in RECORD.findall(out):
        t = datetime.datetime.fromisoformat(start).timestamp()
        spans[int(name[1:])] = (t, t + float(duration))
    gaps = sorted((spans[i + 1][0] - spans[i][1]) * 1000 for i in range(n - 1))
    print(f"reaction: end of a task to start of its child, over {n - 1} links: median {gaps[len(gaps) // 2]:.2f} ms, "
          f"90th percentile {gaps[int(len(gaps) * 0.9)]:.2f} ms, max {gaps[-1]:.2f} ms "
          f"(PMC polls with 0.5 s sleeps)")


def abort(tmp: str) -> None:
    dag = write_dag(os.path.join(tmp, "abort.dag"), [
        "TASK a /bin/sleep 60\n",
        "TASK b /bin/sh -c 'trap : TERM; while :; do sleep 0.1; done'\n",
    ])
    start = time.perf_counter()
    subprocess.run(pilot(3, "-s", "-q", "--max-wall-time", "0.05", dag), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    total = time.perf_counter() - start
    print(f"wall-time abort: exit {total - 3.0:.2f} s after the 3 s limit, one task ignoring SIGTERM "
          f"(SIGKILL after 3 s grace; target <= 5 s)")
    dag = write_dag(os.path.join(tmp, "abort2.dag"), ["TASK a /bin/sleep 60\n", "TASK b /bin/sleep 60\n"])
    start = time.perf_counter()
    subprocess.run(pilot(3, "-s", "-q", "--max-wall-time", "0.05", dag), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"wall-time abort: exit {time.perf_counter() - start - 3.0:.2f} s after the 3 s limit, tasks that obey SIGTERM")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        master_cpu(tmp)
        reaction(tmp)
        abort(tmp)


if __name__ == "__main__":
    main()
