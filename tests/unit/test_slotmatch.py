from pilot.dag import parse_dag
from pilot.runtime.slotmatch import Matcher


def dag(text):
    return parse_dag(text.splitlines(True), "t.dag")


def drain(policy):
    out = []
    while (pick := policy.assign()) is not None:
        out.append((pick[0].name, pick[1].rank))
    return out


def test_priority_then_fifo():
    d = dag("TASK a x\nTASK b -p 5 x\nTASK c x\nTASK d -p 5 x\nTASK e -p -1 x\n")
    p = Matcher()
    for rank in range(1, 6):
        p.add_slot(rank, "h", 8, 1000)
    for t in d:
        p.push(t)
    assert [name for name, _ in drain(p)] == ["b", "d", "a", "c", "e"]


def test_backfill_when_best_does_not_fit_now():
    d = dag("TASK big -p 10 -c 2 x\nTASK small -p 1 x\n")
    p = Matcher()
    p.add_slot(1, "h", 2, 1000)
    p.add_slot(2, "h", 2, 1000)
    first = dag("TASK running x\n")["running"]
    p.push(first)
    (_, alloc) = p.assign()  # one CPU in use: big (2 CPUs) cannot start now
    for t in d:
        p.push(t)
    assert [n for n, _ in drain(p)] == ["small"]
    p.release(alloc)


def test_workers_on_a_host_share_memory_and_cpus():
    d = dag("".join(f"TASK t{i} -m 600 x\n" for i in range(4)))
    p = Matcher()
    for rank in (1, 2, 3):
        p.add_slot(rank, "h", 4, 1000)
    for t in d:
        p.push(t)
    got = drain(p)
    assert len(got) == 1  # 2 x 600 MB > 1000 MB
    assert p.ready_count == 3


def test_memory_hungry_tasks_use_other_hosts():
    d = dag("TASK a -m 800 x\nTASK b -m 800 x\n")
    p = Matcher()
    p.add_slot(1, "h1", 4, 1000)
    p.add_slot(2, "h1", 4, 1000)
    p.add_slot(3, "h2", 4, 1000)
    for t in d:
        p.push(t)
    got = drain(p)
    assert sorted(r for _, r in got) in ([1, 3], [2, 3])


def test_gpus_scheduled_like_cpus_with_ids():
    d = dag("TASK a -g 2 x\nTASK b -g 1 x\nTASK c -g 1 x\n")
    p = Matcher()
    for rank in (1, 2, 3):
        p.add_slot(rank, "h", 8, 1000, ("0", "1", "2"))
    for t in d:
        p.push(t)
    picks = []
    while (pick := p.assign()) is not None:
        picks.append(pick)
    assert [t.name for t, _ in picks] == ["a", "b"]
    assert picks[0][1].gpu_ids == ("0", "1") and picks[1][1].gpu_ids == ("2",)
    p.release(picks[0][1])
    t, alloc = p.assign()
    assert t.name == "c" and alloc.gpu_ids == ("0",)


def test_infeasible_is_reported_with_the_request():
    d = dag("TASK ok -c 4 x\nTASK huge -c 16 -m 5 x\n")
    p = Matcher()
    p.add_slot(1, "h1", 4, 1000)
    p.add_slot(2, "h2", 8, 100)
    assert p.infeasible(d["ok"]) is None
    why = p.infeasible(d["huge"])
    assert "it requests 16 CPU(s), 5 MB memory" in why and "h2: 8 CPUs" in why


def test_pick_within_an_allocation():
    d = dag("TASK run -c 2 x\nTASK big -c 3 -p 9 x\nTASK fits -c 2 x\n")
    p = Matcher()
    p.add_slot(1, "h", 4, 1000)
    p.push(d["run"])
    _, alloc = p.assign()
    p.push(d["fits"])
    assert p.pick_within(alloc).name == "fits"
    assert p.pick_within(alloc) is None


