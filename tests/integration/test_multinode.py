"""pilot on a real three-node Slurm (``multinode`` marker): node1..node3 with their own host names.

The cluster comes from .ci/multinode/start-multinode-slurm.sh (2 CPUs per
node, partition ``mn``); ``SLURM_CONF`` points the clients at it. Each
test writes its own site file; the driver, Slurm and the pilot are all real.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from tests.integration.test_submit import PILOT, api, pilot, state
from tests.waiting import wait_for

pytestmark = pytest.mark.multinode

CONF = "/var/tmp/multinode-slurm/etc/slurm.conf"
NODES = ["node1", "node2", "node3"]
RECORD = re.compile(
    r'\[cluster-task (?:id=\S+, )?name=([^,]+), start="([^"]+)", duration=([\d.]+), status=(-?\d+), '
    r'app="[^"]*", hostname="([^"]+)", slot=(\d+), cpus=(\d+), memory=(\d+)'
)


@pytest.fixture
def multinode(monkeypatch):
    if not os.path.exists(CONF):
        pytest.skip("no multi-node Slurm: start it with bash .ci/multinode/start-multinode-slurm.sh")
    monkeypatch.setenv("SLURM_CONF", CONF)
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"the multi-node Slurm does not answer: {out.stderr.strip()}")
    for node in NODES:  # a test that failed half-way may have left one down
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], capture_output=True)


def site_file(tmp_path: Path, launcher: str = "srun", **extra: str) -> str:
    path = tmp_path / "mn.yaml"
    lines = [
        "description: three-node Slurm on this machine",
        "scheduler: slurm",
        "pegasus_site: container",
        "partition: mn",
        "nodes: 3",
        "cores_per_node: 2",
        "memory_per_node_mb: 4000",
        "walltime: '00:05:00'",
        f"launcher: {launcher}",
        *(f"{k}: {v}" for k, v in extra.items()),
    ]
    if launcher == "srun":
        lines.append("launcher_options: --mpi=pmi2")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def workflow(
    tmp_path: Path,
    n: int,
    argv: list[str],
    cpus: dict[int, int] | None = None,
    exe: str = "/bin/sleep",
    profile: str = "pmc_request_cpus",
) -> str:
    """``n`` independent jobs running ``exe argv``; job i asks for cpus[i] of ``profile`` (CPUs or MB)."""
    wf = api.Workflow("wide", infer_dependencies=False)
    tc = api.TransformationCatalog()
    tc.add_transformations(api.Transformation("work", site="container", pfn=exe, is_stageable=False))
    wf.add_transformation_catalog(tc)
    for i in range(n):
        job = api.Job("work", _id=f"t{i}").add_args(*[a.replace("{i}", str(i)) for a in argv])
        if cpus and i in cpus:
            job.add_profiles(api.Namespace.PEGASUS, key=profile, value=str(cpus[i]))
        wf.add_jobs(job)
    path = tmp_path / "wide.yml"
    wf.write(str(path))
    return str(path)


def records(cluster_dir: Path) -> list[dict]:
    """The [cluster-task] records of the workflow's own jobs (work_*), not of the data jobs the plan adds."""
    out = []
    for f in cluster_dir.glob("*.out.*"):
        for m in RECORD.finditer(f.read_text()):
            if not m.group(1).startswith("work_"):
                continue
            start = datetime.fromisoformat(m.group(2)).timestamp()
            out.append(
                {
                    "name": m.group(1),
                    "start": start,
                    "end": start + float(m.group(3)),
                    "status": int(m.group(4)),
                    "host": m.group(5),
                    "slot": int(m.group(6)),
                    "cpus": int(m.group(7)),
                    "memory": int(m.group(8)),
                }
            )
    return out


def resource_hosts(cluster_dir: Path) -> set[str]:
    return {line.rsplit(",", 1)[1] for f in cluster_dir.glob("*.dag.resource") for line in f.read_text().split()}


