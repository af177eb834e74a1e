"""The quick line reader (pilot.util.yamllines) gives what the event reader gives, or gives up on the whole file.

Every file is read by both: the quick reader's top-level mapping and the items
its callbacks got must equal the event reader's, unless it raised NotPlain,
and whether it gives up is checked too, both ways: on what Pegasus.api and
bench/planner.py write it must not (else the quick path is never taken), on
the edge cases below it must (a value it would get wrong otherwise).
"""

from __future__ import annotations

import importlib.util
import io
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from pilot.errors import ConfigError
from pilot.planner.reader import read_workflow
from pilot.util import boundedload, yamllines, yamlstream

ROOT = Path(__file__).resolve().parents[2]
STREAMED = ("jobs", "jobDependencies")


def read(data: bytes, quick: bool) -> Any:
    """(top-level mapping, callback items) of one reader; "NotPlain" when the quick one gives up, "error" when
    the event reader refuses the file."""
    items: list[tuple[str, int, Any]] = []
    stream = {key: (lambda v, i, key=key: items.append((key, i, v))) for key in STREAMED}
    if quick:
        try:
            return yamllines.read(io.BytesIO(data), stream), items
        except yamllines.NotPlain:
            return "NotPlain"
    loader = yamlstream.Loader(io.BytesIO(data))
    try:
        return yamlstream.document(yamlstream.Reader(loader.get_event, 10**9, 10**9), stream), items
    except (yaml.YAMLError, yamlstream.Invalid):
        return "error"
    finally:
        loader.dispose()


def same(data: bytes | str) -> bool:
    """Whether the quick reader read the file (False: it gave up), asserting that it read it as the event reader."""
    data = data.encode("utf-8") if isinstance(data, str) else data
    quick = read(data, True)
    if quick == "NotPlain":
        return False
    assert quick == read(data, False), data
    return True


# -- what real writers write is read quickly, and the same -----------------------------------------------


def pegasus_workflow(path: Path, awkward: list[str]) -> None:
    api = pytest.importorskip("Pegasus.api")
    wf = api.Workflow("corpus")
    f_in = api.File(awkward[0], size=3).add_metadata(creator="me", note=awkward[1])
    out = api.File("out put.txt")
    job = (
        api.Job("prep", _id="ID1", node_label="a label")
        .add_args("-i", f_in, "-o", out, *awkward)
        .add_inputs(f_in)
        .add_outputs(out, stage_out=False, register_replica=True)
    )
    job.add_env(PATH="/bin:/usr/bin", FOO="a b # c", Q='"x"', COLON="k: v", EMPTY="")
    job.add_profiles(api.Namespace.CONDOR, key="request_memory", value="1 GB")
    job.add_profiles(api.Namespace.PEGASUS, key="clusters.size", value=3)
    job.add_shell_hook(api.EventType.END, "echo 'done: #1'")
    job.add_metadata(k="v", empty="", null="null")
    two = api.Job("two", _id="ID2", namespace="ns", version="1.0").add_args("a").add_inputs(out)
    sub = api.SubWorkflow("sub.yml", False, _id="S1").add_args("--sites", "local", "-v")
    wf.add_jobs(job, two, sub)
    wf.add_dependency(job, children=[two, sub])
    site = api.Site("local").add_directories(
        api.Directory(api.Directory.SHARED_SCRATCH, "/tmp/x").add_file_servers(
            api.FileServer("file:///tmp/x", api.Operation.ALL)
        )
    )
    site.add_env(JAVA_HOME="/opt/java")
    container = api.Container("cont", api.Container.SINGULARITY, "docker://centos:7", mounts=["/a:/b:ro"])
    tc = (
        api.TransformationCatalog()
        .add_containers(container)
        .add_transformations(
            api.Transformation("prep", site="local", pfn="/bin/prep", is_stageable=False, container=container),
            api.Transformation("two", namespace="ns", version="1.0", site="local", pfn="/bin/two"),
        )
    )
    rc = api.ReplicaCatalog().add_replica("local", awkward[0], "/tmp/f", checksum={"sha256": "ab" * 32})
    wf.add_site_catalog(api.SiteCatalog().add_sites(site)).add_transformation_catalog(tc).add_replica_catalog(rc)
    wf.write(str(path))


