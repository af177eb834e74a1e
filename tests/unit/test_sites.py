import subprocess
import sys

import pytest

from pilot.errors import ConfigError
from pilot.sites import KEYS, load_site, read_site_file, shipped_sites

EXPECTED = {
    "local",
    "container",
    "cori-haswell",
    "cori-knl",
    "perlmutter-cpu",
    "perlmutter-gpu",
    "frontier",
    "polaris",
    "aurora",
    "stampede3",
}


def test_every_shipped_site_loads_and_holds_facts_with_sources():
    assert EXPECTED <= set(shipped_sites())
    for name, path in shipped_sites().items():
        site = load_site(name, {"account": "m0000"})
        assert site.nodes * site.ranks_per_node >= 2 and site.walltime_minutes > 0
        raw, _ = read_site_file(path)
        assert set(raw) <= set(KEYS)  # no free-form notes
        if name not in ("local", "container"):
            assert site.sources and all(s.startswith("http") for s in site.sources), name
            assert site.ranks_per_node == site.cores_per_node, name  # one worker per core by default
            assert site.gpus_per_node is not None and site.max_walltime, name


def test_sites_that_need_an_account_say_so():
    for name in ("frontier", "polaris", "aurora"):
        with pytest.raises(ConfigError, match=f"site {name} needs account: pass --set account=VALUE"):
            load_site(name)
    assert load_site("perlmutter-cpu").account is None  # NERSC charges the default project


def test_cori_says_it_is_retired():
    assert "retired" in load_site("cori-haswell").description.lower()


def sites_cli(*args):
    return subprocess.run([sys.executable, "-m", "pilot", "sites", *args], capture_output=True, text=True)


def test_pilot_sites_list_and_show_summary():
    out = sites_cli().stdout
    assert all(name in out for name in EXPECTED)
    show = sites_cli("show", "polaris")
    assert show.returncode == 0, show.stderr
    for piece in (
        "scheduler",
        "pbspro",
        "launcher",
        "mpiexec",
        "32 cores",
        "4 GPUs",
        "512 GiB",
        "max walltime",
        "01:00:00",
        "required",
        "account",
        "https://docs.alcf.anl.gov/polaris/running-jobs/",
    ):
        assert piece in show.stdout, piece
    raw = sites_cli("show", "polaris", "--yaml")
    assert raw.stdout.startswith("# ALCF Polaris") and "scheduler: pbspro" in raw.stdout
    bad = sites_cli("show", "polarys")
    assert bad.returncode == 2 and "did you mean 'polaris'" in bad.stderr


def write(tmp_path, text):
    p = tmp_path / "site.yaml"
    p.write_text("scheduler: slurm\nlauncher: srun\nnodes: 1\nranks_per_node: 2\n" + text)
    return str(p)


@pytest.mark.parametrize(
    "text,message",
    [
        ("walltime: '00:00:00'\n", r"site.yaml:5: walltime: walltime '00:00:00' must be longer than zero"),
        ("walltime: soon\n", r"site.yaml:5: walltime: walltime 'soon' is not HH:MM:SS"),
        ("account: [a, b]\n", r"site.yaml:5: account: expected a single word, got a list"),
        ("required: [account]\nworker_init: [x]\n", None),
        ("required: account\n", r"site.yaml:5: required: expected a list of site keys .*, got 'account'"),
        ("required: 7\n", r"site.yaml:5: required: expected a list of site keys .*, got 7"),
        ("worker_init: module load x\n", r"site.yaml:5: worker_init: expected a list of lines .*, got 'module load x'"),
        ("sources: https://example.org\n", r"site.yaml:5: sources: expected a list of one-line texts"),
        ("exclusive: maybe\n", r"site.yaml:5: exclusive: 'maybe' is not true or false"),
        ("cores_per_node: 2.5\n", r"site.yaml:5: cores_per_node: 2.5 is not a whole number"),
        ("nodes: 2\n", r"site.yaml:5: 'nodes' appears twice in one mapping"),
        ('description: "two\\nlines"\n', r"site.yaml:5: description: 'two\\nlines' spans several lines"),
        (
            "scheduler_options: ['echo hi']\n",
            r"site.yaml:5: scheduler_options: 'echo hi': each entry must be a #SBATCH directive",
        ),
        (
            'scheduler_options: ["#SBATCH --a\\n#SBATCH --b"]\n',
            r"site.yaml:5: scheduler_options: .* spans several lines",
        ),
        ("acount: m1\n", r"site.yaml:5: unknown key 'acount' \(did you mean 'account'\?\)"),
        ("required: [acount]\n", r"site.yaml:5: required: 'acount' is not a site key \(did you mean 'account'\?\)"),
    ],
)
def test_typed_fields_one_line_errors(tmp_path, text, message):
    if message is None:
        load_site(write(tmp_path, text), {"account": "m1"})
        return
    with pytest.raises(ConfigError, match=message) as err:
        load_site(write(tmp_path, text))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "key,value,message",
    [
        ("required", "account", "site site needs account"),
        ("exclusive", "maybe", "--set: exclusive: 'maybe' is not true or false"),
        ("walltime", "00:00:00", "--set: walltime: walltime '00:00:00' must be longer than zero"),
        ("nodes", "-1", "--set: nodes: -1 must be at least 1"),
        ("worker_init", "a\nb", "--set: worker_init: 'a\\\\nb' spans several lines"),
    ],
)
def test_set_values_are_typed(tmp_path, key, value, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_site(write(tmp_path, ""), {key: value})
    assert "\n" not in str(err.value)


def test_set_lists_and_booleans(tmp_path):
    site = load_site(write(tmp_path, ""), {"required": "account,qos", "account": "a", "qos": "q", "exclusive": "yes"})
    assert site.required == ["account", "qos"] and site.exclusive is True


def test_bad_site_file_on_the_command_line_exits_2(tmp_path):
    path = write(tmp_path, "walltime: '00:00:00'\n")
    res = subprocess.run(
        [sys.executable, "-m", "pilot", "plan", "--site", path, "x.yml"], capture_output=True, text=True, cwd=tmp_path
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "site.yaml:5: walltime" in res.stderr


def test_site_cori_plans_for_the_haswell_partition_and_says_it_was_retired(tmp_path, caplog):
    """`pilot submit --site cori`, as the one-line description of pilot says it: Cori's Haswell file, one warning line."""
    with caplog.at_level("WARNING", logger="pilot.site"):
        site = load_site("cori", {"account": "m0000"})
    assert site.path == shipped_sites()["cori-haswell"] and site.name == "cori-haswell"
    (warning,) = [r.message for r in caplog.records]
    assert "retired Cori at the end of May 2023" in warning and "perlmutter-cpu" in warning and "\n" not in warning
    wf = tmp_path / "one.dag"
    wf.write_text("TASK a /bin/true\n")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "plan",
            str(wf),
            "--site",
            "cori",
            "--set",
            "account=m0000",
            "--dir",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("\n") == 1 and "retired Cori" in out.stderr  # the plan is made, with that one line


def test_the_local_site_offers_the_container_runtimes_found_on_path_in_a_fixed_order(tmp_path, monkeypatch):
    for name in ("docker", "apptainer", "podman", "rkt"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert load_site("local").container_runtimes == ["apptainer", "podman", "docker"]
    assert load_site("local", {"container_runtimes": ""}).container_runtimes == []  # named: as named
    assert load_site("local", {"container_runtimes": "docker"}).container_runtimes == ["docker"]
    assert load_site("perlmutter-cpu").container_runtimes == ["shifter"]  # its file's: its nodes are not this machine
