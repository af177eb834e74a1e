"""Late binding's decisions, with the block engine faked (pilot.submit.blocks): how many pilot jobs, which one a
cluster starts in, when one ends, what a lost one does to its clusters, and the record a restart ends. The real
engine (Parsl's MPIExecutor) runs in tests/integration/test_pilots.py."""

from __future__ import annotations

import dataclasses
import json
from concurrent.futures import Future
from pathlib import Path

import pytest

from pilot.contracts.clusters import ClusterKind, ClusterSpec
from pilot.contracts.queue import QueueState, QueueStatus
from pilot.errors import ConfigError
from pilot.jobrequest import request_for
from pilot.sites import load_site
from pilot.submit import backoff, blocks, launches, pilots
from pilot.submit.backend import JobRef
from pilot.submit.options import Options


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Engine:
    """Stands for Parsl: blocks start at once (or fail), apps are futures the test ends."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.started: list[blocks.Block] = []
        self.ended: list[str] = []
        self.fail_next = 0
        self.agents: list[Future] = []

    def start_block(self, site, label, nodes, walltime_minutes, run_dir, apps=0):
        if self.fail_next:
            self.fail_next -= 1
            raise RuntimeError("sbatch: error: Batch job submission failed")
        block = blocks.Block(
            label,
            site.name,
            nodes,
            walltime_minutes * 60,
            blocks.node_slots(site),
            executor=object(),
            job_id=str(100 + len(self.started)),
            idle_since=self.clock(),
            script_dir=str(Path(run_dir) / label),
        )
        block.max_apps = apps  # type: ignore[attr-defined]  # a stand-in block records what it is given
        self.started.append(block)
        return block

    def launch(self, block, job_id, where, per_node, args):
        future: Future = Future()
        future.args = args  # type: ignore[attr-defined]  # a stand-in future records what it is given
        future.where = where  # type: ignore[attr-defined]  # a stand-in future records what it is given
        block.take(job_id, where, per_node)
        return future

    def launch_agent(self, block, launcher, host_flag, pilot):
        future: Future = Future()
        future.args = (launcher, host_flag, pilot)  # type: ignore[attr-defined]  # a stand-in future records what it is given
        self.agents.append(future)
        return future

    def end_block(self, block):
        self.ended.append(block.job_id)
        block.executor = None


class Queue:
    """The scheduler's view of the blocks: running unless the test says it ended."""

    def __init__(self) -> None:
        self.gone: set[str] = set()
        self.cancelled: list[str] = []
        self.asked: list[list[str]] = []  # the job ids of each queue query

    def query(self, site, job_ids):
        self.asked.append(list(job_ids))
        return {j: QueueStatus(QueueState.FINISHED if j in self.gone else QueueState.RUNNING) for j in job_ids}

    def cancel(self, site, refs: list[JobRef]):
        self.cancelled += [r.job_id for r in refs]
        self.gone |= {r.job_id for r in refs if r.job_id}
        return [r.job_id for r in refs]

    def submit(self, site, req, job_name):
        raise AssertionError("pilot jobs only")

    def find(self, site, workdir, job_name):
        return ""

    def found_by_name(self, site, cluster):
        return True  # a per-cluster batch job


@pytest.fixture
def env(tmp_path, monkeypatch):
    clock, queue = Clock(), Queue()
    engine = Engine(clock)
    monkeypatch.setattr(blocks, "start_block", engine.start_block)
    monkeypatch.setattr(blocks, "launch", engine.launch)
    monkeypatch.setattr(blocks, "end_block", engine.end_block)
    monkeypatch.setattr(blocks, "launch_agent", engine.launch_agent)
    monkeypatch.setattr(blocks, "connected", lambda block: True)
    return tmp_path, clock, queue, engine


def spec(root: Path, name: str, ranks: int = 2, critical_path: float | None = None) -> ClusterSpec:
    (root / name).mkdir(exist_ok=True)
    return ClusterSpec(
        name,
        ClusterKind.LABEL,
        str(root / name),
        str(root / name / f"{name}.dag"),
        1,
        ranks,
        (),
        critical_path=critical_path,
    )