AWKWARD = [
    'f.b"x: y',
    "x: y",
    "# h",
    "a #b",
    "'q'",
    "",
    "null",
    "Null",
    "~",
    "true",
    "1",
    "-",
    "- x",
    "--x",
    "?x",
    ":x",
    "a:",
    "a:b",
    "[a]",
    "{b}",
    "&a",
    "*a",
    "!t",
    "|",
    ">",
    "%x",
    "@x",
    "`x",
    "a, b",
    " lead",
    "trail ",
    "é ü",
    "日本",
    "a\\b",
    "...",
    "---",
    "--- x",
    "<<",
    "a ' b",
    "=",
    "k=v",
]


def test_pegasus_api_output_is_read_quickly_and_the_same(tmp_path):
    path = tmp_path / "workflow.yml"
    pegasus_workflow(path, AWKWARD)
    text = path.read_text()
    assert "'x: y'" in text and "- '- x'" in text and "é ü" in text  # the awkward strings are there, quoted
    assert same(path.read_bytes())


def test_the_planner_reads_pegasus_api_output_on_the_quick_path(tmp_path, monkeypatch):
    path = tmp_path / "workflow.yml"
    pegasus_workflow(path, ["f.in", "x: y", "a #b", "null", "~", "--x", "?x", ":x", "a:", "[a]", "&a", "é ü", "<<"])
    monkeypatch.setattr(yamlstream, "document", None)  # the event reader, broken: the quick one reads it all
    wf = read_workflow(str(path))
    assert [job.id for job in wf.jobs] == ["ID1", "ID2", "S1"] and {c.id for c in wf.jobs[0].children} == {"ID2", "S1"}
    assert wf.jobs[0].args_line == "-i f.in -o out put.txt f.in x: y a #b null ~ --x ?x :x a: [a] &a é ü <<"


def test_bench_layout_is_read_quickly_and_the_same(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_planner", ROOT / "bench" / "planner.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)  # type: ignore[union-attr]  # the spec of a file that exists has a loader
    path = tmp_path / "wf.yml"
    bench.write_workflow(str(path), 40)
    assert "  arguments: [-i, f.0, -o, f.0.out]\n  uses: []\n" in path.read_text()
    assert same(path.read_bytes())


def test_a_long_value_wrapped_over_lines_is_left_to_the_event_reader(tmp_path):
    path = tmp_path / "workflow.yml"
    pegasus_workflow(path, ["f.in", "n", "word " * 30])
    assert not same(path.read_bytes())
    assert boundedload.load_pegasus(str(path))["jobs"][0]["arguments"][-1] == "word " * 30


# -- random values, dumped by PyYAML ----------------------------------------------------------------------

ATOMS = AWKWARD + [
    "a",
    "job",
    "a\nb",
    "a\tb",
    "\u2028",
    "\x85",
    "\ufeff",
    "\x7f",
    "x" * 90,
    "word " * 20,
    "file:///x",
    "k:v",
    "a  b",
    " ",
    "0x1f",
    "1.5",
    ".inf",
    "yes",
    "off",
    "2001-12-14",
    "a]",
    "a[b",
]


def random_value(r: random.Random, pool: list[str], depth: int) -> Any:
    p = r.random()
    if depth > 4 or p < 0.5:
        return None if r.random() < 0.05 else r.choice(pool) + (r.choice(pool) if r.random() < 0.2 else "")
    if p < 0.75:
        return [random_value(r, pool, depth + 1) for _ in range(r.randrange(0, 5))]
    return {
        (r.choice(pool) if r.random() < 0.95 else None): random_value(r, pool, depth + 1)
        for _ in range(r.randrange(0, 5))
    }


