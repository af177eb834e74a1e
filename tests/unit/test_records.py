import re
import time

from pilot.contracts import taskrecord
from pilot.monitor import records


def test_iso_time_has_millis_and_offset():
    s = taskrecord.iso_time(1700000000.25)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.250[+-]\d\d:\d\d", s)
    assert time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(1700000000)) == s[:19]


def test_cluster_task_record():
    line = taskrecord.cluster_task("t1", 1700000000.0, 1.23456, 0, "/bin/echo", "node7", 3, 2, 100, "7")
    assert re.fullmatch(
        r'\[cluster-task id=7, name=t1, start="[^"]+", duration=1\.235, status=0, app="/bin/echo", '
        r'hostname="node7", slot=3, cpus=2, memory=100\]\n',
        line,
    )
    assert "id=" not in taskrecord.cluster_task("t1", 0.0, 0, 1, "x", "h", 1, 1, 0)


def test_cluster_summary_record_parses_like_pegasus_exitcode():
    line = records.cluster_summary(False, 4, 5, 3, 2, 1700000000.0, 9.5, 42, "pilot", 7.25, 2, 8)
    assert line.startswith(
        '[cluster-summary stat="failed", tasks=4, submitted=5, succeeded=3, failed=2, extra=0, start="'
    )
    assert line.endswith('duration=9.500, pid=42, app="pilot", runtime=7.250, slots=2, cpus=8]\n')


def test_utilisation_report():
    lines = records.utilisation_report(runtime=10.0, wall=5.0, makespan=4.0, workers=2, succeeded=8)
    assert lines[0] == "Resource utilization (with master): 0.666667"
    assert lines[1] == "Resource utilization (without master): 1.000000"
    assert lines[-1] == "Throughput: 2.000000 tasks/second"
