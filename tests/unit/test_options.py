import argparse

import pytest

from pilot.cli.run import parse_run_args
from pilot.errors import UsageError


def test_every_pmc_option():
    o = parse_run_args(
        [
            "-v",
            "-v",
            "-q",
            "-s",
            "-o",
            "out",
            "-e",
            "err",
            "-m",
            "3",
            "-t",
            "2",
            "-n",
            "-r",
            "r.log",
            "--host-script",
            "hs.sh",
            "--host-memory",
            "2048",
            "--host-cpus",
            "8",
            "--host-gpus",
            "2",
            "--strict-limits",
            "--max-wall-time",
            "0.5",
            "--per-task-stdio",
            "--jobstate-log",
            "--monitord-hack",
            "--no-resource-log",
            "--no-sleep-on-recv",
            "--maxfds",
            "16",
            "--keep-affinity",
            "wf.dag",
        ],
        env={},
    )
    assert o.dag == "wf.dag" and o.verbosity == 1 and o.skip_rescue
    assert (o.stdout, o.stderr, o.max_failures, o.tries, o.nolock, o.rescue_path) == ("out", "err", 3, 2, True, "r.log")
    assert (o.host_script, o.host_memory, o.host_cpus, o.host_gpus) == ("hs.sh", 2048, 8, 2)
    assert o.strict_limits and o.max_wall_time == 0.5 and o.per_task_stdio and o.jobstate_log and o.monitord_hack
    assert not o.resource_log and not o.sleep_on_recv and o.maxfds == 16 and o.keep_affinity


def test_long_forms_and_defaults():
    o = parse_run_args(
        [
            "--verbose",
            "--skip-rescue",
            "--stdout",
            "o",
            "--stderr",
            "e",
            "--max-failures",
            "1",
            "--tries",
            "4",
            "--nolock",
            "--rescue",
            "x",
            "wf.dag",
        ],
        env={},
    )
    assert o.verbosity == 1 and o.skip_rescue and o.stdout == "o" and o.tries == 4 and o.rescue_path == "x"
    d = parse_run_args(["wf.dag"], env={})  # the parser is built once per program: nothing of the last parse stays
    assert (
        d.rescue_path == "wf.dag.rescue" and d.tries == 1 and d.max_failures == 0 and d.resource_log and d.sleep_on_recv
    )
    assert d.verbosity == 0 and not d.skip_rescue and not d.nolock and d.stdout is None


def test_monitord_hack_implies_per_task_stdio():
    assert parse_run_args(["--monitord-hack", "x.dag"], env={}).per_task_stdio


def test_environment_aliases_and_precedence():
    env = {
        "PMC_HOST_SCRIPT": "/s.sh",
        "PMC_HOST_MEMORY": "100",
        "PMC_HOST_CPUS": "3",
        "PMC_MAX_WALL_TIME": "2.5",
        "PMC_HOST_GPUS": "1",
    }
    o = parse_run_args(["x.dag"], env=env)
    assert (o.host_script, o.host_memory, o.host_cpus, o.max_wall_time, o.host_gpus) == ("/s.sh", 100, 3, 2.5, 1)
    o = parse_run_args(["--host-cpus", "7", "--max-wall-time", "1", "x.dag"], env=env)
    assert o.host_cpus == 7 and o.max_wall_time == 1.0


@pytest.mark.parametrize(
    "argv,env,fragment",
    [
        (["-t", "0", "x.dag"], {}, "-t/--tries: '0' must be at least 1"),
        (["-m", "-1", "x.dag"], {}, "must be at least 0"),
        (["--max-wall-time", "soon", "x.dag"], {}, "'soon' is not a number of minutes (0: no limit)"),
        (["--host-cpus", "lots", "x.dag"], {}, "'lots' is not a whole number (0: detect the host's own)"),
        (["--host-memory", "-5", "x.dag"], {}, "'-5' is not a whole number"),
        (["--maxfds", "0", "x.dag"], {}, "must be at least 1"),
        (["--maxfds", "100000000", "x.dag"], {}, "more than RLIMIT_NOFILE"),
        (["--frobnicate", "x.dag"], {}, "unrecognized arguments: --frobnicate"),
        ([], {}, "the following arguments are required"),
        (["x.dag"], {"PMC_HOST_MEMORY": "much"}, "invalid value for PMC_HOST_MEMORY"),
        (["--max-crashes", "0", "x.dag"], {}, "must be at least 1"),
        (["--max-crashes", "-2", "x.dag"], {}, "must be at least 1"),
        (["--max-crashes", "two", "x.dag"], {}, "is not an integer"),
        (["x.dag"], {"PMC_MAX_CRASHES": "0"}, "invalid value for PMC_MAX_CRASHES"),
    ],
)
def test_bad_options_are_one_line_usage_errors(argv, env, fragment):
    with pytest.raises(UsageError) as info:
        parse_run_args(argv, env=env)
    assert fragment in str(info.value) and "\n" not in str(info.value)
    assert info.value.exit_code == 2