def test_random_values_dumped_by_pyyaml_read_the_same():
    r = random.Random(25)
    quick = 0
    for _ in range(1500):
        pool = r.sample(ATOMS, r.randrange(1, 8))  # a few kinds of value per file: many files have none refused
        doc = {r.choice(pool): random_value(r, pool, 1) for _ in range(r.randrange(1, 5))}
        for key in STREAMED:
            if r.random() < 0.4:
                doc[key] = [random_value(r, pool, 2) for _ in range(r.randrange(0, 4))]
        text = yaml.dump(
            doc,
            Dumper=r.choice([yaml.CSafeDumper, yaml.SafeDumper]),
            sort_keys=False,
            default_flow_style=r.choice([False, None]),
            allow_unicode=r.random() < 0.5,
            indent=r.choice([2, 2, 4]),
            width=r.choice([80, 10**6]),
        )
        quick += same(text)
    assert quick > 300  # of 1500: the quick path was taken, so its results were compared


# -- edge cases -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "a: b\n",
        "a:   b\n",
        "a b: c d\n",
        "<<: x\n",
        "a: x:y:z\n",
        "a: -1\n",
        "a: ---\n",
        "a: ...\n",
        "a:\n- ...\n",
        "a: [a, null, ~]\n",
        "jobs: [a, b]\n",
        "jobs: []\n",
        "jobs:\n",
        "jobs: {}\n",
        "jobs:\n  a: b\n",
        "jobs:\n  - a\n  - b: c\n    d: e\nx: y\n",
        "null: x\n",
        "~: y\n",
        "a: 'a''b'\n",
        'a: "a\'b"\n',
        "a: ''\n",
        "a:\n  - x\n  - y\n",
        "a:\n\n  b: c\n\nd: e",
        "a: null\nb: Null\nc: NULL\nd: ~\ne:\nf: 'null'\n",
        "a: é\nb: ü x\n",
        "a: {}\nb: []\n",
        "'a: b': c\n\"d\": e\n",
        "a:\n- 'k: 1': v\n  w: x\n",
        "a:\n  b:\n  - c\n  - d\n  e: f\n",
        "jobDependencies:\n- id: a\n  children:\n  - b\n",
        "a: b",
        "a:",
        ":x: ?y\n",
    ],
    ids=repr,
)
def test_read_quickly_and_the_same(text):
    assert same(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: b\n  c\n",  # a plain scalar continued on the next line
        "a:\n- b\n  c\n",
        "a: 'b\n  - c'\n",  # a "- " line inside a quoted scalar over two lines
        'a: "b\n  c: d"\n',
        "a: |\n  b\n",
        "a: >\n  b\n",
        "a: |-\n  b\n",
        "a: &x b\nc: *x\n",
        "a: !!str b\n",
        "# c\na: b\n",
        "a: b # c\n",
        "a:\n  # c\n  b: c\n",
        "k:\n  a: b # c\n",
        "k:\n- b # c\n",
        "k:\n- a: b #c\n",
        "a: b\na: c\n",
        "a:\n  b: 1\n  b: 2\n",
        "null: a\n~: b\n",  # duplicate keys: the event reader names them
        "---\na: b\n",
        "a: b\n...\n",
        "%YAML 1.1\n---\na: b\n",
        "a: b\tc\n",
        "a: b\r\n",
        "a: b\x00\n",
        "\ufeffa: b\n",
        "a: b\u2028c\n",
        "a: b\x85c\n",
        "a: b \n",
        "a:\n  \n  b: c\n",  # trailing spaces, a line of spaces
        'a: "b\\tc"\n',
        "a: {b: c}\n",
        "a: [b, 'c']\n",
        "a: [b,c]\n",
        "? a\n: b\n",
        "[a]: b\n",
        "a:\n  - - x\n",
        "a:\n-   b: c\n",
        "a: b\n- c\n",
        "a:\n    b: c\n  d: e\n",
        "a:\n  b\n",
        "a: b:\n",
        "- a\n",
        "a\n",
        "",
        "\n\n",
        "-x: 1\n",
        "a:\n- -x: y\n",
        "a: - b\n",
        "a: 'b' c\n",
        "a: 'b''\n",
        "k" * 1100 + ": v\n",
        "a:\n" + "".join("  " * i + "- b:\n" for i in range(1, 30)),
    ],
    ids=repr,
)
def test_left_to_the_event_reader(text):
    assert not same(text)


