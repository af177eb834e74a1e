"""Bad planner input: bounded YAML, wrong types anywhere, one line with the YAML path and exit 2.

Workflows start as real Pegasus.api output; the faults are what a hand edit
(or a generator of its own) would put in.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import yaml

from pilot.cli.main import main as pilot
from pilot.errors import ConfigError
from pilot.planner import yamlstream
from tests.planner.test_clustering import run_plan
from tests.planner.wf import api, transformations, write


def diamondish(tmp_path: Path, **props) -> dict[str, str]:
    wf = api.Workflow("bad", infer_dependencies=False)
    a, b = api.Job("T", _id="left"), api.Job("T", _id="right")
    wf.add_jobs(a, b)
    wf.add_dependency(a, children=[b])
    sc = api.SiteCatalog().add_sites(api.Site("local"))
    return write(tmp_path, wf, transformations("local", {"T": "/bin/echo"}), sc, props=props or None)


def edit(path: str, change) -> None:
    """Load the YAML Pegasus.api wrote, change it as a hand edit would, write it back."""
    data = yaml.safe_load(Path(path).read_text())
    change(data)
    Path(path).write_text(yaml.safe_dump(data, sort_keys=False))


def run_cli(capsys, paths: dict[str, str], tmp_path: Path, *extra: str) -> tuple[int, str]:
    args = ["plan", paths["workflow"], "--site", "local", "--dir", str(tmp_path / "submit"), *extra]
    for key in ("tc", "sc", "conf"):
        if key in paths:
            args += [f"--{key}", paths[key]]
    code = pilot(args)
    return code, capsys.readouterr().err


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


# -- wrong types, each a one-line error with the YAML path -------------------------------------------


def _job_profile(value):
    def change(d):
        d["jobs"][0]["profiles"] = {"pegasus": {"pmc_task_arguments": value}}

    return change


WORKFLOW_FAULTS = {
    "dependencies a word": (
        lambda d: d.update(jobDependencies="all"),
        r"workflow.yml: jobDependencies: must be a list .*not 'all'",
    ),
    "children a word": (
        lambda d: d["jobDependencies"][0].update(children="right"),
        r"workflow.yml: jobDependencies\[0\].children: must be a list .*not 'right'",
    ),
    "children a mapping": (
        lambda d: d["jobDependencies"][0].update(children={"right": 1}),
        r"jobDependencies\[0\].children: must be a list .*not a mapping",
    ),
    "dependency a list": (
        lambda d: d.update(jobDependencies=[["left", "right"]]),
        r"jobDependencies\[0\]: must be a mapping \({id: JOB, children: \[JOB, ...\]}\), not a list",
    ),
    "child a list": (
        lambda d: d["jobDependencies"][0].update(children=[["right"]]),
        r"jobDependencies\[0\].children\[0\]: must be a single value, not a list",
    ),
    "jobs a mapping": (
        lambda d: d.update(jobs={"left": d["jobs"][0]}),
        r"workflow.yml: jobs: must be a list .*not a mapping",
    ),
    "job id a list": (
        lambda d: d["jobs"][1].update(id=["x", "y"]),
        r"workflow.yml: jobs\[1\].id: must be a single value, not a list",
    ),
    "arguments a word": (
        lambda d: d["jobs"][0].update(arguments="-i in"),
        r"jobs\[0\].arguments: must be a list .*not '-i in'",
    ),
    "profiles a list": (
        lambda d: d["jobs"][0].update(profiles=["pegasus"]),
        r"jobs\[0\].profiles: must be a mapping .*not a list",
    ),
    "profile value a list": (
        _job_profile(["-t", "3"]),
        r"jobs\[0\].profiles.pegasus.pmc_task_arguments: must be a single value, not a list",
    ),
    "bad runtime": (
        lambda d: d["jobs"][0].update(profiles={"pegasus": {"runtime": "soon"}}),
        r"jobs\[0\].profiles.pegasus.runtime: 'soon' is not a number of seconds",
    ),
    "bad clusters.num": (
        lambda d: d["jobs"][0].update(profiles={"pegasus": {"clusters.num": "0"}}),
        r"jobs\[0\].profiles.pegasus.clusters.num: '0' must be at least 1",
    ),
    "namespace that would start a DAG line": (
        lambda d: d["jobs"][0].update(namespace="a\nTASK evil /bin/touch x"),
        r"jobs\[0\].namespace: .* may use letters, digits",
    ),
    "version with a space": (
        lambda d: d["jobs"][0].update(version="1 2"),
        r"jobs\[0\].version: '1 2': a version may use",
    ),
    "env value with a newline": (
        lambda d: d["jobs"][0].update(profiles={"env": {"X": "a\nb"}}),
        r"jobs\[0\].profiles.env.X: an environment value cannot hold a newline or NUL",
    ),
    "env name not a variable": (
        lambda d: d["jobs"][0].update(profiles={"env": {"1X": "a"}}),
        r"jobs\[0\].profiles.env.1X: '1X' is not an environment variable name",
    ),
    "name a mapping": (
        lambda d: d.update(name={"a": "b"}),
        r"workflow.yml: name: must be a single value, not a mapping",
    ),
    "jobs a word": (lambda d: d.update(jobs="left right"), r"workflow.yml: jobs: must be a list .*not 'left right'"),
}


@pytest.mark.parametrize("fault", WORKFLOW_FAULTS)
def test_wrong_types_in_the_workflow(tmp_path, capsys, fault):
    change, expected = WORKFLOW_FAULTS[fault]
    paths = diamondish(tmp_path)
    edit(paths["workflow"], change)
    code, err = run_cli(capsys, paths, tmp_path, "--cluster", "none")
    assert code == 2 and re.search(expected, one_line(err)), err


CATALOG_FAULTS = {
    "transformations a word": (
        "tc",
        lambda d: d.update(transformations="T"),
        r"transformations.yml: transformations: must be a list .*not 'T'",
    ),
    "sites a mapping": (
        "tc",
        lambda d: d["transformations"][0].update(sites={"name": "local"}),
        r"transformations.yml: transformations\[0\].sites: must be a list .*not a mapping",
    ),
    "pfn a list": (
        "tc",
        lambda d: d["transformations"][0]["sites"][0].update(pfn=["/bin/echo"]),
        r"transformations.yml: transformations\[0\].sites\[0\].pfn: must be a single value, not a list",
    ),
    "tc profile": (
        "tc",
        lambda d: d["transformations"][0].update(profiles={"pegasus": {"clusters.size": "big"}}),
        r"transformations\[0\].profiles.pegasus.clusters.size: 'big' is not a whole number",
    ),
    "site catalog sites a word": (
        "sc",
        lambda d: d.update(sites="local"),
        r"sites.yml: sites: must be a list .*not 'local'",
    ),
    "site profile namespace a list": (
        "sc",
        lambda d: d["sites"][0].update(profiles={"pegasus": ["x"]}),
        r"sites.yml: sites\[0\].profiles.pegasus: must be a mapping .*not a list",
    ),
}


@pytest.mark.parametrize("fault", CATALOG_FAULTS)
def test_wrong_types_in_the_catalogs(tmp_path, capsys, fault):
    which, change, expected = CATALOG_FAULTS[fault]
    paths = diamondish(tmp_path)
    edit(paths[which], change)
    code, err = run_cli(capsys, paths, tmp_path)
    assert code == 2 and re.search(expected, one_line(err)), err


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            "pegasus.clusters.size = many",
            r"pegasus.properties:\d+: pegasus.clusters.size = 'many' is not a whole number",
        ),
        (
            "pegasus.clusterer.preference = Runtim",
            r"pegasus.properties:\d+: pegasus.clusterer.preference = 'Runtim' is not a preference: use Runtime",
        ),
        ("pegasus.runtime = -5", r"pegasus.properties:\d+: pegasus.runtime = '-5' must not be negative"),
        ("pegasus.pmc_priority = high", r"pegasus.pmc_priority = 'high' is not an integer"),
        # checked though the workflow has no file to stage, as when it has
        ("pegasus.stagein.clusters = two", r"pegasus.stagein.clusters = 'two' is not a whole number"),
    ],
)
def test_wrong_values_in_the_properties(tmp_path, capsys, line, expected):
    paths = diamondish(tmp_path, **{"pegasus.mode": "development"})
    with open(paths["conf"], "a") as fh:
        fh.write(line + "\n")
    code, err = run_cli(capsys, paths, tmp_path)
    assert code == 2 and re.search(expected, one_line(err)), err


def test_properties_that_are_not_text(tmp_path, capsys):
    paths = diamondish(tmp_path)
    paths["conf"] = str(tmp_path / "pegasus.properties")
    Path(paths["conf"]).write_bytes(b"pegasus.mode = \xff\xfe\n")
    code, err = run_cli(capsys, paths, tmp_path)
    assert code == 2 and "pegasus.properties: not UTF-8 text" in one_line(err)


# -- bounded YAML -------------------------------------------------------------------------------------


def laughs(depth: int) -> str:
    """The issue's kind of file: each anchor a list of nine aliases of the one before, used as a profile."""
    lines = ["pegasus: '5.0'", "name: bomb", "x0: &x0 ['" + "a" * 100 + "']"]
    lines += [f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 9)}]" for i in range(1, depth + 1)]
    lines += ["jobs:", f"- {{type: job, name: T, id: a, profiles: {{pegasus: {{pmc_task_arguments: *x{depth}}}}}}}"]
    return "\n".join(lines) + "\n"