def test_tries_and_max_failures_read_the_leading_integer_like_pmc():
    o = parse_run_args(["-t", "2.5", "-m", "1x", "wf.dag"], env={})
    assert (o.tries, o.max_failures) == (2, 1)
    for bad in (["-t", "0"], ["-t", "x"], ["-m", "-1"]):
        with pytest.raises(UsageError):
            parse_run_args([*bad, "wf.dag"], env={})


def test_affinity_and_task_process_options():
    o = parse_run_args(["--set-affinity", "--keep-task-processes", "wf.dag"], env={})
    assert o.set_affinity and o.keep_task_processes
    with pytest.raises(UsageError, match="--host-cpus is not compatible with --set-affinity"):
        parse_run_args(["--set-affinity", "--host-cpus", "2", "wf.dag"], env={})


def test_help_width_follows_columns_as_shutil_does(monkeypatch):
    import shutil

    from pilot.util.cmdline import terminal_columns

    for value in ("57", "0", "bad", None):
        if value is None:
            monkeypatch.delenv("COLUMNS", raising=False)
        else:
            monkeypatch.setenv("COLUMNS", value)
        assert terminal_columns() == shutil.get_terminal_size().columns


@pytest.mark.parametrize(
    "argv,env,expected",
    [
        # Pegasus' planner writes --max-wall-time 0 for a clustered job of 2-59 s: PMC reads 0 (or less) as no limit
        (["--max-wall-time", "0"], {}, {"max_wall_time": None}),
        (["--max-wall-time", "-3"], {}, {"max_wall_time": None}),
        ([], {"PMC_MAX_WALL_TIME": "0"}, {"max_wall_time": None}),
        (["--max-wall-time", "2.5min"], {}, {"max_wall_time": 2.5}),  # sscanf's %lf: the number at the start
        # 0 CPUs or MB: detect the host's own; a fraction or a unit: the whole number at the start (sscanf's %u)
        (["--host-cpus", "0"], {"PMC_HOST_CPUS": "4"}, {"host_cpus": None}),
        ([], {"PMC_HOST_CPUS": "0"}, {"host_cpus": None}),
        (["--host-cpus", "2.5"], {}, {"host_cpus": 2}),
        ([], {"PMC_HOST_MEMORY": "100MB"}, {"host_memory": 100}),
        (["--host-memory", "0"], {}, {"host_memory": None}),
        # -o stdout / -e stderr: PMC's names for its own streams, not files
        (["-o", "stdout", "-e", "stderr"], {}, {"stdout": None, "stderr": None}),
        (["-o", "out.txt", "-e", "err.txt"], {}, {"stdout": "out.txt", "stderr": "err.txt"}),
    ],
)
def test_values_as_pegasus_mpi_cluster_reads_them(argv, env, expected):
    o = parse_run_args([*argv, "x.dag"], env=env)
    assert {k: getattr(o, k) for k in expected} == expected


def test_max_crashes_from_the_command_line_the_environment_or_the_default():
    assert parse_run_args(["x.dag"], env={}).max_crashes == 2
    assert parse_run_args(["x.dag"], env={"PMC_MAX_CRASHES": "1"}).max_crashes == 1
    assert parse_run_args(["--max-crashes", "5", "x.dag"], env={"PMC_MAX_CRASHES": "1"}).max_crashes == 5


def test_every_option_of_the_parser_says_whose_it_is_where_clusters_are_fed_to_a_pilot_jobs_run():
    """An option added to pilot run without its side would be lost, or wrongly kept, when a cluster is fed to a
    pilot job's long-lived run: the parser declares each, and the feed derives the worker options from it."""
    from pilot.cli.run import OptionSide, OptionSides, build_parser

    sides = OptionSides()
    parser = build_parser("pilot run", sides)
    unclassified = [
        a.option_strings or [a.dest]
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction) and not all(n in sides.side for n in a.option_strings or [a.dest])
    ]
    assert unclassified == []
    workers = sorted(n for n, s in sides.side.items() if s is OptionSide.WORKER and n.startswith("--"))
    assert "--containers" in workers and "--host-cpus" in workers and "--max-wall-time" not in workers
    assert sides.side["--inbox"] is OptionSide.RUN and sides.side["dag"] is OptionSide.CLUSTER


def test_the_feed_keeps_a_clusters_worker_options_with_their_values_and_nothing_else():
    from pilot.submit.feed import worker_args

    line = [
        "-o",
        "--keep-task-dirs",
        "--tries=3",
        "--host-memory=512",
        "--containers",
        "once",
        "-v",
        "--monitord-hack",
        "--local-scratch",
        "/l",
        "--task-files",
        "c.taskfiles",
        "--set-affinity",
    ]
    # -o's value is a file name, even one spelled as an option; --monitord-hack gives the workers per-task stdio
    assert worker_args(line) == [
        "--host-memory=512",
        "--containers",
        "once",
        "--per-task-stdio",
        "--local-scratch",
        "/l",
        "--set-affinity",
    ]
