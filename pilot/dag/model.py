"""Task and Dag: plain data, no I/O, shared by the planner and the MPI pilot."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from pilot.dag.lexer import split_args


class Spec:
    """What a task asks for and how it runs: its requests, tries, priority, forwards, directory, environment.

    Most tasks of a DAG ask for the same, so the parser gives every such task one
    shared Spec (``shared``): at a million tasks the master holds one reference
    per task, not nine values and two lists. A Spec never changes once made:
    setting one of these fields on a Task gives that task a Spec of its own.
    ``key`` is the resource signature (cpus, memory, gpus) the scheduler queues by.
    """

    __slots__ = ("memory", "cpus", "gpus", "tries", "priority", "pipe_forwards", "file_forwards", "cwd", "env", "key")

    def __init__(
        self,
        memory: int = 0,
        cpus: int = 1,
        gpus: int = 0,
        tries: int | None = None,
        priority: int = 0,
        pipe_forwards: tuple[tuple[str, str], ...] = (),
        file_forwards: tuple[tuple[str, str], ...] = (),
        cwd: str | None = None,
        env: tuple[tuple[str, str], ...] | None = None,
    ) -> None:
        self.memory = memory
        self.cpus = cpus
        self.gpus = gpus
        self.tries = tries
        self.priority = priority
        self.pipe_forwards = pipe_forwards
        self.file_forwards = file_forwards
        self.cwd = cwd
        self.env = env
        self.key = (cpus, memory, gpus)

    def values(self) -> tuple:
        """Every field, in ``__init__``'s order: equal values, equal Specs."""
        return (
            self.memory,
            self.cpus,
            self.gpus,
            self.tries,
            self.priority,
            self.pipe_forwards,
            self.file_forwards,
            self.cwd,
            self.env,
        )

    def but(self, **changes) -> Spec:
        """A copy with ``changes`` (field=value)."""
        fields = dict(zip(_SPEC_FIELDS, self.values()))
        fields.update(changes)
        return Spec(**fields)

    def shared(self, specs: dict[tuple, Spec]) -> Spec:
        """The Spec in ``specs`` equal to this one, which becomes it if there is none yet."""
        return specs.setdefault(self.values(), self)


_SPEC_FIELDS = ("memory", "cpus", "gpus", "tries", "priority", "pipe_forwards", "file_forwards", "cwd", "env")
DEFAULT_SPEC = Spec()
_NONE: tuple = ()  # the parents or children of a task that has none: no list per task until an edge comes