@pytest.mark.timing
@pytest.mark.parametrize("depth", [6, 9])
def test_alias_bomb_is_a_one_line_error(tmp_path, capsys, depth):
    """The error comes before the aliases are expanded, so within 30 s: a bound that counted only after expanding
    would take far longer (nine to the ninth copies). The file is small and read once; 30 s holds on a loaded
    machine."""
    wf = tmp_path / "workflow.yml"
    wf.write_text(laughs(depth))
    start = time.monotonic()
    code, err = run_cli(capsys, {"workflow": str(wf)}, tmp_path)
    assert code == 2, err
    line = one_line(err)
    assert line.startswith(f"{wf}:") and "aliases" in line and "repeat more than 10,000,000" in line, line
    assert time.monotonic() - start < 30
    assert not (tmp_path / "submit").exists()


def test_alias_bound_scales_with_the_file_and_counts_characters(tmp_path):
    """A small file may not repeat more than the floor; one long string repeated counts its characters."""
    text = "s: &s '" + "x" * 100_000 + "'\nl: [" + ", ".join(["*s"] * 120) + "]\n"
    path = tmp_path / "big.yml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"big.yml:2: aliases \(\*s and those before it\) repeat more than"):
        yamlstream.load(str(path))
    path.write_text("s: &s '" + "x" * 100_000 + "'\nl: [" + ", ".join(["*s"] * 90) + "]\n")
    assert len(yamlstream.load(str(path))["l"]) == 90


