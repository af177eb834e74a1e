"""The task graph: model, PMC .dag reader and writer, cycle check, rescue log."""

from pilot.dag.model import Dag, Task
from pilot.dag.parser import parse_dag, read_dag
from pilot.dag.rescue import RescueLog, read_rescue
from pilot.dag.writer import format_dag

__all__ = ["Dag", "Task", "parse_dag", "read_dag", "format_dag", "RescueLog", "read_rescue"]