def backend(env, specs, site=None, **opts) -> tuple[pilots.PilotBackend, object]:
    root, clock, queue, _ = env
    site = site or load_site("local", {"nodes": "4", "ranks_per_node": "2"})
    fed = opts.pop("fed", False)  # each cluster an MPI run of its own in its block, unless the test feeds them
    options = Options(pilots=opts.pop("pilots", 2), **opts)
    return pilots.PilotBackend(str(root), [site], specs, options, queue, clock=clock, fed=fed), site


def submit(b, site, s: ClusterSpec, n: int = 1) -> str:
    req = request_for(site, s.name, s.dir, ["--max-wall-time", "55", f"{s.name}.dag"], ranks=s.ranks)
    return b.submit(site, req, f"pilot-x-{s.name}-{n}").job_id


def states(b, site, ids):
    """Two polls, as the driver makes them: blocks submitted at the first are running at the second."""
    b.query(site, ids)
    return {j: s.state for j, s in b.query(site, ids).items()}


def test_a_cluster_fed_to_a_pilot_job_is_not_found_by_name_one_of_another_site_is(env):
    """The driver records a cluster before submitting it only where a restart must find it by name."""
    root = env[0]
    specs = [spec(root, "c0")]
    b, site = backend(env, specs)
    other = load_site("local", {"nodes": "1"})
    other = dataclasses.replace(other, name="elsewhere")
    assert b.found_by_name(site, "c0") is False
    assert b.found_by_name(other, "c0") is True  # no pilot jobs there: a batch job per cluster


def test_blocks_are_added_while_clusters_wait_never_more_than_asked_and_each_cluster_starts_in_one(env):
    root, clock, queue, engine = env
    specs = [spec(root, f"c{i}") for i in range(5)]
    b, site = backend(env, specs, pilots=2, pilot_nodes=1)
    ids = [submit(b, site, s) for s in specs]
    got = states(b, site, ids)
    assert len(engine.started) == 2  # five 1-node clusters wait, two pilot jobs at most
    assert list(got.values()).count(QueueState.PENDING) == 5
    placed = [b.launches[j] for j in ids if b.launches[j].block is not None]
    assert len(placed) == 2 and {p.block.job_id for p in placed} == {"100", "101"}
    # its pilot run gets the block's wall time left, less the batch job's margin, as --max-wall-time
    argv = placed[0].future.args[4]
    assert argv[argv.index("run") + 1 : argv.index("run") + 3] == ["--max-wall-time", "55"]
    placed[0].future.set_result(0)
    got = states(b, site, ids)
    assert got[placed[0].job_id] is QueueState.FINISHED and len(engine.started) == 2
    assert sum(1 for j in ids[2:] if b.launches.get(j) and b.launches[j].block is not None) == 1  # the freed node


def test_a_cluster_starts_where_its_makespan_fits_and_a_new_block_comes_for_it(env):
    root, clock, queue, engine = env
    short, long = spec(root, "short"), spec(root, "long", critical_path=3000.0)
    b, site = backend(env, [short, long], pilots=2, pilot_nodes=1, pilot_walltime="01:00:00")
    first = submit(b, site, short)
    states(b, site, [first])
    clock.now += 1800  # half the first block's hour is gone
    b.launches[first].future.set_result(0)
    states(b, site, [first])
    later = submit(b, site, long)
    states(b, site, [later])
    assert len(engine.started) == 2 and b.launches[later].block.job_id == "101"  # not the half-spent one


def test_an_idle_block_ends_after_its_timeout_and_min_blocks_stay(env):
    root, clock, queue, engine = env
    s = spec(root, "c")
    b, site = backend(env, [s], pilots=2, pilot_nodes=1, pilot_idle=60, pilot_min=1)
    job = submit(b, site, s)
    states(b, site, [job])
    b.launches[job].future.set_result(0)
    states(b, site, [job])
    clock.now += 61
    b.query(site, [])
    assert engine.ended == [] and len(b.blocks) == 1  # the one kept
    b2, _ = backend(env, [s], pilots=2, pilot_nodes=1, pilot_idle=60)
    job = submit(b2, site, s, 2)
    states(b2, site, [job])
    b2.launches[job].future.set_result(0)
    states(b2, site, [job])
    clock.now += 30
    b2.query(site, [])
    assert len(b2.blocks) == 1
    clock.now += 31
    b2.query(site, [])
    assert b2.blocks == [] and json.loads((root / "pilots.json").read_text())["blocks"] == []


