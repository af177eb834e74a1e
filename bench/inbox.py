"""The inbox of a long-lived pilot run: how fast it takes a DAG, what its looks cost, and whether dispatch slows.

    python bench/inbox.py [--tasks 2000] [--feeds 20]

In one run, on this machine:

- pick-up: a ``pilot run --inbox`` (mpiexec -n 3) idle; ``--feeds`` DAGs of one /bin/true are fed one after
  another; per DAG the time from the request written (pilot.contracts.inbox.write_request, atomic and fsynced) to
  its task's SUBMIT in its jobstate.log (the run took it and queued its task) and to its EXECUTE;
- the cost of one look at an inbox (a directory read, or the stat that tells it did not change) against the
  interval between looks (the agent's INBOX_EVERY): the share of the master's time the looks take;
- inotify on the same directory (through ctypes: the standard library has no binding), as the alternative
  wake-up: its latency from the write to the event;
- dispatch: the same DAG of ``--tasks`` /bin/true run by ``pilot run`` (the single-DAG master) and fed to a
  ``pilot run --inbox``, tasks per second each (the master's wall time from first SUBMIT to last JOB_SUCCESS).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from pilot.contracts import inbox
from pilot.runtime.agent import INBOX_EVERY

MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")


def times(log: str, event: str) -> list[float]:
    with open(log, encoding="utf-8") as fh:
        return [float(w[0]) for w in (line.split() for line in fh) if len(w) > 2 and w[2] == event]


def wait(path: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {path}")
        time.sleep(0.001)


def agent(box: str) -> subprocess.Popen:
    return subprocess.Popen(
        [MPIEXEC, "-n", "3", sys.executable, "-m", "pilot", "run", "--inbox", box],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def pickup(tmp: str, feeds: int) -> tuple[list[float], list[float]]:
    box = os.path.join(tmp, "inbox")
    proc = agent(box)
    warm = os.path.join(tmp, "warm")
    os.makedirs(warm)
    with open(os.path.join(warm, "c.dag"), "w", encoding="utf-8") as fh:
        fh.write("TASK t /bin/true\n")
    os.makedirs(box, exist_ok=True)
    inbox.write_request(box, inbox.Request("warm", os.path.join(warm, "c.dag"), ["--jobstate-log"]))
    wait(os.path.join(box, "done", "warm.done"))  # the run is up
    taken, started = [], []
    for i in range(feeds):
        d = os.path.join(tmp, f"f{i}")
        os.makedirs(d)
        with open(os.path.join(d, "c.dag"), "w", encoding="utf-8") as fh:
            fh.write("TASK t /bin/true\n")
        time.sleep(0.0123)  # anywhere between two looks
        t0 = time.time()
        inbox.write_request(box, inbox.Request(f"f{i}", os.path.join(d, "c.dag"), ["--jobstate-log"]))
        wait(os.path.join(box, "done", f"f{i}.done"))
        log = os.path.join(d, "jobstate.log")
        taken.append(times(log, "SUBMIT")[0] - t0)
        started.append(times(log, "EXECUTE")[0] - t0)
    inbox.write_stop(box)
    proc.wait()
    return taken, started


def look_cost(tmp: str, n: int = 2000) -> tuple[float, float]:
    """(a read of an inbox, the stat that tells whether it changed), seconds each."""
    box = os.path.join(tmp, "looked")
    os.makedirs(box)
    for i in range(20):  # done files of earlier DAGs stay there
        inbox.write_done(box, f"old{i}", 0)
    t0 = time.perf_counter()
    for _ in range(n):
        inbox.look(box)
    t1 = time.perf_counter()
    for _ in range(n):
        os.stat(box)
    return (t1 - t0) / n, (time.perf_counter() - t1) / n


def inotify_latency(tmp: str, n: int = 20) -> list[float]:
    libc = ctypes.CDLL(None, use_errno=True)
    box = os.path.join(tmp, "watched")
    os.makedirs(box)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0 or libc.inotify_add_watch(fd, box.encode(), 0x80 | 0x100) < 0:  # IN_MOVED_TO | IN_CREATE
        return []
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        inbox.write_request(box, inbox.Request(f"r{i}", "/x.dag", []))
        while True:  # the rename's event (the temporary file's creation comes first)
            data = os.read(fd, 4096)
            mask = struct.unpack_from("iIII", data)[1]
            if mask & 0x80 or len(data) > 16 + struct.unpack_from("iIII", data)[3]:
                break
        out.append(time.perf_counter() - t0)
    os.close(fd)
    return out


def throughput(tmp: str, tasks: int) -> tuple[float, float]:
    text = "".join(f"TASK t{i} /bin/true\n" for i in range(tasks))
    plain, fed = os.path.join(tmp, "plain"), os.path.join(tmp, "fed")
    for d in (plain, fed):
        os.makedirs(d)
        with open(os.path.join(d, "c.dag"), "w", encoding="utf-8") as fh:
            fh.write(text)
    subprocess.run(
        [MPIEXEC, "-n", "3", sys.executable, "-m", "pilot", "run", "--jobstate-log", "c.dag"],
        cwd=plain,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    box = os.path.join(tmp, "tbox")
    proc = agent(box)
    os.makedirs(box, exist_ok=True)
    inbox.write_request(box, inbox.Request("fed", os.path.join(fed, "c.dag"), ["--jobstate-log"]))
    wait(os.path.join(box, "done", "fed.done"), 600)
    inbox.write_stop(box)
    proc.wait()

    def rate(d: str) -> float:
        log = os.path.join(d, "jobstate.log")
        return tasks / (max(times(log, "JOB_SUCCESS")) - min(times(log, "SUBMIT")))

    return rate(plain), rate(fed)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=2000)
    p.add_argument("--feeds", type=int, default=20)
    ns = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="pilot-inbox-") as tmp:
        taken, started = pickup(tmp, ns.feeds)
        ms = sorted(1000 * t for t in taken)
        print(
            f"pick-up, request written -> its task queued: median {ms[len(ms) // 2]:.1f} ms, max {ms[-1]:.1f} ms; "
            f"-> first task started: median {1000 * sorted(started)[len(started) // 2]:.1f} ms "
            f"({ns.feeds} DAGs fed to an idle run; looks every {1000 * INBOX_EVERY:g} ms)"
        )
        read, stat = look_cost(tmp)
        print(
            f"one read of the inbox: {1e6 * read:.1f} us ({100 * read / INBOX_EVERY:.2f}% of the master's time at one "
            f"per look); the stat that skips it while nothing changed: {1e6 * stat:.1f} us "
            f"({100 * stat / INBOX_EVERY:.3f}%)"
        )
        lat = inotify_latency(tmp)
        if lat:
            print(
                f"inotify, the same write -> its event: median {1e3 * sorted(lat)[len(lat) // 2]:.2f} ms "
                "(local file systems only; the writer's write and fsyncs included)"
            )
        plain, fed = throughput(tmp, ns.tasks)
        print(
            f"dispatch of {ns.tasks} /bin/true, 2 workers: pilot run {plain:.0f} tasks/s, fed to pilot run --inbox "
            f"{fed:.0f} tasks/s (ratio {fed / plain:.2f})"
        )


if __name__ == "__main__":
    main()