def test_aliases_a_generator_writes_still_work(tmp_path):
    """PyYAML writes an anchor and aliases for a dict shared between jobs: that is fine, and planned as written."""
    shared = {"pegasus": {"label": "all"}}
    jobs = [{"type": "job", "name": "T", "id": f"j{i}", "arguments": [], "profiles": shared} for i in range(20)]
    doc = {
        "pegasus": "5.0",
        "name": "gen",
        "jobs": jobs,
        "jobDependencies": [{"id": "j0", "children": [f"j{i}" for i in range(1, 20)]}],
    }
    text = yaml.safe_dump(doc, sort_keys=False)
    assert "&id001" in text and "*id001" in text
    (tmp_path / "workflow.yml").write_text(text)
    tc = transformations("local", {"T": "/bin/echo"})
    tc.write(str(tmp_path / "transformations.yml"))
    res = run_plan(
        tmp_path, {"workflow": str(tmp_path / "workflow.yml"), "tc": str(tmp_path / "transformations.yml")}, "label"
    )
    assert [len(e.cluster.jobs) for e in res.emitted if e.cluster.kind != "data"] == [20]


def test_deep_nesting_is_a_one_line_error(tmp_path, capsys):
    wf = tmp_path / "workflow.yml"
    wf.write_text(
        "pegasus: '5.0'\njobs:\n- type: job\n  name: T\n  id: a\n  arguments: " + "[" * 5000 + "]" * 5000 + "\n"
    )
    code, err = run_cli(capsys, {"workflow": str(wf)}, tmp_path)
    assert code == 2 and one_line(err).startswith(f"{wf}:6: nested deeper than {yamlstream.MAX_DEPTH} levels"), err