def test_a_lost_block_finishes_its_clusters_for_the_driver_to_resume_and_another_comes(env):
    root, clock, queue, engine = env
    s = spec(root, "c")
    b, site = backend(env, [s], pilots=1, pilot_nodes=1)
    job = submit(b, site, s)
    states(b, site, [job])
    queue.gone.add("100")  # scancel, a node down, its wall time
    assert states(b, site, [job])[job] is QueueState.FINISHED
    again = submit(b, site, s, 2)
    states(b, site, [again])
    assert [x.job_id for x in engine.started] == ["100", "101"] and b.launches[again].block.job_id == "101"


def test_pilot_jobs_that_cannot_be_submitted_fail_the_waiting_clusters_after_back_off(env):
    root, clock, queue, engine = env
    s = spec(root, "c")
    b, site = backend(env, [s], pilots=1)
    engine.fail_next = 99
    job = submit(b, site, s)
    status = b.query(site, [job])[job]
    assert status.state is QueueState.PENDING and not status.never_starts
    for _ in range(backoff.TRIES):
        clock.now += 301  # past the longest back-off
        status = b.query(site, [job])[job]
    assert status.never_starts and "Batch job submission failed" in status.reason


def test_a_pilot_job_that_never_starts_is_ended_and_fails_the_clusters_waiting_for_one(env, monkeypatch):
    root, clock, queue, engine = env
    s = spec(root, "c")
    b, site = backend(env, [s], pilots=1)
    job = submit(b, site, s)
    never = QueueStatus(QueueState.PENDING, "PartitionTimeLimit", True, "a walltime longer than the partition allows")
    monkeypatch.setattr(queue, "query", lambda site, ids: {j: never for j in ids})
    monkeypatch.setattr(blocks, "connected", lambda block: False)
    assert b.query(site, [job])[job].state is QueueState.PENDING  # its pilot job submitted, in the queue
    status = b.query(site, [job])[job]
    assert status.never_starts and "pilot job 100 never starts: PartitionTimeLimit: a walltime longer" in status.reason
    assert engine.ended == ["100"] and b.blocks == []
    b.query(site, [job])
    assert [x.job_id for x in engine.started] == ["100"]  # no other one asks for the same in vain


def test_a_restart_ends_the_blocks_the_last_driver_recorded(env):
    root, clock, queue, engine = env
    s = spec(root, "c")
    b, site = backend(env, [s], pilots=1)
    states(b, site, [submit(b, site, s)])
    recorded = json.loads((root / "pilots.json").read_text())["blocks"]
    assert [r["job_id"] for r in recorded] == ["100"]
    fresh, _ = backend(env, [s], pilots=1)  # a new driver: the old one was killed
    assert fresh.end_recorded() == ["100"] and queue.cancelled == ["100"]
    assert json.loads((root / "pilots.json").read_text())["blocks"] == []
    assert fresh.query(site, ["pilot:pilot-x-c-1"])["pilot:pilot-x-c-1"].state is QueueState.FINISHED


def test_bad_sizes_are_one_line_before_anything_is_submitted(env):
    root = env[0]
    with pytest.raises(ConfigError, match=r"pilot jobs of 8 nodes: the site has 4 \(nodes\)"):
        backend(env, [spec(root, "c")], pilot_nodes=8)
    with pytest.raises(ConfigError, match=r"cluster wide needs 3 nodes \(6 ranks\), pilot jobs on local have 1"):
        backend(env, [spec(root, "wide", ranks=6)], pilot_nodes=1)
    with pytest.raises(ConfigError, match=r"3 pilot jobs kept .* but at most 2 at once"):
        backend(env, [spec(root, "c")], pilots=2, pilot_min=3)
    with pytest.raises(ConfigError, match=r"launcher 'mpirun': pilot jobs start clusters with srun or mpiexec"):
        backend(env, [spec(root, "c")], site=load_site("local", {"launcher": "mpirun"}))


