"""The task graph: model, PMC .dag reader and writer, cycle check (the rescue log is pilot.contracts.rescue)."""

from pilot.dag.model import Dag, Task
from pilot.dag.parser import parse_dag, read_dag
from pilot.dag.writer import format_dag

__all__ = ["Dag", "Task", "parse_dag", "read_dag", "format_dag"]