@pytest.mark.parametrize("launcher", ["srun", "mpiexec"])
def test_pilot_spans_three_nodes(tmp_path, multinode, launcher):
    hosts = tmp_path / "hosts.txt"
    host_script = tmp_path / "host.sh"
    host_script.write_text(f"#!/bin/sh\nhostname >> {hosts}\n")
    host_script.chmod(0o755)
    sub = tmp_path / "sub"
    site = site_file(tmp_path, launcher, pilot_options=f"'--host-script {host_script}'")
    res = pilot(
        "submit",
        "--site",
        site,
        "--cluster",
        "whole",
        "--poll",
        "0.3",
        workflow(tmp_path, 10, ["2"]),
        "--dir",
        str(sub),
        timeout=240,
    )
    assert res.returncode == 0, res.stderr
    cdir = sub / "merge_wide"
    script = (cdir / "merge_wide.slurm").read_text()
    assert "#SBATCH --nodes=3\n#SBATCH --ntasks-per-node=2\n" in script
    expected = (
        "srun --mpi=pmi2 --kill-on-bad-exit=0 -n 6 --ntasks-per-node 2 "
        if launcher == "srun"
        else f"{Path(sys.executable).parent / 'mpiexec'} -n 6 -ppn 2 "
    )
    assert expected in script
    said = " ".join(p.read_text() for p in cdir.glob("pilot-*.stderr"))
    assert "Master starting with 5 workers" in said, said
    recs = records(cdir)
    assert len(recs) == 10 and all(r["status"] == 0 for r in recs)
    assert {r["host"] for r in recs} == set(NODES)  # workers on all three nodes
    assert {r["host"] for r in recs if r["slot"] == 1} <= {"node1"}  # rank 1 shares node1 with the master (rank 0)
    assert resource_hosts(cdir) == set(NODES)
    assert sorted(hosts.read_text().split()) == NODES  # the host script ran once per node


def test_task_wider_than_any_node_is_infeasible(tmp_path, multinode):
    """Six CPUs in the job, two per node: a task asking for three can never run."""
    sub = tmp_path / "sub"
    res = pilot(
        "submit",
        "--site",
        site_file(tmp_path),
        "--cluster",
        "whole",
        "--poll",
        "0.3",
        workflow(tmp_path, 6, ["0"], cpus={0: 3}),
        "--dir",
        str(sub),
        timeout=180,
    )
    assert res.returncode == 1
    cdir = sub / "merge_wide"
    said = " ".join(p.read_text() for p in cdir.glob("pilot-*.stderr"))
    assert (
        "No host is capable of running task work_t0: it requests 3 CPU(s)" in said and "no host has that much" in said
    ), said
    assert all(f"{node}: 2 CPUs" in said for node in NODES), said  # each node's own count, not the job's 6
    assert state(sub)["merge_wide"]["state"] == "failed"


@pytest.mark.parametrize("profile,amount", [("pmc_request_cpus", 2), ("pmc_request_memory", 3000)])
def test_resources_are_counted_per_host(tmp_path, multinode, profile, amount):
    """Tasks of two CPUs, or of 3000 of a node's 4000 MB: one at a time on each node, three at a time in the job."""
    sub = tmp_path / "sub"
    res = pilot(
        "submit",
        "--site",
        site_file(tmp_path),
        "--cluster",
        "whole",
        "--poll",
        "0.3",
        workflow(tmp_path, 6, ["2"], cpus={i: amount for i in range(6)}, profile=profile),
        "--dir",
        str(sub),
        timeout=240,
    )
    assert res.returncode == 0, res.stderr
    recs = records(sub / "merge_wide")
    field = "cpus" if profile == "pmc_request_cpus" else "memory"
    assert len(recs) == 6 and all(r[field] == amount for r in recs)
    for host in NODES:
        mine = sorted((r["start"], r["end"]) for r in recs if r["host"] == host)
        assert all(a[1] <= b[0] + 0.01 for a, b in zip(mine, mine[1:])), (host, mine)  # never two at once on a node
    most = max(sum(1 for r in recs if r["start"] <= t["start"] < r["end"]) for t in recs)
    assert most >= 2  # several nodes worked at the same time