def test_a_cluster_its_block_ran_out_on_resumes_in_another_which_replaces_it_when_none_is_left(env):
    from pilot.contracts.result import RunOutcome, RunResult, result_path, write_result

    root, clock, queue, engine = env
    s = spec(root, "c")
    b, site = backend(env, [s], pilots=1, pilot_nodes=1)
    job = submit(b, site, s)
    states(b, site, [job])
    write_result(
        result_path(s.dag), RunResult(RunOutcome.WALLTIME, 3, 1, ["t2", "t3"], 0)
    )  # pilot run's --max-wall-time came
    b.launches[job].future.set_result(0)
    assert states(b, site, [job])[job] is QueueState.FINISHED
    again = submit(b, site, s, 2)
    states(b, site, [again])  # the spent block ends, then a fresh one comes
    b.query(site, [again])
    # not back into the block that cut it: that one (idle, of no use) ends, and a fresh one takes the cluster
    assert engine.ended == ["100"] and b.launches[again].block.job_id == "101"


def test_clusters_smaller_than_a_node_share_it_and_whole_node_ones_get_free_nodes(env):
    """A node of 8 cores runs four clusters of 2 ranks at once (Parsl alone would give each a whole node); a
    two-node cluster of 8 ranks a node waits for two nodes with nothing on them."""
    root, clock, queue, engine = env
    site = load_site("local", {"nodes": "2", "cores_per_node": "8", "ranks_per_node": "8"})
    small = [spec(root, f"s{i}") for i in range(5)]
    wide = spec(root, "wide", ranks=16)
    b, _ = backend(env, [*small, wide], site=site, pilots=1, pilot_nodes=2)
    ids = [submit(b, site, s) for s in small]
    states(b, site, ids)
    assert len(engine.started) == 1 and engine.started[0].max_apps == 2 * (8 // 2)  # the pool's workers
    block = engine.started[0]
    placed = [b.launches[j] for j in ids if b.launches[j].block is not None]
    assert len(placed) == 5 and sorted(p.future.where for p in placed) == [(0,)] * 4 + [(1,)]
    assert block.used == [8, 2] and block.free_slots == 6
    whole = submit(b, site, wide)
    states(b, site, [whole])
    assert b.launches[whole].block is None  # node 1 holds a small cluster
    next(p for p in placed if p.future.where == (1,)).future.set_result(0)
    states(b, site, [*ids, whole])
    assert b.launches[whole].block is None  # node 0 is still full
    for p in placed:
        if not p.future.done():
            p.future.set_result(0)
    states(b, site, [*ids, whole])
    assert b.launches[whole].future.where == (0, 1) and block.used == [8, 8]


def test_fit_packs_the_fullest_node_first_and_give_frees_only_what_was_taken():
    block = blocks.Block("b", "s", 3, 600.0, slots=4)
    block.take("a", (1,), 3)
    assert block.fit(1, 1) == (1,)  # the fullest node with room
    assert block.fit(1, 2) in {(0,), (2,)} and block.fit(3, 2) is None and block.fit(2, 4) == (0, 2)
    block.give("a")
    block.give("never-placed")
    assert block.used == [0, 0, 0] and block.apps == {}


def test_a_block_asks_its_scheduler_for_every_slot_and_names_its_hosts_for_the_app(tmp_path, monkeypatch):
    from pilot.submit import blockapp

    site = load_site("local", {"nodes": "4", "cores_per_node": "8", "ranks_per_node": "2"})
    req = blocks.block_request(site, 2, blocks.node_slots(site), 30, str(tmp_path))
    assert (req.nodes, req.ranks_per_node, req.walltime_minutes) == (2, 8, 30)
    slurm = load_site("container", {})
    lines = blocks.node_lines(slurm, str(tmp_path), 1, 3)
    assert "unset SLURM_NODELIST" in lines and lines[-1].startswith("export PBS_NODEFILE=")
    lines = blocks.node_lines(site, str(tmp_path), 2, 8)
    assert (tmp_path / "hosts").read_text() == "localhost\nlocalhost\n"
    (tmp_path / "hosts").write_text("n1\nn2\nn3\n")
    monkeypatch.setenv("PILOT_BLOCK_HOSTS", str(tmp_path / "hosts"))
    monkeypatch.setenv("PILOT_SLURM_NODELIST", "n[1-3]")
    assert blockapp.hosts_of([0, 2]) == "n1,n3"
    assert blockapp.launch_env()["SLURM_NODELIST"] == "n[1-3]" and "PILOT_SLURM_NODELIST" not in blockapp.launch_env()
    assert blockapp.host_words("--nodelist", "n1", shared=True) == ["--nodes=1", "--nodelist=n1", "--exact"]
    assert blockapp.host_words("-hosts", "n1,n3", shared=True) == ["-hosts", "n1,n3"]


def test_fed_clusters_share_one_pilot_run_per_block_through_its_inbox(env):
    from pilot.contracts import inbox

    root, clock, queue, engine = env
    specs = [spec(root, f"c{i}") for i in range(3)]
    b, site = backend(env, specs, pilots=1, pilot_nodes=1, fed=True)
    ids = [submit(b, site, s) for s in specs]
    got = states(b, site, ids)
    assert len(engine.started) == 1 and len(engine.agents) == 1  # one pilot job, one pilot run in it
    launcher, _, pilot = engine.agents[0].args
    block = engine.started[0]
    assert pilot[pilot.index("run") + 1 : pilot.index("run") + 3] == ["--inbox", block.inbox]
    assert pilot[pilot.index("run") + 3 :] == ["--max-wall-time", "55"]  # no -o, tries...: those are each cluster's
    from pilot.submit import feed

    assert feed.worker_args(
        [
            "--max-wall-time",
            "5",
            "--jobstate-log",
            "--invocation-records",
            "-o",
            "c.out",
            "-t",
            "2",
            "--host-cpus",
            "4",
            "--monitord-hack",
        ]
    ) == ["--invocation-records", "--host-cpus", "4", "--per-task-stdio"]
    # a worker's own: containers started once and task directories; the DAG's task files stay the cluster's
    assert feed.worker_args(
        ["--containers", "once", "--task-files", "c.dag.taskfiles", "--local-scratch", "/l", "--keep-task-dirs"]
    ) == ["--containers", "once", "--local-scratch", "/l", "--keep-task-dirs"]
    assert launcher[launcher.index("-n") + 1] == "2"  # every slot of the block (its node runs 2 ranks)
    assert set(got.values()) == {QueueState.PENDING}  # fed: each request waits for the run to take it
    requests = sorted(p.name for p in Path(block.inbox).glob("*.request"))
    assert len(requests) == 3  # three clusters of 2 ranks on a node of 2 slots: all fed at once
    first = inbox.look(block.inbox).requests[0]
    assert first.args[:2] == ["--max-wall-time", "55"] and first.dag.endswith(".dag")
    assert first.out and first.out.endswith(".block.out")
    assert set(states(b, site, ids).values()) == {QueueState.RUNNING}  # taken
    inbox.write_done(block.inbox, feed_id(b, ids[0]), 0)
    got = states(b, site, ids)
    assert got[ids[0]] is QueueState.FINISHED and got[ids[1]] is QueueState.RUNNING
    b.cancel(site, [JobRef(ids[1], "", "")])
    assert (Path(block.inbox) / (feed_id(b, ids[1], gone=True) + ".cancel")).exists()
    engine.agents[0].set_exception(RuntimeError("worker pool lost"))  # the pilot run died: its clusters resume
    assert states(b, site, ids[2:])[ids[2]] is QueueState.FINISHED
    assert engine.ended == ["100"]


def test_stopping_the_driver_tells_each_pilot_run_to_stop(env):
    root, clock, queue, engine = env
    s = spec(root, "c")
    b, site = backend(env, [s], pilots=1, pilot_nodes=1, fed=True)
    job = submit(b, site, s)
    states(b, site, [job])
    inbox_dir = Path(engine.started[0].inbox)
    b.shutdown()
    assert (inbox_dir / "stop").exists() and engine.ended == ["100"]


def feed_id(b, job_id: str, gone: bool = False) -> str:
    from pilot.submit import feed

    return feed.request_id(launches.Launch(job_id, "", "", "", 1, 1, [], [], [], 0.0))


def test_a_fed_cluster_of_several_nodes_holds_whole_nodes_and_one_node_ones_share_the_rest(env):
    """Fed, a cluster of two nodes goes to a block with two nodes no other cluster holds, and names them in its
    request (its tasks run there alone); clusters of one node share what is left, and one more of two nodes waits
    until the first ends: it would leave them nothing."""
    from pilot.contracts import inbox
    from pilot.submit import feed

    root, clock, queue, engine = env
    site = load_site("local", {"nodes": "3", "ranks_per_node": "2"})
    narrow = [spec(root, f"n{i}") for i in range(2)]
    wide = [spec(root, f"w{i}", ranks=4) for i in range(2)]
    b, _ = backend(env, [*narrow, *wide], site=site, pilots=1, pilot_nodes=3, fed=True)
    first = submit(b, site, narrow[0])
    states(b, site, [first])
    block = engine.started[0]
    Path(block.script_dir, "hosts").write_text("node1\nnode2\nnode3\n")  # what the block's script writes there
    ids = [submit(b, site, s) for s in (wide[0], narrow[1], wide[1])]
    states(b, site, ids)
    requests = {r.id: r for r in inbox.look(block.inbox).requests}
    assert requests[feed_id(b, ids[0])].hosts == ["node2", "node3"] and block.used == [0, 2, 2]
    assert requests[feed_id(b, first)].hosts is None and requests[feed_id(b, ids[1])].hosts is None
    assert b.launches[ids[2]].block is None  # a second two-node cluster: one node is left, and it is shared
    inbox.write_done(block.inbox, feed_id(b, ids[0]), 0)
    states(b, site, ids)
    assert b.launches[ids[2]].block is block and block.used == [0, 2, 2]
    assert feed.room(block, 1, 2) == () and feed.room(block, 2, 2) is None
    Path(block.script_dir, "hosts").write_text("localhost\nlocalhost\nlocalhost\n")
    assert feed.hosts_at(block, (1, 2)) is None  # one machine's "nodes": no host can be held by name


def test_of_the_clusters_fed_in_one_pass_those_of_several_nodes_go_first(env):
    """A cluster of one node fed before one of two would have its task started on a node the other then holds
    whole, which waits for it: fed in one pass, the clusters of several nodes come first (the run takes requests
    in the order written), and the rest in the order they came."""
    from pilot.contracts import inbox

    root, clock, queue, engine = env
    site = load_site("local", {"nodes": "3", "ranks_per_node": "2"})
    specs = [spec(root, "n0"), spec(root, "w0", ranks=4), spec(root, "n1"), spec(root, "w1", ranks=2)]
    b, _ = backend(env, specs, site=site, pilots=1, pilot_nodes=3, fed=True)
    ids = [submit(b, site, s) for s in specs]
    states(b, site, ids)
    block = engine.started[0]
    assert [r.id for r in inbox.look(block.inbox).requests] == [feed_id(b, ids[i]) for i in (1, 0, 2, 3)]


def test_a_pilot_run_that_dies_at_start_is_replaced_after_a_longer_wait_each_time(env, caplog):
    """A pilot job whose pilot run ends before its workers are up (no ``up`` in its inbox) is replaced after 1, 2,
    4 ... s (one line each); after backoff.TRIES in a row the clusters waiting fail, saying why. One that got up
    and ended later is replaced at once."""
    from pilot.contracts import inbox

    root, clock, queue, engine = env
    s = spec(root, "c")
    b, site = backend(env, [s], pilots=1, pilot_nodes=1, fed=True)
    job = submit(b, site, s)
    caplog.set_level("WARNING", "pilot.submit")
    waits = []
    for n in range(backoff.TRIES):
        states(b, site, [job])
        assert len(engine.started) == n + 1 and len(engine.agents) == n + 1
        engine.agents[-1].set_result(127)  # the launcher found no pilot command
        status = b.query(site, [job])[job]
        assert status.state is QueueState.PENDING and engine.ended[-1] == engine.started[-1].job_id
        line = [r.getMessage() for r in caplog.records][-1]
        assert "died at start (exit status 127)" in line
        waits.append(float(line.split("the next pilot job in ")[1].split()[0]))
        b.query(site, [job])
        assert len(engine.started) == n + 1  # not before its wait is over
        clock.now += waits[-1]
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0] and len(caplog.records) == backoff.TRIES
    assert status.never_starts and "no pilot run started (5 tries): pilot job 104: exit status 127" in status.reason
    b2, _ = backend(env, [s], pilots=1, pilot_nodes=1, fed=True)
    job = submit(b2, site, s)
    states(b2, site, [job])
    inbox.write_up(engine.started[-1].inbox)
    engine.agents[-1].set_result(0)
    b2.query(site, [job])
    assert len(engine.started) == backoff.TRIES + 2  # it was up: replaced at once


