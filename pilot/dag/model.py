"""Task and Dag: plain data, no I/O, shared by the planner and the MPI pilot."""

from __future__ import annotations

from pilot.dag.lexer import split_args


class Task:
    """One TASK record of a PMC DAG.

    ``memory`` is in MB; ``tries`` is None when the task does not override the
    run-wide ``-t``. ``pegasus_id`` comes from a ``#@ <n> <tx> <daxid>``
    annotation and is echoed as ``id=<n>`` in the ``[cluster-task]`` record.
    ``runtime`` is the expected run time in seconds from a ``#pilot
    runtime=<s>`` comment line (None when not given); PMC skips that line.
    ``cwd`` is the directory the task runs in, from the last ``#pilot cwd=<dir>``
    line before it (None: the pilot's own working directory, as in PMC).
    ``stdio`` names the files the task's stdin, stdout and stderr are (``""``:
    none; None: no ``#pilot stdin=/stdout=/stderr=`` line), as a Pegasus job's.
    ``env`` holds the variables the task's environment gets on top of the
    pilot's, from the last ``#pilot env`` line before it (None: none); tasks
    after one line share its tuple.

    The parser keeps the command as written (``raw_args``) and splits it on
    first use of ``argv``: PMC's quoting never rejects a line, so nothing is
    lost by waiting, and a million-task DAG is ready to schedule sooner.
    """

    __slots__ = (
        "name", "_argv", "raw_args", "memory", "cpus", "gpus", "tries", "priority", "pipe_forwards",
        "file_forwards", "pegasus_id", "transformation", "dax_id", "line", "order", "parents", "children",
        "runtime", "cwd", "stdio", "env",
    )

    def __init__(
        self,
        name: str,
        argv: list[str] | None = None,
        memory: int = 0,
        cpus: int = 1,
        gpus: int = 0,
        tries: int | None = None,
        priority: int = 0,
        pipe_forwards: list[tuple[str, str]] | None = None,
        file_forwards: list[tuple[str, str]] | None = None,
        pegasus_id: str | None = None,
        transformation: str | None = None,
        dax_id: str | None = None,
        line: int = 0,
        raw_args: str | None = None,
        runtime: float | None = None,
        cwd: str | None = None,
    ) -> None:
        self.name = name
        self._argv = argv
        self.raw_args = raw_args
        self.memory = memory
        self.cpus = cpus
        self.gpus = gpus
        self.tries = tries
        self.priority = priority
        self.pipe_forwards = pipe_forwards if pipe_forwards is not None else []
        self.file_forwards = file_forwards if file_forwards is not None else []
        self.pegasus_id = pegasus_id
        self.transformation = transformation
        self.dax_id = dax_id
        self.line = line
        self.runtime = runtime
        self.cwd = cwd
        self.stdio: tuple[str, str, str] | None = None
        self.env: tuple[tuple[str, str], ...] | None = None
        self.order = 0
        self.parents: list[Task] = []
        self.children: list[Task] = []

    @property
    def argv(self) -> list[str]:
        if self._argv is None:
            self._argv = split_args(self.raw_args or "")
        return self._argv

    @argv.setter
    def argv(self, value: list[str]) -> None:
        self._argv = value

    @property
    def executable(self) -> str:
        return self.argv[0]

    def __repr__(self) -> str:
        return f"Task({self.name!r})"


class Dag:
    """Tasks in file order plus edges. Duplicate edges are ignored (PMC would run the child twice)."""

    __slots__ = ("path", "tasks")

    def __init__(self, path: str = "<dag>") -> None:
        self.path = path
        self.tasks: dict[str, Task] = {}

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self):
        return iter(self.tasks.values())

    def __getitem__(self, name: str) -> Task:
        return self.tasks[name]

    def __contains__(self, name: object) -> bool:
        return name in self.tasks

    def add_edge(self, parent: str, child: str) -> bool:
        """Add parent -> child; return False when the edge already existed."""
        p = self.tasks[parent]
        c = self.tasks[child]
        # Scan the shorter adjacency list: fan-in and fan-out of a million
        # edges stay linear, and no edge set is kept for the whole parse.
        if (c in p.children) if len(p.children) < len(c.parents) else (p in c.parents):
            return False
        p.children.append(c)
        c.parents.append(p)
        return True

    def edge_count(self) -> int:
        return sum(len(t.children) for t in self.tasks.values())
