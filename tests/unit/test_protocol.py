"""Messages between master and workers: they survive the trip over MPI, and ranks start without heavy imports."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from pilot.runtime import protocol

SAMPLES = [
    protocol.Hello(protocol.PROTOCOL_VERSION, 1, "h", 1024, 4, ("0",), 42, 2, 1),
    protocol.HostSetup("/bin/true", 0, "run", False, "k"),
    protocol.HostReady("h", "failed"),
    protocol.RunTask(
        "t", ["/bin/echo", "x"], 2, 10, 2, ("1",), "ID1", [("V", "f")], (("a", "b"),), "tr", "ID1", (0, 1), "p", False
    ),
    protocol.Resume(),
    protocol.TaskResult("t", -9, 1.5, 0.25, [("d", b"\0data")], "why", "/o", "/e"),
    protocol.Recall("t"),
    protocol.Recalled("t"),
    protocol.KillTask("limit"),
    protocol.Shutdown("done"),
    protocol.Bye(3),
    protocol.WorkerFailed(2, "boom", True),
]


def test_every_message_kind_has_a_sample():
    kinds = {type(m) for m in SAMPLES}
    assert kinds == set(protocol.Message.__args__)  # type: ignore[attr-defined]  # a Union's members, at run time


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda m: type(m).__name__)
def test_messages_travel_as_plain_tuples_and_come_back_whole(msg):
    tag, fields = protocol.to_wire(msg)
    assert type(fields) is tuple  # pickled without naming a class
    data = pickle.dumps(fields, pickle.HIGHEST_PROTOCOL)  # as mpi4py sends it
    assert b"pilot" not in data
    back = protocol.from_wire(tag, pickle.loads(data))
    assert type(back) is type(msg)
    assert back._asdict() == msg._asdict()


def test_every_message_kind_has_its_own_tag():
    assert set(protocol.KINDS) == set(protocol.Message.__args__)  # type: ignore[attr-defined]  # a Union's members, at run time
    assert len(protocol.KINDS) == len(set(protocol.KINDS))
    assert protocol.KINDS[0] is protocol.Hello  # another version's Hello is still read as a Hello


@pytest.mark.parametrize(
    "side, absent",
    [
        ("worker", ("dataclasses", "inspect", "hashlib", "psutil", "shutil", "socket")),
        ("master", ("dataclasses", "inspect", "psutil", "shutil", "socket")),
        ("agent", ("dataclasses", "inspect", "psutil", "shutil", "socket")),
    ],
)
def test_a_rank_imports_its_side_without_costly_modules(side, absent):
    # Every rank imports its side before MPI_Init, all of them at once: on a host with
    # fewer cores than ranks each of these costs the start 5 to 20 ms of CPU per rank.
    code = (
        "import sys\n"
        "import pilot.cli.main, pilot.cli.run, pilot.runtime.launch, pilot.runtime.transport, pilot.runtime.watchdog\n"
        f"import pilot.runtime.{side}\n"
        "pilot.cli.run.parse_run_args(['-s', 'x.dag'])\n"
        f"print(' '.join(m for m in {absent!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == []
