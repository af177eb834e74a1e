"""Every YAML and JSON file pilot reads goes through pilot.util.boundedload: one line and exit 2 for whatever it holds.

The last test keeps it so: a module that parses YAML or JSON another way fails it.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pilot.contracts.clusters import read_clusters
from pilot.contracts.queue import QueueState
from pilot.contracts.result import ResultError, read_result
from pilot.contracts.submitdir import load_braindump
from pilot.contracts.submitstate import STATE_FILE, ClusterState, SubmitState
from pilot.errors import ConfigError
from pilot.monitor.root import root_braindump
from pilot.sites import load_site
from pilot.util import boundedload
from pilot.util.safeopen import NotAFile, read_at_most
from tests.unit.fake_queue import make_plan

ROOT = Path(__file__).resolve().parents[2]

# A "billion laughs": each level names the one before it nine times.
BOMB = (
    "[&a [x, x, x, x, x, x, x, x, x], "
    + ", ".join(f"&{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi"))
    + "]"
)


def one_line(exc: pytest.ExceptionInfo, *pieces: str) -> str:
    text = str(exc.value)
    assert "\n" not in text and len(text) < 600, text
    for piece in pieces:
        assert piece in text, text
    return text


# -- the reader itself ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, says",
    [
        (b"b: " + BOMB.encode() + b"\n", "aliases (*"),
        (b"a: !!python/object/apply:os.system [echo hi]\n", "tag !!python/object/apply:os.system is not allowed"),
        (b"a: !!binary aGk=\n", "tag !!binary is not allowed"),
        (b"? [a, b]\n: 1\n", "a mapping key must be plain text"),
        (b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested deeper than 100 levels"),
        (b"a: caf\xe9\n", ":1: not UTF-8 text (byte 6)"),
        (b"a: 1\nb: \x00\x01\x02\n", ":2: binary data (a NUL byte)"),
        (b"a: \x01\n", "a control character"),
        (b"a: .inf\n", "'.inf' is not a finite number"),
        (b"a: " + b"9" * 5000 + b"\n", "a number of 5,000 characters, too long to read"),
        (b"a: !!int x\n", "'x' is not an integer"),
        (b"a: 1\na: 2\n", ":2: 'a' appears twice"),
        (b"a: [\n", "not valid YAML"),
    ],
)
def test_yaml_is_bounded_and_plain(tmp_path, content, says):
    path = tmp_path / "f.yml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as exc:
        boundedload.load_yaml(str(path), hint="the fix")
    assert one_line(exc, str(path), says).endswith("; the fix")


def test_yaml_types_scalars_as_safe_load_does(tmp_path):
    path = tmp_path / "f.yml"
    path.write_text("a: 1\nb: 2.5\nc: true\nd: ~\ne: '1'\nf: 2024-01-01\ng: &g [x]\nh: *g\n")
    value, lines = boundedload.load_yaml_lines(str(path))
    assert value == {"a": 1, "b": 2.5, "c": True, "d": None, "e": "1", "f": "2024-01-01", "g": ["x"], "h": ["x"]}
    assert lines["c"] == 3 and lines["h"] == 8


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda p: p.mkdir(), "is a directory, not a file"),
        (lambda p: os.mkfifo(p), "is a FIFO, not a file"),  # opened without blocking: refused, never waited on
        (lambda p: p.write_bytes(b"a: " + b"x" * 200), "larger than 100 bytes"),
    ],
)
def test_only_regular_files_of_bounded_size_are_read(tmp_path, make, says):
    path = tmp_path / "f"
    make(path)
    with pytest.raises(ConfigError) as exc:
        boundedload.load_yaml(str(path), max_bytes=100)
    one_line(exc, says)
    with pytest.raises(ConfigError) as exc:
        boundedload.load_json(str(path), max_bytes=100)
    one_line(exc, says)


def test_read_at_most_reads_the_start_of_a_regular_file_only(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    assert read_at_most(str(path), 4) == b"0123" and read_at_most(str(path), 100) == b"0123456789"
    os.mkfifo(tmp_path / "fifo")  # opened without blocking: refused, never waited on
    for name, says in (("fifo", "is a FIFO, not a file"), (".", "is a directory, not a file")):
        with pytest.raises(NotAFile, match=says):
            read_at_most(str(tmp_path / name), 4)


def test_a_device_is_not_read(tmp_path):
    with pytest.raises(ConfigError) as exc:
        boundedload.read_text("/dev/zero", 1 << 20)
    one_line(exc, "/dev/zero: is a device, not a file")


@pytest.mark.parametrize(
    "text, says",
    [
        ('{"a": Infinity}', "Infinity is not a number pilot reads"),
        ('{"a": NaN}', "NaN is not a number pilot reads"),
        ('{"a": 1e400}', "too large for a number"),
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 100 levels"),
        ("[" * 500 + "]" * 500, "nested deeper than 100 levels"),  # parses, but whoever reads it would recurse
        ('{"a": 1,}', ":1: not valid JSON"),
        ("9" * 5000, "not valid JSON"),
    ],
)
def test_json_is_bounded_and_finite(tmp_path, text, says):
    path = tmp_path / "f.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        boundedload.load_json(str(path), 1 << 20)
    one_line(exc, says)


def test_a_missing_file_is_the_callers_to_name(tmp_path):
    with pytest.raises(FileNotFoundError):
        boundedload.load_json(str(tmp_path / "none"), 100)


# -- each file pilot reads ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, says",
    [
        (f"scheduler: local\nworker_init: {BOMB}\n", "site.yaml:2: aliases"),
        (f"scheduler: local\nnodes: {BOMB}\n", "site.yaml:2: aliases"),
        ("scheduler: local\nnodes: &n 2\nwalltime: *n\n", None),
        ("scheduler: !!python/object/apply:os.system ['true']\n", "site.yaml:1: tag !!python/object/apply"),
        ("? [a, b]\n: 1\n", "site.yaml:1: a mapping key must be plain text"),
        ("nodes: " + "[" * 5000 + "]" * 5000 + "\n", "site.yaml:1: nested deeper"),
        ("- a\n- b\n", "site.yaml:1: a site config is a mapping"),
        ("nodes: 99999999999999999999\n", "is more than 2147483647"),
        ("walltime: 1e400\n", "is longer than a year"),
    ],
)
def test_site_files(tmp_path, text, says):
    path = tmp_path / "site.yaml"
    path.write_text(text)
    if says is None:
        assert load_site(str(path)).nodes == 2
        return
    with pytest.raises(ConfigError) as exc:
        load_site(str(path))
    one_line(exc, says)


@pytest.mark.parametrize(
    "content", [b"\xff\xfebinary\x00", "scheduler: local\ndescription: caf\xe9\n".encode("latin-1")]
)
def test_a_binary_or_latin1_site_file(tmp_path, content):
    path = tmp_path / "site.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as exc:
        load_site(str(path))
    one_line(exc, "site.yaml:", "is this the right file?")


def _state(tmp_path: Path, change) -> str:
    sub = make_plan(tmp_path / "sub", {"a": []})
    data = {
        "format": 1,
        "plan_id": "p1",
        "sites": {"s": {"file": "/x.yaml", "set": {}}},
        "clusters": [
            {"name": "a", "state": "queued", "site": "s", "attempts": 1, "job_ids": ["7"], "job_name": "pilot-p1-a-1"}
        ],
    }
    change(data)
    Path(sub, STATE_FILE).write_text(json.dumps(data))
    return sub


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda d: d["clusters"][0].update(attempts="1"), "clusters[0]: attempts: '1' is not a count"),
        (lambda d: d["clusters"][0].update(attempts=1.5), "attempts: 1.5 is not a count"),
        (lambda d: d["clusters"][0].update(job_ids="7"), "job_ids: '7' is not a list of job ids"),
        (lambda d: d["clusters"][0].update(job_ids=[{"a": 1}]), "job_ids: [{'a': 1}] is not a list of job ids"),
        (lambda d: d["clusters"][0].update(site=None), "cluster a is queued on no site"),
        (
            lambda d: d["clusters"][0].update(job_ids=[], job_name=None),
            "in a queue with neither a job id nor a job name",
        ),
        (
            lambda d: d["clusters"][0].update(state="submitting", job_name=""),
            "in a queue with neither a job id nor a job name",
        ),
        (lambda d: d["clusters"].append(7), "clusters[1]: must be a mapping"),
        (lambda d: d.update(clusters={"a": 1}), "clusters: must be a list"),
        (lambda d: d.update(plan_id=["x"]), "plan_id: ['x'] is not a plan id"),
        (lambda d: d.update(sites=[1]), "sites: must be a mapping"),
        (
            lambda d: d["clusters"][0].update(queue="busy"),
            "queue: 'busy' is not a queue state (pending, running, held,",
        ),
    ],
)
def test_state_fields_of_the_wrong_type(tmp_path, change, says):
    sub = _state(tmp_path, change)
    with pytest.raises(ConfigError) as exc:
        SubmitState.load(sub)
    one_line(exc, f"{STATE_FILE}: ", says, "remove it to start the run over")


def test_a_cluster_queued_without_a_job_id_is_in_doubt(tmp_path):
    """Not waited on forever: the driver looks its job up by name before submitting again."""
    sub = _state(tmp_path, lambda d: d["clusters"][0].update(job_ids=[]))
    state = SubmitState.load(sub)
    assert state is not None and state.clusters["a"].state is ClusterState.SUBMITTING


def test_the_queue_state_is_kept_as_its_value(tmp_path):
    sub = _state(tmp_path, lambda d: d["clusters"][0].update(queue="held", queue_reason="JobHeldUser"))
    state = SubmitState.load(sub)
    assert state is not None and state.clusters["a"].queue is QueueState.HELD
    state.save()
    assert json.loads(Path(sub, STATE_FILE).read_text())["clusters"][0]["queue"] == "held"
    state.clusters["a"].queue = None
    state.save()
    assert json.loads(Path(sub, STATE_FILE).read_text())["clusters"][0]["queue"] == ""  # none yet, as before
    again = SubmitState.load(sub)
    assert again is not None and again.clusters["a"].queue is None


@pytest.mark.parametrize("content", [b"\x00\xffgarbage", b"[" * 100_000, b'{"format": 1, "plan_id": NaN}'])
def test_garbage_state(tmp_path, content):
    sub = make_plan(tmp_path / "sub", {"a": []})
    Path(sub, STATE_FILE).write_bytes(content)
    with pytest.raises(ConfigError) as exc:
        SubmitState.load(sub)
    one_line(exc, STATE_FILE)


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda t: t.replace("clusters:", f"x: {BOMB}\nclusters:"), "aliases"),
        (lambda t: t + "y: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper"),
        (lambda t: t.replace('dir: "a"', 'dir: "/etc"'), "dir: '/etc' is not a path inside the submit directory"),
        (lambda t: t.replace('dir: "a"', 'dir: "../x"'), "dir: '../x' is not a path inside the submit directory"),
        (lambda t: t.replace('dag: "a/a.dag"', 'dag: "a/../../x.dag"'), "dag: 'a/../../x.dag' is not a path inside"),
        (lambda t: t.replace("tasks: 2", "tasks: 2.5"), "tasks: '2.5' is not a count"),
        (lambda t: t.replace("ranks: 2", "ranks: 2\n  nodes: 0"), "nodes: '0' is not a count"),
        (
            lambda t: t.replace("ranks: 2", "ranks: 2\n  walltime_minutes: -5"),
            "walltime_minutes: '-5' is not a number of",
        ),
        (lambda t: t.replace("runtime: null", "runtime: .nan"), "'.nan' is not a finite number"),
        (lambda t: t.replace("clusters:", "clusters: 5\nz:"), "clusters: must be a list"),
    ],
)
def test_clusters_file(tmp_path, edit, says):
    sub = make_plan(tmp_path / "sub", {"a": []})
    path = Path(sub, "clusters.yml")
    path.write_text(edit(path.read_text()))
    with pytest.raises(ConfigError) as exc:
        read_clusters(sub)
    one_line(exc, "clusters.yml", says)


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda p: p.write_text("::: [\n"), "not valid YAML"),
        (lambda p: p.write_bytes(b"\x7fELF\x02\x01\x01\x00"), "binary data"),
        (lambda p: p.write_text("- a\n- b\n"), "not a braindump"),
        (lambda p: p.mkdir(), "is a directory, not a file"),
        (lambda p: p.write_text("dag: /etc/passwd\n"), "names no root DAG that exists in the submit directory"),
        (lambda p: p.write_text("dag: ../x.dag\n"), "names no root DAG that exists in the submit directory"),
    ],
)
def test_braindump(tmp_path, make, says):
    make(tmp_path / "braindump.yml")
    with pytest.raises(ConfigError) as exc:
        root_braindump(str(tmp_path))
    one_line(exc, "braindump.yml", says)


def test_a_braindump_reads_back(tmp_path):
    (tmp_path / "braindump.yml").write_text('dag: "x.dag"\nuses_pmc: true\ngrid_dn: null\n')
    assert load_braindump(str(tmp_path / "braindump.yml")) == {"dag": "x.dag", "uses_pmc": True, "grid_dn": None}


# -- any bytes -----------------------------------------------------------------------------------------

FUZZ = settings(
    max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
# What matters to YAML and JSON, plus a few bytes of anything.
_PIECES = st.sampled_from(
    [
        b"&a ",
        b"*a",
        b"!!python/name:os.system ",
        b"!!binary ",
        b"? ",
        b"[",
        b"]",
        b"{",
        b"}",
        b": ",
        b"- ",
        b"\n",
        b"\n  ",
        b'"',
        b"'",
        b"1e400",
        b".inf",
        b"NaN",
        b"Infinity",
        b"9" * 50,
        b"~",
        b"format: 1\n",
        b"clusters:\n",
        b"nodes: ",
        b'{"format": 1, ',
        b'"clusters": [',
        b"\xff",
        b"\0",
    ]
)
_DOCUMENT = st.lists(_PIECES | st.binary(max_size=4), max_size=30).map(b"".join)


@FUZZ
@given(_DOCUMENT)
def test_any_bytes_end_in_a_value_or_one_line(tmp_path, data):
    """The site, state, cluster DAG and result readers answer any file with their values or one ConfigError line."""
    sub = tmp_path / "fuzz"
    sub.mkdir(exist_ok=True)
    for name, read in (
        ("site.yaml", lambda: load_site(str(sub / "site.yaml"))),
        (STATE_FILE, lambda: SubmitState.load(str(sub))),
        ("clusters.yml", lambda: read_clusters(str(sub))),
        ("x.dag.result", lambda: read_result(str(sub / "x.dag"))),
        ("braindump.yml", lambda: root_braindump(str(sub))),
    ):
        (sub / name).write_bytes(data)
        try:
            read()
        except (ConfigError, ResultError) as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 2000, str(exc)


# -- the rule -------------------------------------------------------------------------------------------

# Modules that may parse YAML or JSON themselves, and why.
PARSERS_ALLOWED = {
    # the one helper: every file read bounded (size, encoding, nesting, aliases, tags, finite numbers)
    "pilot/util/boundedload.py",
    # its event reader: the only user of libyaml's loader, which it drives event by event (no safe_load)
    "pilot/util/yamlstream.py",
}
_YAML_PARSE = {
    "load",
    "safe_load",
    "full_load",
    "unsafe_load",
    "load_all",
    "safe_load_all",
    "full_load_all",
    "unsafe_load_all",
    "compose",
    "compose_all",
    "parse",
    "scan",
    "Loader",
    "SafeLoader",
    "CSafeLoader",
    "CLoader",
    "FullLoader",
    "UnsafeLoader",
    "BaseLoader",
    "CBaseLoader",
}
_JSON_PARSE = {"load", "loads", "JSONDecoder"}


def parses_itself(path: Path) -> list[str]:
    """``yaml.<parse>``/``json.<load>`` uses, and imports of those names, in one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id == "yaml" and node.attr in _YAML_PARSE) or (
                node.value.id == "json" and node.attr in _JSON_PARSE
            ):
                found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and node.module in ("yaml", "json"):
            names = _YAML_PARSE if node.module == "yaml" else _JSON_PARSE
            found += [f"from {node.module} import {a.name} (line {node.lineno})" for a in node.names if a.name in names]
    return found


def test_yaml_and_json_are_parsed_only_by_the_bounded_reader():
    wrong = []
    for top in (ROOT / "pilot", ROOT / "providers"):
        for path in sorted(top.rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel not in PARSERS_ALLOWED:
                wrong += [f"{rel}: {use}" for use in parses_itself(path)]
    assert not wrong, "read YAML/JSON with pilot.util.boundedload instead:\n" + "\n".join(wrong)


def test_the_rule_sees_a_parser(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import json, yaml\nfrom json import loads\nyaml.safe_load('a')\njson.load(open('x'))\n")
    assert len(parses_itself(path)) == 3