def test_one_queue_query_per_poll_asks_about_the_batch_jobs_and_the_pilot_jobs(env):
    root, clock, queue, engine = env
    specs = [spec(root, f"c{i}") for i in range(3)]
    b, site = backend(env, specs, pilots=2, pilot_nodes=1, fed=True)
    ids = [submit(b, site, s) for s in specs]
    states(b, site, ids)
    queue.asked.clear()
    got = b.query(site, [*ids, "4242"])  # an earlier attempt's own batch job among them
    assert queue.asked == [["4242", "100", "101"]]
    assert set(got) == {*ids, "4242"} and got["4242"].state is QueueState.RUNNING


def test_a_pilot_job_carries_its_sites_scheduler_options_as_a_clusters_job_does():
    from providers import provider_for

    site = load_site("container", {})
    site = dataclasses.replace(site, scheduler_options=["#SBATCH --begin=now+1hour", "#SBATCH --constraint=big"])
    provider = provider_for(site)
    blocks.add_site_directives(provider, site)
    lines = provider.scheduler_options.splitlines()
    assert "#SBATCH --partition=debug" in lines  # Parsl's own, kept
    assert lines[-2:] == ["#SBATCH --begin=now+1hour", "#SBATCH --constraint=big"]
    local = provider_for(load_site("local", {}))
    blocks.add_site_directives(local, dataclasses.replace(load_site("local", {}), scheduler_options=[]))
    assert not hasattr(local, "scheduler_options")