def resume(node: str) -> None:
    """Bring ``node`` back (Slurm may already have: ReturnToService=2 returns a node whose slurmd registers)."""
    subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], capture_output=True)
    out = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%t"], capture_output=True, text=True).stdout.strip()
    assert not out.startswith("down"), f"{node} is still {out}"


def our_jobs(prefix: str) -> list[str]:
    """Jobs named ``prefix``* that have not ended (squeue also lists ended jobs for a while, e.g. NODE_FAIL)."""
    live = "PENDING,CONFIGURING,RUNNING,COMPLETING,SUSPENDED,REQUEUED,RESIZING,SIGNALING,STAGE_OUT,STOPPED"
    out = subprocess.run(["squeue", "-h", "-t", live, "-o", "%i %j"], capture_output=True, text=True).stdout
    return [
        line.split()[0] for line in out.splitlines() if len(line.split()) == 2 and line.split()[1].startswith(prefix)
    ]


def submit_watching(sub: Path, site: str, watch: Callable[[], None], timeout: float) -> tuple[int | None, str]:
    """Run ``pilot submit`` on ``sub``, calling ``watch()`` every 0.2 s until it ends (or ``timeout`` s);
    a driver still running then is killed and its jobs cancelled. Returns its exit code and stderr."""
    driver = subprocess.Popen(
        [*PILOT, "submit", "--site", site, "--poll", "0.3", str(sub)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + timeout
        while driver.poll() is None and time.monotonic() < deadline:
            watch()
            time.sleep(0.2)
        _, err = driver.communicate(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
            pilot("cancel", str(sub), "--site", site)
    return driver.returncode, err


def test_node_down_mid_run_completes_without_rerunning_done_tasks(tmp_path, multinode):
    log = tmp_path / "tasks.log"
    task = tmp_path / "task.sh"
    task.write_text(f"#!/bin/sh\necho start $1 >> {log}\nsleep 2\necho end $1 >> {log}\n")
    task.chmod(0o755)
    sub = tmp_path / "sub"
    site = site_file(tmp_path, scheduler_options="['#SBATCH --no-requeue']")
    plan = pilot(
        "plan", workflow(tmp_path, 16, ["{i}"], exe=str(task)), "--site", site, "--cluster", "whole", "--dir", str(sub)
    )
    assert plan.returncode == 0, plan.stderr
    rescue = sub / "merge_wide" / "merge_wide.dag.rescue"
    live_max, done_before, downed, first = 0, set(), False, set()

    def watch() -> None:
        nonlocal live_max, done_before, downed, first
        if not (sub / "submit.state.json").exists():
            return
        plan_id = json.loads((sub / "submit.state.json").read_text())["plan_id"]
        jobs = our_jobs(f"pilot-{plan_id}-merge_wide-")
        live_max = max(live_max, len(jobs))
        if not downed and rescue.exists() and "DONE work_" in rescue.read_text():
            first = set(jobs)
            subprocess.run(["scontrol", "update", "nodename=node2", "state=down", "reason=pilot-test"], check=True)
            downed = True
        elif downed and not done_before and not first & set(jobs):  # the job that lost its node has ended
            done_before = {line.split()[1] for line in rescue.read_text().splitlines() if line.startswith("DONE work_")}
            resume("node2")

    try:
        code, err = submit_watching(sub, site, watch, 300)
    finally:
        resume("node2")
    assert code == 0, err
    assert downed and done_before, err
    c = state(sub)["merge_wide"]
    assert c["state"] == "done" and len(c["job_ids"]) >= 2  # resubmitted after the node failure
    assert live_max <= 1  # never two batch jobs of the cluster at once
    started = log.read_text().split("\n")
    for name in done_before:
        i = name.rsplit("_t", 1)[1]
        assert started.count(f"start {i}") == 1, name  # a DONE task is not run again
    done = [line.split()[1] for line in rescue.read_text().splitlines() if line.startswith("DONE work_")]
    assert sorted(done) == sorted(f"work_t{i}" for i in range(16))


def _node_of(pid: int) -> str:
    """The Slurm node a rank runs on (SLURMD_NODENAME in its environment), "" if unknown."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return ""
    return next((e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"SLURMD_NODENAME=")), "")


def _worker_pids(dag_name: str, rank0: bool = False) -> list[int]:
    """Pids of the pilot ranks other than rank 0 (with ``rank0``: of rank 0) that run ``dag_name`` (srun's PMI
    gives each its PMI_RANK)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            any(a.endswith(dag_name.encode()) for a in argv)
            and b"run" in argv
            and any(e.startswith(b"PMI_RANK=") and (e == b"PMI_RANK=0") == rank0 for e in env)
        ):
            pids.append(int(entry.name))
    return [p for p in pids if _parent(p) not in pids]  # a worker's watchdog is its fork: same command line


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def test_a_lost_worker_costs_only_its_task_and_the_run_goes_on(tmp_path, multinode):
    """SIGKILL of one worker rank under srun (--kill-on-bad-exit=0): its watchdog tells the master, which runs
    the task it held on another worker; the step goes on, one batch job does it all, nothing runs twice."""
    sub = tmp_path / "sub"
    site = site_file(tmp_path)
    plan = pilot("plan", workflow(tmp_path, 12, ["1"]), "--site", site, "--cluster", "whole", "--dir", str(sub))
    assert plan.returncode == 0, plan.stderr
    rescue = sub / "merge_wide" / "merge_wide.dag.rescue"
    killed = None

    def watch() -> None:
        nonlocal killed
        if killed is None and rescue.exists() and "DONE work_" in rescue.read_text():
            master = _node_of(next(iter(_worker_pids("merge_wide.dag", rank0=True)), 0))
            pids = [p for p in _worker_pids("merge_wide.dag") if _node_of(p) not in ("", master)]
            if pids:
                killed = pids[0]
                os.kill(killed, 9)

    code, err = submit_watching(sub, site, watch, 240)
    assert killed is not None, "no worker rank on another node than the master's was found to kill"
    assert code == 0, err
    c = state(sub)["merge_wide"]
    assert c["state"] == "done" and len(c["job_ids"]) == 1, c  # no resubmission: the run went on
    done = [line.split()[1] for line in rescue.read_text().splitlines() if line.startswith("DONE work_")]
    assert sorted(done) == sorted(f"work_t{i}" for i in range(12))  # each once
    log = "".join(p.read_text() for p in (sub / "merge_wide").glob("pilot-*.stderr"))
    assert "; the run goes on without it" in log, log
    record = sub / "merge_wide" / "merge_wide.dag.crashes"  # none if the worker was between two tasks
    crashes = record.read_text().split() if record.exists() else []
    assert crashes == [] or (len(crashes) == 2 and crashes[0] == "CRASH")  # the one task it held, counted once


PADDED_START = """\
import os, runpy, sys
# Heap left behind by whatever a program did before MPI_Init: MPICH's address card carries it.
kept = [os.urandom({size}) * (i % 7 + 1) for i in range(2000)]
del kept[::2]
sys.argv = ["pilot", *sys.argv[1:]]
runpy.run_module("pilot", run_name="__main__")
"""


@pytest.mark.parametrize("size", [520, 600])
def test_mpi_starts_under_slurms_pmi_whatever_the_heap_holds(tmp_path, multinode, size):
    """srun --mpi=pmi2 with the mpich wheel: MPI_Init finished whatever the ranks' heap held before it.

    With UCX, MPICH publishes a 4096-byte address card, heap included, in pieces that can exceed
    the 1024 bytes Slurm's PMI-1 server reads per request: with a heap filled like this one every
    start hung. The start settings keep out of the tasks.
    """
    start = tmp_path / "padded.py"
    start.write_text(PADDED_START.format(size=size))
    dag = tmp_path / "w.dag"
    dag.write_text(
        "".join(
            f"TASK t{i} /bin/sh -c 'echo net=${{MPIR_CVAR_CH4_NETMOD-unset}} "
            f"fi=${{FI_PROVIDER-unset}} on $(hostname)'\n"
            for i in range(6)
        )
    )
    cmd = [
        "salloc",
        "-Q",
        "-p",
        "mn",
        "-N",
        "3",
        "-n",
        "6",
        "--ntasks-per-node",
        "2",
        "-J",
        "padded-start",
        "srun",
        "--mpi=pmi2",
        "--kill-on-bad-exit=1",
        sys.executable,
        str(start),
        "run",
        "-s",
        str(dag),
    ]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=90)
    except subprocess.TimeoutExpired:
        for job in our_jobs("padded-start"):
            subprocess.run(["scancel", job], capture_output=True)
        pytest.fail("MPI_Init hung under srun --mpi=pmi2")
    assert res.returncode == 0 and "mpi/pmi2: " not in res.stderr, res.stderr
    said = [line for line in res.stdout.splitlines() if line.startswith("net=")]
    assert len(said) == 6 and all(line.startswith("net=unset fi=unset on node") for line in said), res.stdout


@pytest.mark.monitord
def test_monitoring_of_a_cluster_whose_tasks_ran_on_several_nodes(tmp_path, multinode):
    """A label cluster spread over the three nodes, one task failing: the live pegasus-monitord and a replay end
    without error (monitord reads each record's hostaddr once a job's records name several hosts), and
    pegasus-statistics and -analyzer give the numbers they give for one node."""
    from pilot.submit.monitord import pegasus_cli

    wf = api.Workflow("spread", infer_dependencies=False)
    tc = api.TransformationCatalog()
    tc.add_transformations(api.Transformation("work", site="container", pfn="/bin/sh", is_stageable=False))
    wf.add_transformation_catalog(tc)
    for i in range(9):
        body = "echo broken >&2; exit 3" if i == 4 else "sleep 1; hostname"
        wf.add_jobs(
            api.Job("work", _id=f"t{i}")
            .add_args("-c", f"'{body}'")
            .add_profiles(api.Namespace.PEGASUS, key="label", value="spread")
        )
    wf.write(str(tmp_path / "spread.yml"))
    sub = tmp_path / "sub"
    res = pilot(
        "submit",
        "--site",
        site_file(tmp_path),
        "--cluster",
        "label",
        "--retry",
        "0",
        "--poll",
        "0.3",
        str(tmp_path / "spread.yml"),
        "--dir",
        str(sub),
        timeout=300,
    )
    assert res.returncode == 1, res.stderr  # t4 fails
    recs = records(sub / "merge_spread")
    assert len({r["host"] for r in recs}) >= 2, recs  # the cluster's tasks ran on several nodes
    said = (sub / "monitord.out").read_text()
    assert "Traceback" not in said and "KeyError" not in said and not (sub / "monitord.incomplete").exists()

    def tool(name, *args):
        return subprocess.run([*pegasus_cli(name), *args], cwd=sub, capture_output=True, text=True, timeout=120)

    def tasks_and_jobs():
        stats = tool("pegasus-statistics", "-s", "all", ".")
        assert stats.returncode == 0, stats.stderr
        text = (sub / "statistics" / "summary.txt").read_text()
        return {line.split()[0]: line.split()[1:5] for line in text.splitlines() if line.startswith(("Tasks", "Jobs"))}

    live = tasks_and_jobs()
    # the tasks: the 9 jobs, t4 failed; the jobs: the cluster and the 2 data jobs (create-dir, done; the cleanup,
    # never run), which have no task, as in a Pegasus run
    assert live == {"Tasks": ["8", "1", "0", "9"], "Jobs": ["1", "1", "1", "3"]}, live
    (sub / "monitord.recover").write_text("line_processed 1\n")
    replay = tool("pegasus-monitord", "-r", "-j", str(tmp_path / "replay-jobstate.log"), "spread-0.dag.dagman.out")
    assert replay.returncode == 0 and "Traceback" not in replay.stderr, replay.stderr[-2000:]
    assert tasks_and_jobs() == live  # a replay agrees with the live monitord
    analyzer = tool("pegasus-analyzer", ".")
    assert "exitcode    : 3" in analyzer.stdout and "broken" in analyzer.stdout and " - work - t4 - " in analyzer.stdout


def test_pilot_job_runs_a_two_node_cluster_beside_a_one_node_one_and_a_node_down_costs_only_a_rerun(
    tmp_path, multinode
):
    """--pilots on three nodes: a cluster of two nodes and one of one node start together in one pilot job of
    three, the first on two whole nodes of it, the other on the third; node3 set DOWN while they run takes the pilot job down, and both resume (in a pilot job of the nodes
    once node3 is back) from their rescue logs: no task ends twice, the run succeeds, no --retry is used."""
    wf = api.Workflow("sidebyside", infer_dependencies=False)
    wf.add_transformation_catalog(
        api.TransformationCatalog().add_transformations(
            api.Transformation("work", site="container", pfn="/bin/sh", is_stageable=False)
        )
    )
    done = tmp_path / "done"
    done.mkdir()
    for name, label in (("w0", "wide"), ("w1", "wide"), ("w2", "wide"), ("n0", "narrow")):
        wf.add_jobs(
            api.Job("work", _id=name)
            # "&&": the node's loss signals the task's processes one by one; a shell whose sleep went first would
            # still write (and the task count as killed, rightly run again)
            .add_args("-c", f"'sleep 12 && hostname >> {done / name}'")
            .add_profiles(api.Namespace.PEGASUS, key="label", value=label)
        )
    wf.write(str(tmp_path / "wf.yml"))
    sub = tmp_path / "sub"
    site = site_file(tmp_path, pilot_command=f"{sys.executable} -m pilot")
    proc = subprocess.Popen(
        [
            *PILOT,
            "submit",
            "--site",
            site,
            "--cluster",
            "label",
            "--pilots",
            "1",
            "--poll",
            "0.5",
            "--no-monitord",
            str(tmp_path / "wf.yml"),
            "--dir",
            str(sub),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        from tests.integration.test_pilots import pilot_jobs, started

        wait_for(
            lambda: started(sub / "merge_wide") and started(sub / "work_n0"),
            180,
            "both clusters to start in the pilot job",
        )
        assert len(pilot_jobs(sub)) == 1  # one block, side by side
        subprocess.run(["scontrol", "update", "nodename=node3", "state=down", "reason=pilot-test"], check=True)
        wait_for(
            lambda: subprocess.run(
                ["squeue", "-h", "-o", "%T", "-p", "mn"], capture_output=True, text=True
            ).stdout.split()
            in ([], ["PENDING"]),
            120,
            "the pilot job to go",
        )
        subprocess.run(["scontrol", "update", "nodename=node3", "state=resume"], capture_output=True)  # if not back yet
        out, err = proc.communicate(timeout=400)
    finally:
        subprocess.run(["scontrol", "update", "nodename=node3", "state=resume"], capture_output=True)
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            subprocess.run(["scancel", "-p", "mn"], capture_output=True)  # its pilot jobs, which Slurm may requeue
    assert proc.returncode == 0, err
    st = state(sub)
    assert st["merge_wide"]["state"] == "done" and st["work_n0"]["state"] == "done"
    assert st["merge_wide"]["retries"] == 0 and st["work_n0"]["retries"] == 0
    assert all(len((done / n).read_text().split()) == 1 for n in ("w0", "w1", "w2", "n0"))  # each task once
    # the two-node cluster held two whole nodes: the one-node cluster's task ran on the third
    assert (done / "n0").read_text().strip() not in {(done / n).read_text().strip() for n in ("w0", "w1", "w2")}
    assert "on node2, node3 alone" in "".join(p.read_text() for p in (sub / "pilots").glob("*/inbox/pilot.err"))
