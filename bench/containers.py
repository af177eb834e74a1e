"""Container tasks: the cost per task of /bin/true on the host, in a container per task, and started once.

    python bench/containers.py [--tasks 40] [--repeat 3]

For each runtime installed (podman, docker through a dockerd the script starts with a private root, and
ch-run through the apptainer stand-in of tests/bin), in the same run: ``pilot run`` with one worker
(``-n 2``) of a DAG of --tasks tasks and of one task, the task being

- ``/bin/true`` on the host;
- the planner's container line (``podman run --rm --network none -v DIR:/srv -w /srv IMAGE /bin/true``,
  ``apptainer exec --no-home --bind DIR:/srv --pwd /srv IMAGE /bin/true``), run per task;
- the same line under ``--containers once-exec``: one container started at the first task, each task the
  runtime's exec (``podman exec``, ``docker exec``, ``apptainer exec instance://``);
- the same line under ``--containers once``: one container started at the first task, each podman or docker task
  entering its namespaces with nsenter (apptainer's: as under once-exec).

The cost per task is (time of the DAG of N - time of the DAG of one) / (N - 1), the best of --repeat pairs:
the run's fixed costs (MPI start, the container's start under --containers once) drop out. Printed: each cost,
what a container adds to a task per task and started once (through the runtime's exec and with nsenter), and
their ratios. Target: started once adds at most 20 ms per task on podman. The image is a busybox-static root
file system built here, offline.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))

from common import pilot, timed, write_dag

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGE = "localhost/pilot-bench:busybox"


def build_rootfs(root: str) -> None:
    for sub in ("bin", "etc", "srv", "tmp", "proc", "sys", "dev", "home", "mnt"):
        os.makedirs(os.path.join(root, sub))
    shutil.copy(shutil.which("busybox") or "/bin/busybox", os.path.join(root, "bin", "busybox"))
    for applet in ("sh", "sleep", "true"):
        os.symlink("busybox", os.path.join(root, "bin", applet))
    for name, text in (("passwd", "root:x:0:0:root:/root:/bin/sh\n"), ("group", "root:x:0:\n")):
        with open(os.path.join(root, "etc", name), "w") as fh:
            fh.write(text)


def run(argv: list[str], env: dict[str, str], **kw) -> None:
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, **kw)


def podman_env(tmp: str, tar: str) -> dict[str, str]:
    with open(os.path.join(tmp, "storage.conf"), "w") as fh:
        fh.write(f'[storage]\ndriver = "vfs"\ngraphroot = "{tmp}/graph"\nrunroot = "{tmp}/run"\n')
    env = {
        **os.environ,
        "CONTAINERS_CONF": os.path.join(REPO, "containers", "containers.conf"),
        "CONTAINERS_STORAGE_CONF": os.path.join(tmp, "storage.conf"),
    }
    run(["podman", "import", tar, IMAGE], env)
    return env


def start_dockerd(home: str, tar: str) -> tuple[subprocess.Popen, dict[str, str]]:
    sock = f"unix://{home}/docker.sock"
    proc = subprocess.Popen(
        [
            "dockerd",
            "--data-root",
            f"{home}/data",
            "--exec-root",
            f"{home}/x",
            "-H",
            sock,
            "--pidfile",
            f"{home}/pid",
            "--iptables=false",
            "--bridge=none",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    env = {**os.environ, "DOCKER_HOST": sock}
    deadline = time.monotonic() + 60
    while subprocess.run(["docker", "info"], env=env, capture_output=True).returncode != 0:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("dockerd did not answer within 60 s")
        time.sleep(0.2)
    run(["docker", "import", tar, IMAGE], env)
    return proc, env


def per_task(lines: list[str], tmp: str, env: dict[str, str], tasks: int, repeat: int, *extra: str) -> float:
    """Seconds per task beyond the run's fixed cost: best of ``repeat`` (N-task run - one-task run) / (N - 1)."""
    many = write_dag(os.path.join(tmp, "many.dag"), (f"TASK t{i} {lines[0]}\n" for i in range(tasks)))
    one = write_dag(os.path.join(tmp, "one.dag"), [f"TASK t0 {lines[0]}\n"])
    best = float("inf")
    for _ in range(repeat):
        t_many = timed(pilot(2, "-s", "-q", *extra, many), cwd=tmp, env=env)
        t_one = timed(pilot(2, "-s", "-q", *extra, one), cwd=tmp, env=env)
        best = min(best, (t_many - t_one) / (tasks - 1))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if not shutil.which("busybox"):
        raise SystemExit("bench/containers.py: needs busybox-static for its image (apt-get install busybox-static)")
    with tempfile.TemporaryDirectory(prefix="pb", dir="/tmp") as tmp:
        build_rootfs(os.path.join(tmp, "root"))
        tar = os.path.join(tmp, "root.tar")
        subprocess.run(["tar", "-C", os.path.join(tmp, "root"), "-cf", tar, "."], check=True)
        work = os.path.join(tmp, "work")
        os.mkdir(work)
        host = per_task(["/bin/true"], work, dict(os.environ), args.tasks, args.repeat)
        print(f"host: /bin/true {host * 1000:.1f} ms per task ({args.tasks} tasks, one worker)")
        runtimes: list[tuple[str, dict[str, str], str]] = []
        dockerd = None
        if shutil.which("podman") and shutil.which("runc"):
            runtimes.append(("podman", podman_env(tmp, tar), IMAGE))
        if shutil.which("dockerd") and shutil.which("docker"):
            dockerd, env = start_dockerd(os.path.join(tmp, "d"), tar)
            runtimes.append(("docker", env, IMAGE))
        if shutil.which("ch-run") and shutil.which("mksquashfs"):
            sqfs = os.path.join(tmp, "image.sqfs")
            run(["mksquashfs", os.path.join(tmp, "root"), sqfs, "-quiet", "-noappend", "-all-root"], dict(os.environ))
            standin = {
                **os.environ,
                "PATH": f"{REPO}/tests/bin{os.pathsep}{os.environ['PATH']}",
                "PILOT_APPTAINER_STANDIN_STATE": os.path.join(tmp, "standin"),
                "USER": os.environ.get("USER", "root"),
            }
            runtimes.append(("apptainer", standin, sqfs))
        try:
            for name, env, image in runtimes:
                if name == "apptainer":
                    line = f"apptainer exec --no-home --bind {work}:/srv --pwd /srv {image} /bin/true"
                else:
                    line = f"{name} run --rm --network none -v {work}:/srv -w /srv {image} /bin/true"
                each = per_task([line], work, env, args.tasks, args.repeat)
                exe = per_task([line], work, env, args.tasks, args.repeat, "--containers", "once-exec")
                label = "apptainer (ch-run stand-in)" if name == "apptainer" else name
                print(
                    f"{label}: per task {each * 1000:.1f} ms, started once with {name} exec {exe * 1000:.1f} ms per "
                    f"task; a container adds {(each - host) * 1000:.1f} ms per task, started once "
                    f"{(exe - host) * 1000:.1f} ms; per task / started once = {each / exe:.1f}"
                )
                if name == "apptainer":
                    continue  # --containers once runs apptainer's tasks through instance:// too
                once = per_task([line], work, env, args.tasks, args.repeat, "--containers", "once")
                print(
                    f"{label}: started once with nsenter {once * 1000:.1f} ms per task, adds "
                    f"{(once - host) * 1000:.1f} ms (target on podman: at most 20); per task / nsenter = "
                    f"{each / once:.1f}, {name} exec / nsenter = {exe / once:.1f}"
                )
        finally:
            if dockerd is not None:
                dockerd.send_signal(signal.SIGTERM)
                dockerd.wait(timeout=60)


if __name__ == "__main__":
    main()
