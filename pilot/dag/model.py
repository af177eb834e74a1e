"""Task and Dag: plain data, no I/O, shared by the planner and the MPI pilot."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True, eq=False)
class Task:
    """One TASK record of a PMC DAG.

    ``memory`` is in MB; ``tries`` is None when the task does not override the
    run-wide ``-t``. ``pegasus_id`` comes from a ``#@ <n> <tx> <daxid>``
    annotation and is echoed as ``id=<n>`` in the ``[cluster-task]`` record.
    """

    name: str
    argv: list[str]
    memory: int = 0
    cpus: int = 1
    gpus: int = 0
    tries: int | None = None
    priority: int = 0
    pipe_forwards: list[tuple[str, str]] = field(default_factory=list)
    file_forwards: list[tuple[str, str]] = field(default_factory=list)
    pegasus_id: str | None = None
    transformation: str | None = None
    dax_id: str | None = None
    line: int = 0
    order: int = 0
    parents: list["Task"] = field(default_factory=list)
    children: list["Task"] = field(default_factory=list)

    @property
    def executable(self) -> str:
        return self.argv[0]


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

    def add_task(self, task: Task) -> Task:
        if task.name in self.tasks:
            raise ValueError(f"duplicate task {task.name!r}")
        task.order = len(self.tasks)
        self.tasks[task.name] = task
        return task

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

    def roots(self) -> list[Task]:
        return [t for t in self.tasks.values() if not t.parents]
