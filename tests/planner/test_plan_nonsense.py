"""Nonsense a plan used to accept silently: a PMC task no node can run, an empty executable, an empty --cluster."""

from __future__ import annotations

import logging

import pytest

from pilot.dag import parse_dag
from pilot.errors import ConfigError, DagError
from pilot.planner.clustering import parse_techniques
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site


def test_a_dag_task_bigger_than_any_node_is_said_at_plan_time(tmp_path, caplog):
    dag = tmp_path / "big.dag"
    dag.write_text("TASK small /bin/true\nTASK big -c 500 -m 1e6 /bin/true\n")
    with caplog.at_level(logging.WARNING, logger="pilot.plan"):
        plan(PlanRequest(workflow=str(dag), site=load_site("perlmutter-cpu"), submit_dir=str(tmp_path / "s")))
    lines = [r.getMessage() for r in caplog.records]
    assert (
        f"{dag}:2: task big asks for 500 CPUs, but a node of site perlmutter-cpu has 128 (cores_per_node)" in lines[0]
    )
    assert "asks for 1000000 MB" in lines[1] and len(lines) == 2


def test_an_empty_executable_is_refused():
    with pytest.raises(DagError, match="task 'a' has no executable"):
        parse_dag(['TASK a "" x'])


def test_an_empty_cluster_option_is_refused():
    with pytest.raises(ConfigError, match=r"--cluster '': name a technique"):
        parse_techniques([""])


def test_a_runtime_of_more_than_31_years_is_a_typo():
    from pilot.planner.profiles import check_value

    with pytest.raises(DagError, match=r"runtime '1e300' is more than 1e\+09 seconds"):
        parse_dag(["#pilot runtime=1e300", "TASK a /bin/true"])
    assert check_value("runtime", "1e300") == "is more than 1e+09 seconds: a typo?"
    assert check_value("clusters.maxruntime", "86400") is None
