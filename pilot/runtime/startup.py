"""The master's start-up: registration, the feasibility check, host scripts.

Kept apart from the run loop: it happens once, before any task, and each step
either completes or aborts the run with one clear reason.
"""

from __future__ import annotations

import logging
import os
import time

from pilot.dag.model import Dag
from pilot.errors import InfeasibleTask, RunAborted
from pilot.runtime.engine import Engine, State
from pilot.runtime.options import RunOptions
from pilot.runtime.protocol import PROTOCOL_VERSION, Hello, HostReady, HostSetup, Message, WorkerFailed
from pilot.runtime.slotmatch import Matcher
from pilot.runtime.timeleft import Limits
from pilot.runtime.transport import Transport

log = logging.getLogger("pilot.master")

REGISTER_TIMEOUT = 300.0


def dag_key(dag: str) -> str:
    """The DAG's part of its task processes' marks (see ``reaper``): the same for every run of one DAG
    file, on every node. Its absolute path itself, with ``%`` and the marks' separator ``:``
    percent-encoded: unlike a hash, two DAGs never share a key, and no rank loads a hash library
    (OpenSSL) at start. Made here, on the master, and handed to the workers in HostSetup.
    """
    return os.path.realpath(dag).replace("%", "%25").replace(":", "%3A")


class Startup:
    def __init__(
        self, opts: RunOptions, transport: Transport, matcher: Matcher, limits: Limits, run_id: str = ""
    ) -> None:
        self.run_id = run_id
        self.dag_key = dag_key(opts.dag)
        self.opts = opts
        self.t = transport
        self.matcher = matcher
        self.limits = limits  # a signal or the wall-time limit cuts the waits short

    def register(self, workers: list[int]) -> None:
        """Wait for every worker's Hello; hosts get their resources (options override detection)."""
        pending = set(workers)
        deadline = time.monotonic() + REGISTER_TIMEOUT
        while pending:
            source, msg = self._recv(deadline, "worker registration")
            if not isinstance(msg, Hello):
                raise RunAborted(f"worker {source} sent {type(msg).__name__} before registering")
            if msg.version != PROTOCOL_VERSION:
                raise RunAborted(
                    f"worker {source} on {msg.hostname} speaks protocol {msg.version}, master {PROTOCOL_VERSION}: "
                    "install the same pilot version on every node"
                )
            pending.discard(source)
            o = self.opts
            cpus = o.host_cpus if o.host_cpus is not None else msg.cpus
            memory = o.host_memory if o.host_memory is not None else msg.memory_mb
            gpus = msg.gpu_ids
            if o.host_gpus is not None:
                gpus = gpus[: o.host_gpus] if len(gpus) >= o.host_gpus else tuple(str(i) for i in range(o.host_gpus))
            cores, sockets = (
                (msg.cores, msg.sockets) if o.host_cpus is None else (cpus, 1)
            )  # PMC's rule for --host-cpus
            host = self.matcher.add_slot(source, msg.hostname, cpus, memory, gpus, cores, sockets)
            log.debug(
                "worker %d registered on %s (%d CPUs, %d MB, %d GPUs)",
                source,
                host.name,
                host.cpus,
                host.memory,
                len(host.gpu_ids),
            )

    def check_feasible(self, dag: Dag, engine: Engine) -> None:
        """Every task not yet done must fit some host, else abort before anything runs."""
        seen: set[tuple[int, int, int]] = set()
        for task in dag:
            key = task.spec.key
            if key in seen or engine.state[task.order] == State.DONE:
                continue
            seen.add(key)
            why = self.matcher.infeasible(task)
            if why:
                raise InfeasibleTask(
                    f"{self.opts.dag}:{task.line}: FATAL ERROR: No host is capable of running task {task.name}: {why}"
                )

    def setup_hosts(self) -> None:
        """One host script per host (by its first worker); wait until every host script is up.

        Without a host script nothing is waited for: workers only learn their
        host rank, and the first tasks follow at once.
        """
        pending: set[int] = set()
        for host in self.matcher.hosts.values():
            for host_rank, rank in enumerate(sorted(host.slots)):  # lowest global rank first, as in PMC
                script = self.opts.host_script if host_rank == 0 else None
                self.t.send(rank, HostSetup(script, host_rank, self.run_id, not self.opts.nolock, self.dag_key))
                if script:
                    pending.add(rank)
        errors: list[str] = []
        while pending:
            source, msg = self._recv(None, "host scripts")
            if isinstance(msg, HostReady):
                pending.discard(source)
                if msg.error:
                    errors.append(f"{msg.hostname}: {msg.error}")
            else:
                raise RunAborted(f"worker {source} sent {type(msg).__name__} during host setup")
        if errors:
            raise RunAborted("Host script failed, aborting the run: " + "; ".join(errors))

    def _recv(self, deadline: float | None, what: str) -> tuple[int, Message]:
        while True:
            signalled = self.limits.signalled
            if signalled:
                raise RunAborted(f"{signalled} received during {what}")
            timeout = None if deadline is None else deadline - time.monotonic()
            if timeout is not None and timeout <= 0:
                raise RunAborted(f"timed out waiting for {what}")
            got = self.t.recv(timeout=min(timeout, 1.0) if timeout is not None else 1.0, wake=self.limits.interrupted)
            if got is None:
                if self.limits.interrupted() and not self.limits.signalled:
                    raise RunAborted(f"max wall time reached during {what}")
                continue
            source, msg = got
            if isinstance(msg, WorkerFailed):
                raise RunAborted(f"worker {source} failed: {msg.error}")
            return source, msg
