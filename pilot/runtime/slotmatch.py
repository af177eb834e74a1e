"""Resource-aware matching of ready tasks to idle worker slots: which task runs where, at run time (the planner's
choice of cluster for each data job is pilot.planner.dataclusters).

Each worker rank is a slot on a host; slots on one host share its CPUs,
memory and GPUs. A ready task runs on an idle slot of a host that has its
requested resources free. The policy answers "this pair now", "nothing fits
yet" (None: wait for a release) or, before the run, "this can never fit"
(``infeasible``), the way Flux splits wait from fail.

Order: highest priority first; equal priorities in DAG order (FIFO). PMC pops
equal priorities from a heap in arbitrary order; FIFO is deliberate and
documented. When the DAG gives tasks a runtime (``#pilot runtime=<s>``),
equal priorities go longest runtime first instead (``order_by_runtime``), DAG
order among equal runtimes, and tasks without a runtime after those with one:
starting the long tasks first keeps the tail of a level short.

Time left (``assign(left=...)``): under a wall-time limit, a ready task whose
runtime is longer than the time left is not started; since the time left only
shrinks, it is set aside (``held``) for the rest of the run, to be run by the
resubmitted job. A task without a runtime, or one longer than the whole limit
(``full``: no later job could finish it either), is never held.

Backfill: a task that does not fit now is passed over for a lower-priority
one that does, but not forever: once the most urgent ready task
has been passed over as many times as there are slots, one host that could
run it is reserved for it; lower-priority work no longer starts there, and it
runs as soon as that host has room. Bounded backfill keeps a wide task from
starving behind a stream of narrow ones.

Cost: ready tasks are kept in one heap per resource signature (cpus, memory,
gpus), each entry one int that sorts as the task should (``PLACE_BITS``): a
million ready tasks cost the master a million ints, not a million tuples,
and the heap compares ints. Matching looks at the head of each signature only, and hosts are kept
in an insertion-ordered index of hosts that have an idle slot and a free CPU,
so with uniform tasks a match costs O(1) whatever the number of workers.

CPU numbers: a task asking for more than one CPU is also given CPU numbers
of its host, as PMC does: a contiguous range aligned to a socket or a core
when it needs that many, or none when the free CPUs are too fragmented. The
worker puts them in PMC_AFFINITY and, with --set-affinity, binds the task.
One-CPU tasks float, which keeps fragmentation down.

Host and Allocation are plain slotted classes, not dataclasses: the master
imports this module at start, and the dataclasses module costs some 10 ms.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Collection, Iterable

from pilot.dag.model import Task


class Host:
    """One host's resources, what is free of them, and its workers (``slots``; ``idle`` ones first in line)."""

    __slots__ = (
        "name",
        "cpus",
        "memory",
        "gpu_ids",
        "free_cpus",
        "free_memory",
        "free_gpus",
        "slots",
        "idle",
        "cores",
        "sockets",
        "cpu_taken",
    )

    def __init__(
        self, name: str, cpus: int, memory: int, gpu_ids: tuple[str, ...], cores: int = 0, sockets: int = 0
    ) -> None:
        """A host with all of its resources free and no worker yet."""
        self.name = name
        self.cpus = cpus
        self.memory = memory
        self.gpu_ids = gpu_ids
        self.cores = cores
        self.sockets = sockets
        self.free_cpus = cpus
        self.free_memory = memory
        self.free_gpus = list(gpu_ids)
        self.slots: list[int] = []
        self.idle: list[int] = []
        self.cpu_taken = bytearray(cpus)

    def bind(self, cpus: int) -> tuple[int, ...]:
        """CPU numbers for a task of ``cpus`` CPUs (PMC's aligned first fit); () if fragmented."""
        threads = len(self.cpu_taken)
        cores = self.cores if 0 < self.cores <= threads else threads
        sockets = self.sockets if 0 < self.sockets <= cores else 1
        per_core = max(1, threads // cores)
        per_socket = max(1, threads // sockets)
        step = per_socket if cpus >= per_socket else per_core if cpus >= per_core else 1
        taken = self.cpu_taken
        for first in range(0, threads - cpus + 1, step):
            if not any(taken[first : first + cpus]):
                taken[first : first + cpus] = b"\1" * cpus
                return tuple(range(first, first + cpus))
        return ()

    def unbind(self, ids: tuple[int, ...]) -> None:
        for i in ids:
            self.cpu_taken[i] = 0

    def fits(self, cpus: int, memory: int, gpus: int) -> bool:
        return self.free_cpus >= cpus and self.free_memory >= memory and len(self.free_gpus) >= gpus

    def could_fit(self, cpus: int, memory: int, gpus: int) -> bool:
        return self.cpus >= cpus and self.memory >= memory and len(self.gpu_ids) >= gpus


class Allocation:
    """Resources held by one busy slot; a prefetched task reuses them when its predecessor ends."""

    __slots__ = ("rank", "host", "cpus", "memory", "gpu_ids", "cpu_ids")

    def __init__(
        self, rank: int, host: Host, cpus: int, memory: int, gpu_ids: tuple[str, ...], cpu_ids: tuple[int, ...] = ()
    ) -> None:
        self.rank = rank
        self.host = host
        self.cpus = cpus
        self.memory = memory
        self.gpu_ids = gpu_ids
        self.cpu_ids = cpu_ids


Signature = tuple[int, int, int]

# A ready queue's entry: minus the task's priority above PLACE_BITS, its place among equal priorities below
# (its DAG order, or its place by runtime). An entry is also the task's rank: smaller runs first.
PLACE_BITS = 32
PLACE_MASK = (1 << PLACE_BITS) - 1


class Matcher:
    """The resource pool (hosts, their slots and free resources) and the ready queue, matched by the rules above.

    Named for what it does: it holds state and answers assign/release; the
    policy is the rules in this module's docstring.
    """

    def __init__(self) -> None:
        self.hosts: dict[str, Host] = {}
        self.host_of: dict[int, Host] = {}
        self._queues: dict[Signature, list[int]] = {}  # entries (see PLACE_BITS), one heap per signature
        self._at: list[Task | None] = []  # the task of each place an entry names
        self._available: dict[str, Host] = {}  # hosts with an idle slot and a free CPU
        self.ready_count = 0
        self._passed: int | None = None  # rank of the head task being passed over
        self._passes = 0
        self._reserved: Host | None = None  # kept for that task once it was passed over too often
        self._tiebreak: array[int] | None = None  # per task order: its place among equal priorities
        self.full: float = float("inf")  # seconds a whole run gets: a longer task is never held
        self.held: list[Task] = []  # ready tasks too long for the time left: for the next run
        # A fed DAG given whole hosts runs on those alone (``only``); the others start nothing on them (``barred``,
        # the agent's one set of such hosts, which changes as those DAGs come and go). A DAG holding hosts is
        # barred from those where another DAG's task still runs (the agent's set of them): it starts there once
        # they drained, not beside them.
        self.only: frozenset[str] | None = None
        self.barred: set[str] | frozenset[str] = frozenset()

    def order_by_runtime(self, tasks: list[Task]) -> bool:
        """Equal priorities longest runtime first (see the module doc); False when no task has a runtime."""
        if not any(t.runtime is not None for t in tasks):
            return False
        ranked = sorted(tasks, key=lambda t: (t.runtime is None, -(t.runtime or 0.0), t.order))
        tiebreak = array("q", bytes(8 * len(tasks)))
        for place, task in enumerate(ranked):
            tiebreak[task.order] = place
        self._tiebreak = tiebreak
        return True

    def sharing(self, only: frozenset[str] | None = None, barred: set[str] | None = None) -> Matcher:
        """A ready queue of its own over these hosts, their slots and free resources (shared, not copied): each DAG
        of a run that holds several (``pilot.runtime.dagrun``) orders its own tasks, and all take the same slots;
        ``only``: the hosts it runs on alone, ``barred``: the hosts it may not use now (see ``only``/``barred``)."""
        other = Matcher()
        other.hosts, other.host_of, other._available = self.hosts, self.host_of, self._available
        other.only = only
        other.barred = frozenset() if barred is None else barred
        return other

    def usable(self, host: Host) -> bool:
        """Whether this queue's tasks may start on ``host`` now (its own hosts, once no other DAG's task runs there;
        or any another DAG does not hold)."""
        return host.name not in self.barred and (self.only is None or host.name in self.only)

    # -- hosts and slots ------------------------------------------------------
    def add_slot(
        self,
        rank: int,
        hostname: str,
        cpus: int,
        memory: int,
        gpu_ids: tuple[str, ...] = (),
        cores: int = 0,
        sockets: int = 0,
    ) -> Host:
        """Register a worker; the first worker of a host defines its resources."""
        host = self.hosts.get(hostname)
        if host is None:
            host = Host(hostname, cpus, memory, tuple(gpu_ids), cores, sockets)
            self.hosts[hostname] = host
        host.slots.append(rank)
        host.idle.append(rank)
        self.host_of[rank] = host
        self._refresh(host)
        return host

    def _refresh(self, host: Host) -> None:
        if host.idle and host.free_cpus > 0:
            self._available.setdefault(host.name, host)
        else:
            self._available.pop(host.name, None)

    def infeasible(self, task: Task) -> str | None:
        """Why ``task`` can never run on these hosts, or None if some host could run it."""
        # Its own hosts only; a barred host is held for a while, not for ever.
        if any(
            h.could_fit(task.cpus, task.memory, task.gpus)
            for h in self.hosts.values()
            if self.only is None or h.name in self.only
        ):
            return None
        return (
            f"it requests {task.cpus} CPU(s), {task.memory} MB memory and {task.gpus} GPU(s), "
            f"but no host has that much ({self.describe_hosts()}); lower the request or use "
            f"--host-cpus/--host-memory/--host-gpus"
        )

    def describe_hosts(self) -> str:
        parts = [
            f"{h.name}: {h.cpus} CPUs, {h.memory} MB, {len(h.gpu_ids)} GPUs" for h in list(self.hosts.values())[:4]
        ]
        if len(self.hosts) > 4:
            parts.append(f"... {len(self.hosts) - 4} more")
        return "; ".join(parts)

    # -- the ready queue ------------------------------------------------------
    def reserve(self, tasks: int) -> None:
        """Room for the places of ``tasks`` tasks, made once rather than grown as tasks become ready."""
        if tasks > len(self._at):
            self._at.extend([None] * (tasks - len(self._at)))

    def push(self, task: Task) -> None:
        spec = task.spec
        key = spec.key
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = []
        tiebreak = self._tiebreak
        place = task.order if tiebreak is None else tiebreak[task.order]
        at = self._at
        if place >= len(at):
            at.extend([None] * max(place + 1 - len(at), len(at)))
        at[place] = task
        # At priority 0 the entry is the place itself: in the usual DAG, the task's own order, no new int.
        heapq.heappush(queue, (-spec.priority << PLACE_BITS) + place if spec.priority else place)
        self.ready_count += 1

    def _pop(self, queue: list[int]) -> Task:
        task = self._at[heapq.heappop(queue) & PLACE_MASK]
        assert task is not None
        self.ready_count -= 1
        return task

    def _head(self, queue: list[int]) -> Task:
        task = self._at[queue[0] & PLACE_MASK]
        assert task is not None
        return task

    def too_long(self, task: Task, left: float) -> bool:
        """Whether ``task`` should wait for a run with more time than ``left`` seconds."""
        runtime = task.runtime
        return runtime is not None and left < runtime <= self.full

    def _hold(self, queue: list[int], left: float) -> None:
        """Set aside the heads of ``queue`` that cannot finish in the time left."""
        while queue and self.too_long(self._head(queue), left):
            self.held.append(self._pop(queue))

    def assign(self, left: float | None = None) -> tuple[Task, Allocation] | None:
        """Best-priority ready task that fits an idle slot now, with its allocation.

        ``left``: seconds until the wall-time limit (None: no limit); tasks
        that cannot finish in it are held (see the module doc).
        """
        if not self._available or not self.ready_count:
            return None
        best: tuple[int, Signature, Host] | None = None
        top: tuple[int, Signature] | None = None
        for key, queue in self._queues.items():
            if left is not None and queue:
                self._hold(queue, left)
            if queue and (top is None or queue[0] < top[0]):
                top = (queue[0], key)
        if self._passed is not None and (top is None or top[0] != self._passed):
            self._passed, self._passes, self._reserved = None, 0, None  # it left, or a more urgent task came
        for key, queue in self._queues.items():
            if not queue:
                continue
            rank = queue[0]
            if best is not None and rank >= best[0]:
                continue
            host = self._find_host(key, rank)
            if host is not None:
                best = (rank, key, host)
        if best is None:
            return None
        rank, key, host = best
        if top is not None and top[0] != rank:
            self._pass_over(top[0], top[1])
        elif self._passed == rank:
            self._passed, self._passes, self._reserved = None, 0, None  # its turn came
        task = self._pop(self._queues[key])
        return task, self._allocate(host, task)

    def _pass_over(self, rank: int, key: Signature) -> None:
        """The most urgent task was passed over once more; reserve a host for it when that happened too often."""
        if self._passed != rank:
            self._passed, self._passes, self._reserved = rank, 0, None
        self._passes += 1
        if self._reserved is None and self._passes >= len(self.host_of):
            cpus, memory, gpus = key
            fitting = [h for h in self.hosts.values() if h.could_fit(cpus, memory, gpus)]
            if fitting:
                self._reserved = max(fitting, key=lambda h: (h.free_cpus, h.free_memory))

    def pick_within(self, alloc: Allocation, left: float | None = None) -> Task | None:
        """Best ready task that fits inside an existing allocation (for prefetching onto a busy slot).

        None when a ready task of higher priority does not fit there: queued
        behind a running task, narrower work would hold the slot's resources
        until every narrow task has run, and the wider one would starve.
        None too when the best one could not finish in ``left`` seconds (the
        time left once the slot's queue has run): it stays ready, for a slot
        that is free sooner or for the next run.
        """
        if not self.ready_count:
            return None
        best: tuple[int, Signature] | None = None
        top: int | None = None  # the most urgent entry ready
        gpus = len(alloc.gpu_ids)
        for key, queue in self._queues.items():
            if not queue:
                continue
            rank = queue[0]
            if top is None or rank < top:
                top = rank
            if key[0] <= alloc.cpus and key[1] <= alloc.memory and key[2] <= gpus:
                if best is None or rank < best[0]:
                    best = (rank, key)
        if best is None or best[0] >> PLACE_BITS > top >> PLACE_BITS:  # type: ignore[operator]  # top is set whenever best is (the same queues)
            return None  # a task of higher priority is ready and does not fit here
        queue = self._queues[best[1]]
        if left is not None and self.too_long(self._head(queue), left):
            return None
        return self._pop(queue)

    def has_idle_slot(self, more_than: int = 0) -> bool:
        """Whether more than ``more_than`` slots on hosts with a free CPU are idle."""
        count = 0
        for host in self._available.values():
            count += len(host.idle)
            if count > more_than:
                return True
        return False

    def fits_now(self, task: Task) -> bool:
        """Whether some idle slot could take ``task`` right now."""
        return self._find_host(task.spec.key) is not None

    def _find_host(self, key: Signature, rank: int | None = None) -> Host | None:
        cpus, memory, gpus = key
        reserved = self._reserved
        if reserved is not None and (rank is None or self._passed is None or rank <= self._passed):
            reserved = None  # the reserved task itself, or an even more urgent one
        # A task asking for no CPU (-c 0, as PMC allows) also fits a host whose CPUs are all taken.
        hosts: Iterable[Host] = self._available.values() if cpus else (h for h in self.hosts.values() if h.idle)
        if self.only is not None or self.barred:  # a fed DAG's (the single-DAG run's hot path skips the test)
            hosts = [h for h in hosts if self.usable(h)]
        for host in hosts:
            if host is not reserved and host.fits(cpus, memory, gpus):
                return host
        return None

    def _allocate(self, host: Host, task: Task) -> Allocation:
        rank = host.idle.pop()
        cpus, memory, gpus = task.spec.key
        host.free_cpus -= cpus
        host.free_memory -= memory
        gpu_ids: tuple[str, ...] = ()
        if gpus:
            gpu_ids = tuple(host.free_gpus[:gpus])
            del host.free_gpus[:gpus]
        cpu_ids = host.bind(cpus) if cpus > 1 else ()
        self._refresh(host)
        return Allocation(rank, host, cpus, memory, gpu_ids, cpu_ids)

    def release(self, alloc: Allocation) -> None:
        host = alloc.host
        host.free_cpus += alloc.cpus
        host.free_memory += alloc.memory
        host.free_gpus.extend(alloc.gpu_ids)
        if alloc.cpu_ids:
            host.unbind(alloc.cpu_ids)
        host.idle.append(alloc.rank)
        self._refresh(host)

    @property
    def total_cpus(self) -> int:
        return sum(h.cpus for h in self.hosts.values())


def whole_hosts(asked: list[str], ours: Collection[str]) -> frozenset[str] | None:
    """The workers' host names of the ``asked`` hosts a fed DAG holds whole, one distinct host each (the
    scheduler may name a host by its full name, a worker by its short one); None when a name is none of ours, or
    two names are one host: its nodes are whole only as distinct hosts, so then it shares them all (its nodes
    are the pilot job's, so only a renamed host can do that)."""
    by_short: dict[str, list[str]] = {}
    for name in ours:
        by_short.setdefault(name.split(".", 1)[0], []).append(name)
    got: list[str] = []
    for name in asked:
        same = [name] if name in ours else by_short.get(name.split(".", 1)[0], [])
        if len(same) != 1:
            return None  # not ours, or which of two of ours it is cannot be told
        got.append(same[0])
    return frozenset(got) if len(set(got)) == len(got) else None
