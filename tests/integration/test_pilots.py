"""Late binding on the local site, for real: clusters run in pilot jobs (Parsl MPIExecutor blocks through the
site's provider) that outlive them; the record is the one per-cluster mode writes; a killed driver's pilot jobs
are ended by the next one, and no finished task runs again; pilot cancel ends them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import mpiexec
from tests.integration.pegasus_tools import statistics
from tests.mpi.helpers import events
from tests.planner.wf import api
from tests.waiting import wait_for

pytestmark = [pytest.mark.mpi, pytest.mark.monitord]
PILOT = [sys.executable, "-m", "pilot"]
ROOT = Path(__file__).resolve().parents[2]


def submit(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    return subprocess.run([*PILOT, "submit", "--poll", "0.3", *args], capture_output=True, text=True, timeout=timeout)


def state(sub: Path) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads((sub / "submit.state.json").read_text())["clusters"]}


def pilot_jobs(sub: Path) -> list[Path]:
    """The pilot jobs submitted: one directory each."""
    return sorted(p for p in (sub / "pilots").iterdir() if p.is_dir()) if (sub / "pilots").is_dir() else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_every_cluster_runs_in_one_pilot_job_and_the_record_is_per_cluster_modes(tmp_path):
    diamond = str(ROOT / "examples" / "diamond.yml")
    per_cluster, late = tmp_path / "per-cluster", tmp_path / "late"
    res = submit("--site", "local", "--cluster", "label", diamond, "--dir", str(per_cluster))
    assert res.returncode == 0, res.stderr
    res = submit("--site", "local", "--cluster", "label", "--pilots", "1", diamond, "--dir", str(late))
    assert res.returncode == 0, res.stderr
    assert len(pilot_jobs(late)) == 1  # twelve clusters, one batch job
    records = state(late)
    assert all(
        c["state"] == "done" and c["attempts"] == 1 and c["job_ids"][0].startswith("pilot:") for c in records.values()
    )
    # each was fed to the pilot job's one pilot run, which answered it
    assert len(list((pilot_jobs(late)[0] / "inbox" / "done").glob("*.done"))) == len(records)
    assert json.loads((late / "pilots.json").read_text())["blocks"] == []  # ended with the run
    assert statistics(late) == statistics(per_cluster)
    assert "running in pilot job" not in res.stderr and "fed to pilot job" in res.stderr
    for name in records:  # the record of each cluster is per-cluster mode's
        assert events(late / name / "jobstate.log") == events(per_cluster / name / "jobstate.log"), name
        rescue = f"{name}.dag.rescue"
        assert sorted((late / name / rescue).read_text().splitlines()) == sorted(
            (per_cluster / name / rescue).read_text().splitlines()
        )
        assert tasks_of(late / name / f"{name}.out.000") == tasks_of(per_cluster / name / f"{name}.out.000")
        assert '"reason": "done"' in (late / name / f"{name}.dag.result").read_text()


def chain_fan_and_a_failure(tmp_path: Path) -> Path:
    """A chain of three label clusters, a fan of three, and a cluster whose job fails (and one that waits on it)."""
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation("sh", site="local", pfn="/bin/sh", is_stageable=False)
    )
    wf = api.Workflow("shapes").add_transformation_catalog(tc)

    def job(name: str, label: str, script: str = "echo ok") -> api.Job:
        return (
            api.Job("sh", _id=name)
            .add_args("-c", f"'{script}'")
            .add_profiles(api.Namespace.PEGASUS, key="label", value=label)
        )

    chain = [job(f"c{i}", f"chain{i}") for i in range(3)]
    fan = [job(f"f{i}", f"fan{i}") for i in range(3)]
    bad, after = job("bad", "bad", "echo no >&2; exit 3"), job("after", "after")
    wf.add_jobs(*chain, *fan, bad, after)
    for parent, child in zip(chain, chain[1:]):
        wf.add_dependency(parent, children=[child])
    wf.add_dependency(bad, children=[after])
    wf.write(str(tmp_path / "shapes.yml"))
    return tmp_path / "shapes.yml"


def test_a_chain_a_fan_and_a_failing_cluster_fed_to_one_pilot_job_keep_per_cluster_modes_record(tmp_path):
    wf = str(chain_fan_and_a_failure(tmp_path))
    per_cluster, late = tmp_path / "per-cluster", tmp_path / "late"
    first = submit(
        "--no-monitord", "--retry", "1", "--site", "local", "--cluster", "label", wf, "--dir", str(per_cluster)
    )
    res = submit(
        "--no-monitord",
        "--retry",
        "1",
        "--site",
        "local",
        "--cluster",
        "label",
        "--pilots",
        "1",
        wf,
        "--dir",
        str(late),
    )
    assert first.returncode == res.returncode == 1, res.stderr
    assert len(pilot_jobs(late)) == 1  # every cluster and both tries of the failing one: one batch job
    records, before = state(late), state(per_cluster)
    assert {n: c["state"] for n, c in records.items()} == {n: c["state"] for n, c in before.items()}
    bad = next(n for n in records if n.endswith("bad"))
    assert records[bad]["state"] == "failed" and records[bad]["attempts"] == before[bad]["attempts"] == 2
    assert '"reason": "failed"' in (late / bad / f"{bad}.dag.result").read_text()
    for name, c in records.items():
        if c["state"] == "done":
            assert events(late / name / "jobstate.log") == events(per_cluster / name / "jobstate.log"), name
            assert (late / name / f"{name}.dag.rescue").read_text() == (
                per_cluster / name / f"{name}.dag.rescue"
            ).read_text()
    # the failing cluster's record holds its two attempts, as its own batch jobs wrote them
    assert events(late / bad / "jobstate.log") == events(per_cluster / bad / "jobstate.log")


def tasks_of(out: Path) -> list[str]:
    """The tasks a cluster's job output has a [cluster-task] record of, and its summary's status."""
    lines = out.read_text().splitlines()
    return sorted(ln.split(",")[0] for ln in lines if ln.startswith("[cluster-task")) + [
        ln.split(",")[0] for ln in lines if ln.startswith("[cluster-summary")
    ]


def chain(tmp_path: Path, seconds: int = 6, gate: Path | None = None) -> Path:
    """a (sleep SECONDS, or until the file ``gate`` exists) -> b: two label clusters, the driver killed while a
    runs."""
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation("sh", site="local", pfn="/bin/sh", is_stageable=False)
    )
    ran = tmp_path / "ran.txt"  # outside the workflow's directory, which its cleanup removes
    wait = f"until [ -e {gate} ]; do sleep 0.1; done" if gate is not None else f"sleep {seconds}"
    a = (
        api.Job("sh", _id="a")
        .add_args("-c", f"'{wait}; echo a >> {ran}'")
        .add_profiles(api.Namespace.PEGASUS, key="label", value="first")
    )
    b = (
        api.Job("sh", _id="b")
        .add_args("-c", f"'echo b >> {ran}'")
        .add_profiles(api.Namespace.PEGASUS, key="label", value="second")
    )
    wf = api.Workflow("chain").add_jobs(a, b).add_dependency(a, children=[b]).add_transformation_catalog(tc)
    wf.write(str(tmp_path / "chain.yml"))
    return tmp_path / "chain.yml"


def started(cluster: Path) -> bool:
    log = cluster / "jobstate.log"
    return log.exists() and " EXECUTE " in log.read_text()


def start_chain(tmp_path: Path, sub: Path, seconds: int = 6, gate: Path | None = None) -> subprocess.Popen:
    """pilot submit --pilots 1 of the chain on the local site, in a session of its own."""
    return subprocess.Popen(
        [
            *PILOT,
            "submit",
            "--poll",
            "0.3",
            "--no-monitord",
            "--site",
            "local",
            "--cluster",
            "label",
            "--pilots",
            "1",
            str(chain(tmp_path, seconds, gate)),
            "--dir",
            str(sub),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def test_a_killed_drivers_pilot_job_is_ended_by_the_next_driver_and_nothing_runs_twice(tmp_path):
    sub = tmp_path / "sub"
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    gate = tmp_path / "gate"  # a runs until it exists: the killed driver's attempt of a can never finish
    proc = start_chain(tmp_path, sub, gate=gate)
    try:
        first = wait_for(lambda: started(sub / "sh_a"), 120, "the first cluster to start in a block")
        blocks = json.loads((sub / "pilots.json").read_text())["blocks"]
        assert len(blocks) == 1
        os.kill(proc.pid, signal.SIGKILL)  # the driver alone: its pilot job and interchange live on
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    block_pid, interchange = int(blocks[0]["job_id"]), int(blocks[0]["interchange_pid"])
    assert alive(block_pid) and alive(interchange) and first
    again = subprocess.Popen(
        [*PILOT, "submit", "--poll", "0.3", "--no-monitord", "--pilots", "1", str(sub)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(lambda: not alive(block_pid) and not alive(interchange), 120, "the next driver to end the pilot job")
        gate.touch()  # only now may a finish: in the next driver's pilot job
        _, err = again.communicate(timeout=300)
    finally:
        if again.poll() is None:
            os.killpg(again.pid, signal.SIGKILL)
    assert again.returncode == 0, err
    text = (tmp_path / "ran.txt").read_text()
    assert text.count("b") == 1 and text.count("a") == 1  # the killed attempt never finished a; it ran once after
    assert state(sub)["sh_a"]["attempts"] == 2  # the first attempt ended with its pilot job, then a second ran
    assert len(pilot_jobs(sub)) == 2


def test_pilot_cancel_ends_the_pilot_jobs(tmp_path):
    sub = tmp_path / "sub"
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    proc = start_chain(tmp_path, sub, 300)  # a runs until cancelled, however slow the machine is to get there
    try:
        wait_for(lambda: started(sub / "sh_a"), 120, "the first cluster to start in a block")
        block_pid = int(json.loads((sub / "pilots.json").read_text())["blocks"][0]["job_id"])
        shown = wait_for(
            lambda: [
                ln
                for ln in subprocess.run(
                    [*PILOT, "status", str(sub)], capture_output=True, text=True
                ).stdout.splitlines()
                if ln.startswith("sh_a ") and "running" in ln
            ],
            60,
            "pilot status to show sh_a running",
        )
        assert f"(in pilot job {block_pid})" in shown[0]  # the pilot job it runs in
        res = subprocess.run([*PILOT, "cancel", str(sub)], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    wait_for(lambda: not alive(block_pid), 30, "the pilot job to end")
    assert json.loads((sub / "pilots.json").read_text())["blocks"] == []
    assert state(sub)["sh_a"]["state"] == "cancelled"


VENV_PILOT = f"pilot_command={sys.executable} -m pilot"


@pytest.mark.slurm
def test_on_slurm_clusters_run_in_one_pilot_job_and_a_cancelled_one_costs_only_its_cluster(tmp_path):
    """The real single-node Slurm: the diamond in one sbatch job; then a chain whose pilot job is scancelled while
    its first cluster runs: that cluster resumes in a new pilot job, nothing else is lost, nothing runs twice."""
    from tests.integration.slurm import require_slurm

    require_slurm()
    sub = tmp_path / "diamond"
    res = submit(
        "--site",
        "container",
        "--set",
        VENV_PILOT,
        "--set",
        "pegasus_site=local",
        "--cluster",
        "label",
        "--pilots",
        "1",
        str(ROOT / "examples" / "diamond.yml"),
        "--dir",
        str(sub),
    )
    assert res.returncode == 0, res.stderr
    assert len(pilot_jobs(sub)) == 1 and all(c["state"] == "done" for c in state(sub).values())
    sub = tmp_path / "chain"
    proc = subprocess.Popen(
        [
            *PILOT,
            "submit",
            "--poll",
            "0.3",
            "--no-monitord",
            "--site",
            "container",
            "--set",
            VENV_PILOT,
            "--set",
            "pegasus_site=local",
            "--cluster",
            "label",
            "--pilots",
            "1",
            str(chain(tmp_path)),
            "--dir",
            str(sub),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(lambda: started(sub / "sh_a"), 180, "the first cluster to start in a pilot job")
        job = json.loads((sub / "pilots.json").read_text())["blocks"][0]["job_id"]
        subprocess.run(["scancel", job], check=True)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert f"pilot job {job} ended with 1 cluster(s) in it" in err
    records = state(sub)
    assert records["sh_a"]["attempts"] == 2 and records["sh_a"]["retries"] == 0  # resumed, never a --retry
    assert records["sh_b"]["attempts"] == 1 and len(pilot_jobs(sub)) == 2
    assert (tmp_path / "ran.txt").read_text().count("b") == 1
    queue = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split()
    assert not set(queue) & {b["job_id"] for b in json.loads((sub / "pilots.json").read_text())["blocks"]}


@pytest.mark.parametrize("site", ["local", pytest.param("container", marks=pytest.mark.slurm)])
def test_a_cluster_longer_than_a_pilot_job_resumes_in_fresh_ones_and_no_task_runs_twice(tmp_path, site):
    """Pilot jobs of one minute, a cluster of three 20 s tasks in a chain: its pilot run gets the block's time
    left as --max-wall-time, stops there, and resumes from its rescue log in a fresh block (the spent one ends).
    On the real Slurm the block's batch job has that time limit: the cluster stops before Slurm ends it."""
    if site == "container":
        from tests.integration.slurm import require_slurm

        require_slurm()
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation("sh", site="local", pfn="/bin/sh", is_stageable=False)
    )
    wf = api.Workflow("long").add_transformation_catalog(tc)
    ran = tmp_path / "ran.txt"
    jobs = [
        api.Job("sh", _id=f"s{i}")
        .add_args("-c", f"'sleep 20 && echo s{i} >> {ran}'")  # a killed sleep writes nothing
        .add_profiles(api.Namespace.PEGASUS, key="label", value="long")
        for i in range(3)
    ]
    wf.add_jobs(*jobs).add_dependency(jobs[0], children=[jobs[1]]).add_dependency(jobs[1], children=[jobs[2]])
    wf.write(str(tmp_path / "long.yml"))
    sub = tmp_path / "sub"
    keys = ["--set", VENV_PILOT, "--set", "pegasus_site=local"] if site == "container" else []
    res = submit(
        "--no-monitord",
        "--site",
        site,
        *keys,
        "--cluster",
        "label",
        "--pilots",
        "1",
        "--pilot-walltime",
        "00:01:00",
        "--pilot-idle",
        "5",
        str(tmp_path / "long.yml"),
        "--dir",
        str(sub),
        timeout=400,
    )
    assert res.returncode == 0, res.stderr
    c = state(sub)["merge_long"]
    assert c["state"] == "done" and c["attempts"] >= 2 and c["retries"] == 0 and c["resubmits"] == c["attempts"] - 1
    assert sorted(ran.read_text().split()) == ["s0", "s1", "s2"]  # each once: DONE tasks never ran again
    assert len(pilot_jobs(sub)) == c["attempts"]  # each attempt in a block of its own, with its whole time