def test_whole_nodes_are_distinct_hosts_on_both_sides_of_the_inbox(tmp_path):
    """A cluster of N nodes holds N distinct hosts, or shares: the driver names no hosts where two of the block's
    names are one host (its full and short name), and the pilot run holds only hosts it can tell apart."""
    from pilot.runtime.slotmatch import whole_hosts
    from pilot.submit import feed

    block = blocks.Block("b", "s", 3, 600.0, 2, script_dir=str(tmp_path))
    (tmp_path / "hosts").write_text("nid1.hsn\nnid2.hsn\nnid3.hsn\n")
    assert feed.hosts_at(block, (1, 2)) == ["nid2.hsn", "nid3.hsn"]
    (tmp_path / "hosts").write_text("nid1\nnid1.hsn\nnid3\n")
    assert feed.hosts_at(block, (0, 1)) is None
    workers = {"nid1": 0, "nid2": 0, "nid3": 0}
    assert whole_hosts(["nid2.hsn", "nid3.hsn"], workers) == {"nid2", "nid3"}  # the scheduler's full names
    assert whole_hosts(["nid2", "nid2.hsn"], workers) is None  # two names, one host: not two whole nodes
    assert whole_hosts(["nid2", "nid4"], workers) is None  # a host no worker is on
    assert whole_hosts(["n1.a", "n1.b"], {"n1.a": 0, "n1.b": 0}) == {"n1.a", "n1.b"}  # full names tell them apart
    assert whole_hosts(["n1"], {"n1.a": 0, "n1.b": 0}) is None  # which of the two: cannot be told