# The derivation (``#@`` dax id) of a job Pegasus adds (create-dir, stage-in, ...), as its kickstart is run
# with ``-N null``: the job runs no task of the workflow's, and pegasus-monitord gives its invocation none.
NO_DAX_ID = "null"


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

    The master holds every task of a run, so a task is kept small: the fields
    most tasks share live in its ``spec`` (see Spec; ``memory``, ``cpus`` and
    the rest read through it, and ``pipe_forwards``/``file_forwards`` read as
    new lists), a task without parents or children holds an empty tuple until
    its first edge, and the command stays as written (``raw_args``), split
    again each time ``argv`` is read: PMC's quoting never rejects a line, so
    nothing is lost by waiting, a million-task DAG is ready to schedule
    sooner, and the master keeps no argument list of a task it has sent.
    """

    __slots__ = (
        "name",
        "_cmd",
        "spec",
        "pegasus_id",
        "transformation",
        "dax_id",
        "_line",
        "order",
        "parents",
        "children",
        "runtime",
        "stdio",
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
        spec: Spec | None = None,
    ) -> None:
        self.name = name
        self._cmd: str | list[str] | None = argv if argv is not None else raw_args
        if spec is None:
            spec = Spec(
                memory, cpus, gpus, tries, priority, tuple(pipe_forwards or ()), tuple(file_forwards or ()), cwd
            )
            if spec.values() == DEFAULT_SPEC.values():
                spec = DEFAULT_SPEC
        self.spec = spec
        self.pegasus_id = pegasus_id
        self.transformation = transformation
        self.dax_id = dax_id
        self._line: int | Sequence[int] = line
        self.runtime = runtime
        self.stdio: tuple[str, str, str] | None = None
        self.order = 0
        self.parents: Sequence[Task] = _NONE
        self.children: Sequence[Task] = _NONE

    @property
    def argv(self) -> list[str]:
        cmd = self._cmd
        if cmd is None:
            return []
        return split_args(cmd) if isinstance(cmd, str) else cmd

    @argv.setter
    def argv(self, value: list[str]) -> None:
        self._cmd = value

    @property
    def raw_args(self) -> str | None:
        """The command as the DAG wrote it; None for a task given its arguments as a list."""
        cmd = self._cmd
        return cmd if isinstance(cmd, str) else None

    @raw_args.setter
    def raw_args(self, value: str | None) -> None:
        self._cmd = value

    @property
    def line(self) -> int:
        """The line of its TASK record. The parser keeps every task's line in one table of machine ints
        (``Dag.lines``, by ``order``), which each task refers to: no int object a task."""
        line = self._line
        return line if isinstance(line, int) else line[self.order]

    @line.setter
    def line(self, value: int) -> None:
        self._line = value

    @property
    def executable(self) -> str:
        return self.argv[0]

    # The fields kept in the task's Spec.
    memory = property(lambda self: self.spec.memory, lambda self, v: self._change(memory=v))
    cpus = property(lambda self: self.spec.cpus, lambda self, v: self._change(cpus=v))
    gpus = property(lambda self: self.spec.gpus, lambda self, v: self._change(gpus=v))
    tries = property(lambda self: self.spec.tries, lambda self, v: self._change(tries=v))
    priority = property(lambda self: self.spec.priority, lambda self, v: self._change(priority=v))
    cwd = property(lambda self: self.spec.cwd, lambda self, v: self._change(cwd=v))
    env = property(lambda self: self.spec.env, lambda self, v: self._change(env=v))
    pipe_forwards = property(
        lambda self: list(self.spec.pipe_forwards), lambda self, v: self._change(pipe_forwards=tuple(v))
    )
    file_forwards = property(
        lambda self: list(self.spec.file_forwards), lambda self, v: self._change(file_forwards=tuple(v))
    )

    def _change(self, **changes) -> None:
        self.spec = self.spec.but(**changes)

    def __repr__(self) -> str:
        return f"Task({self.name!r})"


class Dag:
    """Tasks in file order plus edges. Duplicate edges are ignored (PMC would run the child twice)."""

    __slots__ = ("path", "tasks", "lines")

    def __init__(self, path: str = "<dag>") -> None:
        self.path = path
        self.tasks: dict[str, Task] = {}
        self.lines = array("I")  # the line of each parsed task's TASK record, by order (see Task.line)

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self):
        return iter(self.tasks.values())

    def __getitem__(self, name: str) -> Task:
        return self.tasks[name]

    def __contains__(self, name: object) -> bool:
        return name in self.tasks

    def add(self, task: Task) -> None:
        """Append ``task`` (its name not taken yet): its order is its place, its line goes into ``lines``."""
        task.order = len(self.tasks)
        self.lines.append(task.line)
        task._line = self.lines
        self.tasks[task.name] = task

    def add_edge(self, parent: str, child: str) -> bool:
        """Add parent -> child; return False when the edge already existed."""
        p = self.tasks[parent]
        c = self.tasks[child]
        # Scan the shorter adjacency list: fan-in and fan-out of a million
        # edges stay linear, and no edge set is kept for the whole parse.
        if (c in p.children) if len(p.children) < len(c.parents) else (p in c.parents):
            return False
        # A task's first edge turns its shared empty tuple into a list of its own.
        if p.children:
            p.children.append(c)  # type: ignore[attr-defined]  # a list once the task has an edge; the shared empty tuple before
        else:
            p.children = [c]
        if c.parents:
            c.parents.append(p)  # type: ignore[attr-defined]  # a list once the task has an edge; the shared empty tuple before
        else:
            c.parents = [p]
        return True