@pytest.mark.slurm
def test_on_slurm_small_clusters_share_the_nodes_of_a_pilot_job(tmp_path):
    """Four clusters of two ranks in one pilot job whose node has eight cores (cores_per_node): they run at once
    there, on the workers of its one pilot run, where one cluster a node would run them one by one."""
    from tests.integration.slurm import require_slurm

    require_slurm()
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation("sh", site="local", pfn="/bin/sh", is_stageable=False)
    )
    spans = tmp_path / "spans.txt"  # outside the workflow's directory, which its cleanup removes
    jobs = [
        api.Job("sh", _id=f"t{i}")
        .add_args("-c", f"'s=$(date +%s.%N); sleep 6; echo $s $(date +%s.%N) >> {spans}'")
        .add_profiles(api.Namespace.PEGASUS, key="label", value=f"L{i}")
        for i in range(4)
    ]
    wf = api.Workflow("fan").add_jobs(*jobs).add_transformation_catalog(tc)
    wf.write(str(tmp_path / "fan.yml"))
    sub = tmp_path / "sub"
    res = submit(
        "--site",
        "container",
        "--set",
        VENV_PILOT,
        "--set",
        "pegasus_site=local",
        "--set",
        "cores_per_node=8",
        "--cluster",
        "label",
        "--pilots",
        "1",
        "--no-monitord",
        str(tmp_path / "fan.yml"),
        "--dir",
        str(sub),
        timeout=400,
    )
    assert res.returncode == 0, res.stderr
    assert len(pilot_jobs(sub)) == 1 and all(c["state"] == "done" for c in state(sub).values())
    times = [tuple(map(float, line.split())) for line in spans.read_text().splitlines()]
    assert len(times) == 4
    at_once = max(sum(1 for s, e in times if s <= t < e) for t, _ in times)
    assert at_once >= 3, times  # one at a time without sharing