def test_nesting_bound_holds_in_catalogs(tmp_path, capsys):
    paths = diamondish(tmp_path)
    Path(paths["tc"]).write_text("transformations: " + "[" * 200 + "]" * 200 + "\n")
    code, err = run_cli(capsys, paths, tmp_path)
    assert code == 2 and "transformations.yml:1: nested deeper than" in one_line(err), err


@pytest.mark.parametrize(
    "text, expected",
    [
        ("? [a, b]\n: c\n", r"k.yml:1: a mapping key must be plain text"),
        ("a: *nowhere\n", r"k.yml:1: alias \*nowhere names no anchor"),
        ("a: [1, 2\n", r"k.yml:\d+: not valid YAML"),
        ("jobs: []\nname: x\njobs: []\n", r"k.yml:3: 'jobs' appears twice in one mapping"),
        ("j:\n  profiles: {}\n  id: a\n  profiles: {}\n", r"k.yml:4: 'profiles' appears twice in one mapping"),
    ],
)
def test_yaml_that_is_not_plain_values(tmp_path, text, expected):
    path = tmp_path / "k.yml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=expected):
        yamlstream.load(str(path))


def test_binary_file_and_empty_workflow(tmp_path, capsys):
    wf = tmp_path / "workflow.yml"
    wf.write_bytes(b"pegasus: '5.0'\nname: \xff\xfe\njobs: []\n")
    code, err = run_cli(capsys, {"workflow": str(wf)}, tmp_path)
    assert code == 2 and one_line(err) == f"{wf}: not valid YAML: not UTF-8 text (byte 21): is this the right file?"
    wf.write_text("pegasus: '5.0'\nname: e\njobs: []\n")
    code, err = run_cli(capsys, {"workflow": str(wf)}, tmp_path)
    assert code == 2 and one_line(err) == f"{wf}: jobs: the workflow has no jobs: nothing to plan"


def _paths_of(node, prefix=()):
    """Every (path, value) in a loaded YAML document, containers included."""
    yield prefix, node
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        yield from _paths_of(child, prefix + (key,))


def _replaced(doc, path, value):
    if not path:
        return value
    out = yaml.safe_load(yaml.safe_dump(doc))
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


@pytest.mark.parametrize("which", ["workflow", "tc", "sc"])
def test_any_value_of_any_type_is_planned_or_a_one_line_error(tmp_path, which):
    """Every node of real Pegasus.api output replaced by a list, a mapping, nothing or a word: never an internal error."""
    wf = api.Workflow("fz", infer_dependencies=False)
    a = api.Job("T", _id="a", namespace="ns", version="1").add_args("-i", api.File("f.in")).add_inputs(api.File("f.in"))
    a.add_profiles(api.Namespace.PEGASUS, key="label", value="x").add_profiles(api.Namespace.ENV, key="A", value="1")
    b = api.Job("T", _id="b", namespace="ns", version="1").add_profiles(api.Namespace.PEGASUS, key="runtime", value=5)
    wf.add_jobs(a, b)
    wf.add_dependency(a, children=[b])
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation(
            "T", namespace="ns", version="1", site="local", pfn="/bin/echo", is_stageable=False
        ).add_profiles(api.Namespace.PEGASUS, key="clusters.size", value=2)
    )
    sc = api.SiteCatalog().add_sites(api.Site("local").add_profiles(api.Namespace.PEGASUS, key="pmc_priority", value=1))
    paths = write(tmp_path, wf, tc, sc)
    original = yaml.safe_load(Path(paths[which]).read_text())
    tried = 0
    for path, _ in _paths_of(original):
        for value in (["x", "y"], {"k": "v"}, None, "word"):
            Path(paths[which]).write_text(yaml.safe_dump(_replaced(original, path, value), sort_keys=False))
            try:
                run_plan(tmp_path, paths, "label,horizontal", force=True)
            except ConfigError as err:
                assert "\n" not in str(err) and str(err).startswith(str(tmp_path)), (path, value, err)
            tried += 1
    assert tried > 40


