"""Point-to-point message passing for the pilot, with or without MPI.

``MpiTransport`` wraps mpi4py, imported only when one is built: importing
mpi4py initialises MPI, which must not happen in ``pilot plan`` on a login
node. MPICH spins in blocking receives, so receiving polls with ``improbe``
and an adaptive back-off: a short spin (a reply usually arrives within
microseconds), then sleeps doubling up to ``max_sleep`` (1 ms by default).
An idle rank costs a few percent of a CPU, not a whole one.

Ranks on the same host ring each other's ``Doorbell`` after a send, and
the back-off sleeps wait on it instead of sleeping blind: between ranks of
one host a message is seen within microseconds and a waiting rank uses no
CPU. A ring is a system call on each side, so a sender that knows the
receiver is not waiting for this message (a worker busy with a task, a
master that will collect a result with the next ones) sends with
``ring=False``; the receiver's back-off polling still finds the message.
A caller that expects a message from another host within a few
milliseconds (the master while short tasks run) may ask for a ``hot`` wait:
it polls without sleeping for that long, yielding the CPU between polls; with
every rank on one host there is nothing to gain from that, and it is skipped.

``InProcTransport`` connects a master to simulated workers in one process:
sending to a simulated rank calls that worker's handler synchronously, and
whatever it sends back is queued for the master. Engine, slot matching and master
logic are tested and benchmarked through it without MPI.
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from pilot.runtime.doorbell import Doorbell, host_identity
from pilot.runtime.mpistart import network_env, start_env
from pilot.runtime.protocol import Message, from_wire, to_wire

if TYPE_CHECKING:  # annotations only: mpi4py is imported when a run starts MPI
    from mpi4py import MPI

SPIN_SECONDS = 50e-6
MIN_SLEEP = 20e-6
MAX_SLEEP = 1e-3
LOCAL_MAX_SLEEP = 0.02


class Transport(Protocol):
    rank: int
    size: int

    def send(self, dest: int, msg: Message, ring: bool = True) -> None:
        """Send ``msg``; ``ring`` False: the receiver need not be woken for it (see the module docstring)."""
        ...

    def recv(
        self,
        timeout: float | None = None,
        wake: Callable[[], bool] | None = None,
        patience: float = 0.0,
        hot: float = 0.0,
    ) -> tuple[int, Message] | None:
        """Next message as (source, message); None after ``timeout`` s or when ``wake()`` is true.

        ``patience``: the caller can wait that long for a message without loss,
        so an empty poll may sleep that long at once. ``hot``: a message is
        expected within about that many seconds; poll without sleeping meanwhile.
        """
        ...


class MpiTransport:
    """mpi4py COMM_WORLD with polling receives."""

    def __init__(self, sleep_on_recv: bool = True, max_sleep: float = MAX_SLEEP) -> None:
        added = start_env(os.environ)
        os.environ.update(added)
        self.started_mpi = False  # True: MPI is this transport's to end (see end())
        try:
            import mpi4py  # noqa: PLC0415 - deliberately lazy (see module docstring)

            # MPI starts below, once the library is known: its network may depend on it.
            mpi4py.rc.initialize = False
            mpi4py.rc.finalize = True  # at exit, as when mpi4py starts MPI itself
            from mpi4py import MPI  # noqa: PLC0415 - after mpi4py.rc is set, which must precede it

            if not MPI.Is_initialized():  # a program that embeds the pilot may have started MPI itself
                network = network_env(MPI.Get_library_version(), os.environ)
                os.environ.update(network)
                added |= network
                MPI.Init_thread()  # mpi4py's own default level, as at import
                self.started_mpi = True
        finally:
            for name in added:
                os.environ.pop(name, None)
        self._mpi = MPI
        self._status = MPI.Status()  # one for every probe: each is read before the next probe
        self.comm = MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.sleep_on_recv = sleep_on_recv
        self.max_sleep = max_sleep
        self._pending: collections.deque[tuple[int, Message]] = collections.deque()
        self.doorbell: Doorbell | None = None
        self._all_local = False
        if sleep_on_recv and self.size > 1:
            try:
                bell = Doorbell()
                entry = (host_identity(), bell.address)
            except OSError:  # no UNIX sockets here: poll as before
                bell, entry = None, ("", b"")
            table = self.comm.allgather(entry)  # every rank takes part, with a doorbell or not
            if bell is not None:
                bell.introduce(table, self.rank)
                self.doorbell = bell
                self._all_local = bell.serves_all(self.size)
                if self._all_local:
                    # Every peer rings: polling only guards against a lost ring, so an
                    # idle rank may sleep much longer and leave the CPU to tasks.
                    self.max_sleep = max(max_sleep, LOCAL_MAX_SLEEP)

    def end(self) -> None:
        """MPI_Finalize, where this transport started MPI (a program that embeds the pilot ends its own)."""
        if self.started_mpi and not self._mpi.Is_finalized():
            self._mpi.Finalize()

    def send(self, dest: int, msg: Message, ring: bool = True) -> None:
        """Send without ever blocking on the peer.

        A blocking send of a message above the MPI library's eager limit waits
        for the receiver to post a receive; if the receiver is itself blocked
        sending to us (a worker returning forwarded data while the master
        prefetches it a task), both wait forever. So: isend, and while it is
        not complete keep receiving, queueing what arrives for recv().
        """
        tag, fields = to_wire(msg)  # a plain tuple, its kind as the tag: see pilot.runtime.protocol
        req = self.comm.isend(fields, dest=dest, tag=tag)
        if ring and self.doorbell is not None:
            self.doorbell.ring(dest)
        if req.Test():
            return
        mpi = self._mpi
        status = self._status
        pause = MIN_SLEEP
        while not req.Test():
            message = self.comm.improbe(source=mpi.ANY_SOURCE, status=status)
            if message is not None:
                self._pending.append((status.Get_source(), _decode(status, message)))
                continue
            self._sleep(pause)
            pause = min(pause * 2, self.max_sleep)

    def _sleep(self, seconds: float) -> None:
        """Sleep, or less when a rank of this host rings."""
        if self.doorbell is not None:
            self.doorbell.wait(seconds)
        else:
            time.sleep(seconds)

    def poll(self) -> tuple[int, Message] | None:
        """One non-blocking check."""
        if self._pending:
            return self._pending.popleft()
        status = self._status
        message = self.comm.improbe(source=self._mpi.ANY_SOURCE, status=status)
        if message is None:
            return None
        return status.Get_source(), _decode(status, message)

    def recv(
        self,
        timeout: float | None = None,
        wake: Callable[[], bool] | None = None,
        patience: float = 0.0,
        hot: float = 0.0,
    ) -> tuple[int, Message] | None:
        got = self.poll()
        if got is not None or (timeout is not None and timeout <= 0):
            return got  # a look without waiting (a worker between its task's events) is that one poll
        now = time.monotonic
        start = now()
        deadline = None if timeout is None else start + timeout
        comm = self.comm
        mpi = self._mpi
        status = self._status
        if hot > 0 and not patience and not self._all_local:
            got = self._hot_poll(start + (hot if timeout is None else min(hot, timeout)), wake)
            if got is not None or (wake is not None and wake()):
                return got
        # A caller with patience sleeps that long at once instead of spinning.
        spin_until = start if patience else start + SPIN_SECONDS
        pause = max(MIN_SLEEP, patience)
        while True:
            message = comm.improbe(source=mpi.ANY_SOURCE, status=status)
            if message is not None:
                return status.Get_source(), _decode(status, message)
            if wake is not None and wake():
                return None
            t = now()
            if deadline is not None and t >= deadline:
                return None
            if self.sleep_on_recv and t >= spin_until:
                nap = pause if deadline is None else max(0.0, min(pause, deadline - t))
                if patience:
                    # The caller chose to take what arrives in one batch after this
                    # nap: a ring must not cut it short (each wakeup costs the tasks).
                    time.sleep(nap)
                    patience = 0.0
                elif self.doorbell is not None and self.doorbell.wait(nap):
                    pause = MIN_SLEEP  # rung: the message is there, or about to be
                    continue
                elif self.doorbell is None:
                    time.sleep(nap)
                pause = min(pause * 2, self.max_sleep)

    def _hot_poll(self, until: float, wake: Callable[[], bool] | None) -> tuple[int, Message] | None:
        """Poll without sleeping until ``until`` (monotonic), yielding the CPU between polls."""
        comm = self.comm
        status = self._status
        any_source = self._mpi.ANY_SOURCE
        now = time.monotonic
        yield_cpu = os.sched_yield
        polls = 0
        while True:
            message = comm.improbe(source=any_source, status=status)
            if message is not None:
                return status.Get_source(), _decode(status, message)
            polls += 1
            if polls & 63 == 0:
                if now() >= until or (wake is not None and wake()):
                    return None
            yield_cpu()


def _decode(status: MPI.Status, message: MPI.Message) -> Message:
    """The message ``improbe`` matched, received and rebuilt as the class its tag names."""
    return from_wire(status.Get_tag(), message.recv())


class SimulatedWorker(Protocol):
    def handle(self, msg: Message, reply: Callable[[Message], None]) -> None: ...


# The longest an in-process wait with patience sleeps: long enough to hand the interpreter to another thread.
SIM_NAP = 1e-4


class InProcTransport:
    """The master's end of an in-process pilot with simulated workers (ranks 1..n)."""

    def __init__(self, workers: list[SimulatedWorker], on_idle: Callable[[float | None], None] | None = None) -> None:
        self.rank = 0
        self.size = len(workers) + 1
        self.workers = workers
        self.inbox: collections.deque[tuple[int, Message]] = collections.deque()
        # Called when the master waits on an empty inbox: a simulation
        # advances its clock here and delivers what finished.
        self.on_idle = on_idle

    def deliver(self, source: int, msg: Message) -> None:
        """Queue a message for the master as if ``source`` had sent it."""
        self.inbox.append((source, msg))

    def send(self, dest: int, msg: Message, ring: bool = True) -> None:  # noqa: ARG002 - nobody sleeps here
        def reply(answer: Message) -> None:
            self.inbox.append((dest, answer))

        self.workers[dest - 1].handle(msg, reply)

    def recv(
        self,
        timeout: float | None = None,
        wake: Callable[[], bool] | None = None,
        patience: float = 0.0,
        hot: float = 0.0,  # noqa: ARG002 - the transport interface's signature; a local inbox never waits
    ) -> tuple[int, Message] | None:
        if self.inbox:
            return self.inbox.popleft()
        if patience:
            # A nap, as MPI's would, but short (simulated time does not pass while it sleeps): the caller may
            # wait for one of its own threads (an agent's opening of a fed DAG's files), which a return at once,
            # called again and again, would starve of the interpreter.
            time.sleep(min(patience, SIM_NAP))
        if self.on_idle is not None:
            self.on_idle(timeout)
            if self.inbox:
                return self.inbox.popleft()
        if timeout is None and (wake is None or not wake()):
            raise RuntimeError("in-process pilot deadlocked: the master waits but no simulated worker will reply")
        return None