def test_prefetch_never_passes_over_a_higher_priority_task():
    """Narrow work queued behind a running task would keep a wider, more urgent task waiting."""
    d = dag("TASK run -c 2 x\nTASK big -c 3 -p 9 x\nTASK fits -c 2 x\n")
    p = Matcher()
    p.add_slot(1, "h", 4, 1000)
    p.push(d["run"])
    _, alloc = p.assign()
    p.push(d["big"])
    p.push(d["fits"])
    assert p.pick_within(alloc) is None


def test_multi_cpu_tasks_get_aligned_cpu_numbers():
    d = dag("TASK one x\nTASK two -c 2 x\nTASK four -c 4 x\nTASK pair -c 2 x\n")
    p = Matcher()
    for rank in (1, 2, 3):
        p.add_slot(rank, "h", 8, 1000, cores=4, sockets=2)  # 2 threads per core, 4 per socket
    p.push(d["one"])
    one = p.assign()[1]
    p.push(d["two"])
    two = p.assign()[1]
    p.push(d["four"])
    four = p.assign()[1]
    assert one.cpu_ids == () and two.cpu_ids == (0, 1) and four.cpu_ids == (4, 5, 6, 7)
    p.release(two)
    p.push(d["pair"])
    assert p.assign()[1].cpu_ids == (0, 1)


def test_assign_cost_does_not_grow_with_workers():
    """With uniform tasks a match looks at one host, however many there are."""
    d = dag("".join(f"TASK t{i} x\n" for i in range(20)))
    p = Matcher()
    for h in range(1000):
        for s in range(4):
            p.add_slot(h * 4 + s + 1, f"h{h}", 4, 1000)
    for t in d:
        p.push(t)
    calls = 0
    original = p.hosts["h0"].__class__.fits

    def counting(self, *a):
        nonlocal calls
        calls += 1
        return original(self, *a)

    p.hosts["h0"].__class__.fits = counting
    try:
        drain(p)
    finally:
        p.hosts["h0"].__class__.fits = original
    assert calls == 20


def test_a_dag_holding_hosts_whole_runs_there_alone_and_the_others_elsewhere():
    """Fed DAGs of one pilot run share its hosts, except those a DAG of several nodes holds: its tasks start
    there only (on one where another's task still runs, once it drained), and the others' never, until it lets
    them go."""
    shared = Matcher()
    for rank, host in enumerate(["h0", "h1", "h1", "h2", "h2"], start=1):
        shared.add_slot(rank, host, 2, 1000)
    held: set[str] = set()
    draining = {"h2"}
    wide = shared.sharing(frozenset({"h1", "h2"}), draining)
    narrow = shared.sharing(barred=held)
    held |= {"h1", "h2"}
    for t in dag("".join(f"TASK w{i} x\n" for i in range(6))):
        wide.push(t)
    for t in dag("".join(f"TASK n{i} x\n" for i in range(6))):
        narrow.push(t)
    got = drain(narrow)
    assert [shared.host_of[rank].name for _, rank in got] == ["h0"]  # not on the held hosts, though they are idle
    allocs = []
    while (pick := wide.assign()) is not None:
        allocs.append(pick[1])
    assert sorted(a.host.name for a in allocs) == ["h1", "h1"]  # h2 not yet, though idle
    draining.discard("h2")
    while (pick := wide.assign()) is not None:
        allocs.append(pick[1])
    assert sorted(a.host.name for a in allocs) == ["h1", "h1", "h2", "h2"]
    assert wide.infeasible(dag("TASK big -c 3 x\n")["big"]) is not None  # no host of its own has 3 CPUs
    assert narrow.infeasible(dag("TASK one x\n")["one"]) is None  # a held host is held for a while only
    held -= {"h1", "h2"}
    for alloc in allocs:
        shared.release(alloc)
    assert {shared.host_of[rank].name for _, rank in drain(narrow)} == {"h1", "h2"}  # let go: the others' again
