"""The options of a ``pilot run`` (PMC's, plus a few), as the runtime takes them.

``pilot.cli.run`` reads them from the command line and PMC's environment
variables; the planner's estimate builds them for its simulated run.

Every rank builds its options at start, before MPI_Init: ``RunOptions`` is a
named tuple, cheap to define, and annotations are evaluated (no
``from __future__ import annotations``), which ``NamedTuple`` would otherwise
compile one by one.
"""

from typing import NamedTuple

from pilot.contracts.rescue import rescue_path

DEFAULT_MAX_CRASHES = 2  # crashes of its worker while a task ran alone before it is failed (pilot.runtime.crashes)


class RunOptions(NamedTuple):
    dag: str
    verbosity: int = 0
    skip_rescue: bool = False
    stdout: str | None = None
    stderr: str | None = None
    max_failures: int = 0
    tries: int = 1
    nolock: bool = False
    rescue: str | None = None
    host_script: str | None = None
    host_memory: int | None = None
    host_cpus: int | None = None
    host_gpus: int | None = None
    strict_limits: bool = False
    max_wall_time: float | None = None
    per_task_stdio: bool = False
    jobstate_log: bool = False
    monitord_hack: bool = False
    invocation_records: bool = False
    resource_log: bool = True
    sleep_on_recv: bool = True
    maxfds: int | None = None
    keep_affinity: bool = False
    set_affinity: bool = False
    keep_task_processes: bool = False
    ignore_runtimes: bool = False
    max_crashes: int = DEFAULT_MAX_CRASHES
    containers_once: bool = False  # --containers once: a container per worker and image (pilot.runtime.instances)
    containers_exec: bool = False  # --containers once-exec: each task through the runtime's exec, not nsenter
    inbox: str | None = None  # take DAGs from this directory while running (pilot.contracts.inbox), not ``dag``
    task_files: str | None = None  # pilot.contracts.taskfiles: tasks that run in a directory of their own
    local_scratch: str | None = None  # where those directories go (None: $TMPDIR, else /tmp)
    keep_task_dirs: bool = False  # leave each such directory behind (for a look at what a task left)

    @property
    def rescue_path(self) -> str:
        return self.rescue or rescue_path(self.dag)