# -- the fallback starts again from nothing -----------------------------------------------------------------


def test_a_file_given_up_part_way_is_read_again_with_fresh_callbacks(tmp_path):
    path = tmp_path / "wf.yml"
    path.write_text("jobs:\n- a\n- b\n- c # a comment, met after two items were handed on\n")
    calls: list[list[Any]] = []

    def start():
        calls.append([])
        return {"jobs": lambda v, i: calls[-1].append(v)}

    assert boundedload.load_pegasus_streaming(str(path), start) == {"jobs": 3}
    assert calls == [["a", "b"], ["a", "b", "c"]]


def test_a_workflow_given_up_at_its_end_is_the_workflow_read_by_events(tmp_path):
    plain, commented = tmp_path / "plain.yml", tmp_path / "commented.yml"
    pegasus_workflow(plain, ["f.in", "n"])
    commented.write_text(plain.read_text() + "\n# the end\n")
    assert same(plain.read_bytes()) and not same(commented.read_bytes())
    a, b = read_workflow(str(plain)), read_workflow(str(commented))
    assert [(j.id, j.args_line, [c.id for c in j.children]) for j in a.jobs] == [
        (j.id, j.args_line, [c.id for c in j.children]) for j in b.jobs
    ]
    assert len(b.jobs) == 3  # not the quick pass's jobs again


def test_an_error_of_a_callback_is_the_event_readers(tmp_path):
    """A job the planner refuses, then a line libyaml refuses: the event reader stops at the line first."""
    path = tmp_path / "wf.yml"
    path.write_text("jobs:\n- type: job\n  id: a b\n  name: t\n\tbad: tab\n")
    with pytest.raises(ConfigError) as quick_and_events:
        read_workflow(str(path))
    assert "wf.yml:5" in str(quick_and_events.value), str(quick_and_events.value)
    path.write_text("jobs:\n- type: job\n  id: a b\n  name: t\n")
    with pytest.raises(ConfigError, match=r"jobs\[0\]\.id: 'a b'"):
        read_workflow(str(path))


def test_nulls_are_none_for_both_readers(tmp_path):
    """A plain empty, ~ or null scalar is None, also through libyaml's C parser (which marks a plain scalar's
    style '' where PyYAML's own marks None); a quoted one stays text."""
    text = "a:\nb: null\nc: ~\nd: 'null'\ne: [x, null]\nf:\n- NULL\n"
    expected = {"a": None, "b": None, "c": None, "d": "null", "e": ["x", None], "f": [None]}
    assert read(text.encode(), False)[0] == expected
    assert read(text.encode(), True)[0] == expected


def test_each_empty_list_is_a_list_of_its_own():
    """A line read again is taken from a cache of lines; an empty list in it is made anew each time, as the event
    reader makes it, so that a caller filling one list fills no other."""
    text = "jobs:\n" + "".join(f"- id: j{k}\n  uses: []\n  args: []\n" for k in range(4)) + "top: []\nother: []\n"
    assert same(text)
    data, items = read(text.encode(), True)
    lists = (
        [item["uses"] for _, _, item in items] + [item["args"] for _, _, item in items] + [data["top"], data["other"]]
    )
    assert all(x == [] for x in lists) and len({id(x) for x in lists}) == len(lists)