def test_the_limits_are_documented_as_they_are():
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    assert f"nest at most {yamlstream.MAX_DEPTH} deep" in readme
    assert f"at most {yamlstream.ALIAS_RATIO} times the file's size (at least {yamlstream.ALIAS_FLOOR:,})" in readme


def test_two_jobs_lists_in_one_workflow(tmp_path, capsys):
    paths = diamondish(tmp_path)
    text = Path(paths["workflow"]).read_text()
    Path(paths["workflow"]).write_text(text + "jobs:\n- {type: job, name: T, id: third}\n")
    code, err = run_cli(capsys, paths, tmp_path)
    assert code == 2 and re.search(r"workflow.yml:\d+: 'jobs' appears twice in one mapping", one_line(err)), err


ARGUMENT_LINES = [
    (["-i", "f.a", "-o", "f.b"], "-i f.a -o f.b"),
    ([], ""),
    (["a  b", " c", "d\te"], "a b c d e"),  # whitespace as PMC splits it: one space between words
    (["x ", "", "\u00e9"], "x \u00e9"),
    (["a\u00a0b\u2028c"], "a b c"),  # Unicode spaces and line separators split words too
    (["x", None], "x"),
    ([{"lfn": "f.a"}], "f.a"),
    (['say "hi"', "a\\ b"], 'say hi "a b"'),  # quotes group and a backslash escapes, then each word is quoted
    (["'two words'", "b"], '"two words" b'),
]


@pytest.mark.parametrize(("arguments", "line"), ARGUMENT_LINES)
def test_a_jobs_arguments_become_the_one_command_line_pmc_splits(arguments, line):
    """A job's arguments are kept as the one quoted line the DAG writes, whether plain words (most jobs, joined
    as they are) or words to split and quote; with every other field as its YAML gives it."""
    from pilot.planner.reader import _read_job

    job = _read_job({"type": "job", "name": "step", "id": "ID1", "arguments": arguments}, "wf.yml", 3, {}, {})
    assert (job.id, job.name, job.args_line, job.index, job.yaml_index, job.uses) == ("ID1", "step", line, 3, 3, ())
    assert (job.namespace, job.version, job.profiles, job.metadata, job.stdio) == (None, None, {}, {}, None)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"type": "job", "name": "step", "id": "ID1", "arguments": ["it's", "x"]},
            "jobs[3].arguments: unterminated quote",
        ),
        (
            {"type": "job", "name": "step", "id": "ID1", "arguments": ["a\nb"]},
            "jobs[3].arguments[0]: an argument cannot",
        ),
        ({"type": "job", "name": "step", "id": "ID 1", "arguments": []}, "jobs[3].id: 'ID 1': job ids may use"),
        ({"type": "job", "name": "st ep", "id": "ID1"}, "jobs[3].name: 'st ep': transformation names may use"),
        ({"type": "job", "name": ["step"], "id": "ID1"}, "jobs[3].name"),
        ({"type": "job", "name": "step", "id": "\u00e91"}, "jobs[3].id"),
        ({"type": None, "name": "step", "id": "ID1"}, "jobs[3].type: None: a job's type is job"),
        ({"type": "job", "name": "step"}, "jobs[3]: missing 'id'"),
        (["not", "a", "job"], "jobs[3]"),
    ],
)
def test_a_job_the_reader_refuses_is_named_by_its_yaml_path(raw, message):
    """The checks a million plain jobs pass at the cost of a look-up name the field when one fails."""
    from pilot.planner.reader import _read_job

    with pytest.raises(ConfigError, match=re.escape(f"wf.yml: {message}")):
        _read_job(raw, "wf.yml", 3, {"step": "step"}, {})