def slurm_site(tmp_path: Path, name: str, *lines: str) -> str:
    """A copy of the container site (the real single-node Slurm) as ``<name>.yaml``, with ``lines`` added."""
    path = tmp_path / f"{name}.yaml"
    path.write_text((ROOT / "site_configs" / "container.yaml").read_text() + "".join(f"{line}\n" for line in lines))
    return str(path)


@pytest.mark.slurm
def test_on_slurm_a_cluster_whose_pilot_job_never_starts_at_one_site_is_withdrawn_and_runs_at_the_other(tmp_path):
    """Two sites on the real Slurm: "held"'s pilot jobs ask to begin in an hour, so they pend; past its
    pending_limit the first cluster, which waits there, is withdrawn to "ok" (one line), runs there, and "held"'s
    pilot job is scancelled; the clusters after it go to "ok" first, as nothing of the run runs at "held"."""
    from tests.integration.slurm import require_slurm, wait_gone

    require_slurm()
    held = slurm_site(tmp_path, "held", "pending_limit: 10", "scheduler_options:", '  - "#SBATCH --begin=now+1hour"')
    ok = slurm_site(tmp_path, "ok")
    sub = tmp_path / "sub"
    res = submit(
        "--no-monitord",
        "--site",
        f"{held},{ok}",
        "--set",
        VENV_PILOT,
        "--set",
        "pegasus_site=local",
        "--cluster",
        "label",
        "--pilots",
        "1",
        str(chain(tmp_path, 1)),
        "--dir",
        str(sub),
        timeout=400,
    )
    assert res.returncode == 0, res.stderr
    records = state(sub)
    assert len(records) == 4  # create_dir, a, b, cleanup
    first = records.pop("create_dir_chain_0_local")
    assert first["state"] == "done" and first["site"] == "ok" and first["withdrawn_from"] == "held", first
    assert first["attempts"] == 2, first
    assert all(
        c["state"] == "done" and c["site"] == "ok" and c.get("withdrawn_from") is None and c["attempts"] == 1
        for c in records.values()
    ), records
    said = [line for line in res.stderr.splitlines() if "withdrawn" in line]
    assert len(said) == 1, res.stderr  # the first cluster, once
    assert "the pilot job it waits for pending on held for" in said[0] and "bound to ok" in said[0]
    cancelled = [
        line.split("pilot job ")[1].split()[0]
        for line in res.stderr.splitlines()
        if "no cluster waits for it there any more: cancelled" in line
    ]
    assert len(cancelled) == 1, res.stderr  # held's pilot job, once the first cluster left
    wait_gone(cancelled, timeout=60)
    assert (tmp_path / "ran.txt").read_text().split() == ["a", "b"]
    assert json.loads((sub / "pilots.json").read_text())["blocks"] == []
