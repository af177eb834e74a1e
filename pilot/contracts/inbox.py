"""A long-lived pilot run's inbox: the directory through which ``pilot submit`` feeds it clusters.

In pilot-job mode each pilot job runs one ``pilot run --inbox DIR`` on all of
its nodes; the driver feeds it each ready cluster by writing a request here
(atomically: the run sees a whole request or none), and learns how the
cluster's run ended from a done file the run writes back. The directory lives
on the file system the workflow lives on, which the driver and every node of
the pilot job already share: no new service, no port, nothing to secure beyond
the submit directory itself. Files, all in the inbox:

- ``<id>.request``: one JSON object ``{"format": 1, "dag": "/abs/c.dag",
  "args": ["--max-wall-time", "9", "-t", "2", ...], "out": "/abs/c.block.out",
  "err": "/abs/c.block.err", "hosts": ["n2", "n3"], "sent": 1796000000123456789}``: the cluster's DAG,
  the ``pilot run`` options
  its own run would get (the run-wide ones: tries, wall time, logs, -o/-e;
  host and worker options are the pilot run's own) and the files its job
  output and its log lines go to, and (``hosts``, or null) the whole nodes
  of the pilot job a cluster of several nodes holds: its tasks run there
  alone, the other clusters' elsewhere; ``sent``: when it was written (ns since
  the epoch), the order the run takes requests in (a file's modification time
  ticks coarsely, every few milliseconds, and the requests of one pass of the
  driver would otherwise be taken in the directory's order). The run removes
  it once it took it.
- ``<id>.cancel``: (empty) end that cluster's run now (its tasks are killed, its
  result says ``signal``), as a cancel of its own batch job would.
- ``done/<id>.done``: the cluster's exit status, as its own ``pilot run``
  would exit; its ``<dag>.result`` says how it ended, as in per-cluster mode.
  In a directory of their own: the run reads the inbox every few
  milliseconds, and a done file per cluster ever fed would make each read
  longer.
- ``up``: (empty, written by the run) its workers are up and it takes
  requests: a run that ends without it died at start, and the driver waits
  longer before each replacement (``pilot.submit.backoff``).
- ``stop``: (empty) end the pilot run: no new cluster is taken, the running
  ones end as after SIGTERM and resume elsewhere from their rescue logs.

``<id>`` is the cluster's job name: letters, digits, ``_``, ``-`` and ``.``.

Each file is written whole (a temporary name, then a rename) and not fsynced:
these are messages between two live processes, each file lives no longer
than the run that reads it, and the cluster's lasting record is its
``<dag>.result`` and rescue log; two fsyncs a message would cost more than
the rest of the exchange.
"""

import json
import os
import time
from typing import NamedTuple

from pilot.errors import ConfigError
from pilot.util.atomic import write_atomic

REQUEST_SUFFIX = ".request"
DONE_SUFFIX = ".done"
DONE_DIR = "done"
CANCEL_SUFFIX = ".cancel"
STOP_FILE = "stop"
UP_FILE = "up"
MAX_REQUEST_BYTES = 1 << 16
_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


class Request(NamedTuple):
    """One cluster fed to a running pilot run."""

    id: str
    dag: str  # absolute
    args: list[str]  # pilot run options, without the DAG
    out: str | None = None  # where the run's job output (its [cluster-summary] record) goes
    err: str | None = None  # where its log lines go too (its job stderr)
    hosts: list[str] | None = None  # the hosts it holds whole (None: it shares them all)


def _message(path: str, text: str) -> None:
    """Write one of the inbox's files: whole or not at all, not fsynced (see above)."""
    write_atomic(path, text, durable=False)


def _checked_id(job_id: str) -> str:
    if not job_id or not set(job_id) <= _ID_CHARS or job_id.startswith("."):
        raise ValueError(f"inbox request id {job_id!r}: letters, digits, _, - and . only")
    return job_id


def write_request(inbox: str, req: Request) -> str:
    """Feed ``req`` to the run reading ``inbox``; the request's path."""
    path = os.path.join(inbox, _checked_id(req.id) + REQUEST_SUFFIX)
    _message(
        path,
        json.dumps(
            {
                "format": 1,
                "dag": os.path.abspath(req.dag),
                "args": list(req.args),
                "out": req.out,
                "err": req.err,
                "hosts": req.hosts,
                "sent": time.time_ns(),
            }
        )
        + "\n",
    )
    return path


class Look(NamedTuple):
    """What one look at the inbox found."""

    requests: list[
        Request | tuple[str, str]
    ]  # Request, or (id, why) for one that cannot be read: the run answers it with a failed done file
    cancels: set[str]  # ids with a cancel file
    stop: bool


def look(inbox: str) -> Look:
    """One pass over ``inbox`` (one directory read): the requests waiting, oldest first, each removed as it is
    read; the cancels; whether the run is to stop."""
    from pilot.util.boundedload import load_json  # here: the master reads requests, the driver only writes them

    try:
        with os.scandir(inbox) as it:
            entries = list(it)
    except FileNotFoundError:
        return Look([], set(), False)
    cancels = {e.name[: -len(CANCEL_SUFFIX)] for e in entries if e.name.endswith(CANCEL_SUFFIX)}
    stop = any(e.name == STOP_FILE for e in entries)
    waiting = [e for e in entries if e.name.endswith(REQUEST_SUFFIX)]
    if not waiting:
        return Look([], cancels, stop)
    read: list[tuple[int, Request | tuple[str, str]]] = []
    for entry in waiting:
        job_id = entry.name[: -len(REQUEST_SUFFIX)]
        try:
            raw = load_json(entry.path, MAX_REQUEST_BYTES)
            dag, args, dest, err, hosts = (raw.get(k) for k in ("dag", "args", "out", "err", "hosts"))
            if (
                not isinstance(dag, str)
                or not os.path.isabs(dag)
                or not isinstance(args, list)
                or not all(isinstance(a, str) for a in args)
                or not all(p is None or isinstance(p, str) for p in (dest, err))
                or not (hosts is None or isinstance(hosts, list) and all(isinstance(h, str) for h in hosts))
            ):
                raise ConfigError(f"{entry.path}: not an inbox request (dag, args, out, err, hosts)")
            sent = raw.get("sent")
            if not isinstance(sent, int):  # written by hand: its file's time
                sent = entry.stat().st_mtime_ns
            read.append((sent, Request(job_id, dag, args, dest, err, hosts)))
        except (ConfigError, OSError, AttributeError) as exc:
            read.append((0, (job_id, str(exc))))
        try:
            os.unlink(entry.path)
        except FileNotFoundError:
            pass
    read.sort(key=lambda r: r[0])
    requests = [r for _, r in read]
    return Look(requests, cancels, stop)


def write_cancel(inbox: str, job_id: str) -> None:
    _message(os.path.join(inbox, _checked_id(job_id) + CANCEL_SUFFIX), "")


def _done_path(inbox: str, job_id: str) -> str:
    return os.path.join(inbox, DONE_DIR, job_id + DONE_SUFFIX)


def write_done(inbox: str, job_id: str, exit_code: int) -> None:
    os.makedirs(os.path.join(inbox, DONE_DIR), exist_ok=True)
    _message(_done_path(inbox, job_id), f"{exit_code}\n")


def read_done(inbox: str, job_id: str) -> int | None:
    """The cluster's exit status once its run ended in the pilot run; None while it runs (or never got there)."""
    try:
        with open(_done_path(inbox, job_id), encoding="utf-8") as fh:
            text = fh.read(64).strip()
    except FileNotFoundError:
        return None
    return int(text) if text.lstrip("-").isdigit() else 1


def clear(inbox: str, job_id: str) -> None:
    """Forget an earlier attempt's files of ``job_id`` (its done file would end the next attempt at once)."""
    for path in (
        _done_path(inbox, job_id),
        *(os.path.join(inbox, job_id + s) for s in (CANCEL_SUFFIX, REQUEST_SUFFIX)),
    ):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def write_stop(inbox: str) -> None:
    _message(os.path.join(inbox, STOP_FILE), "")


def write_up(inbox: str) -> None:
    _message(os.path.join(inbox, UP_FILE), "")


def is_up(inbox: str) -> bool:
    """Whether the run reading ``inbox`` got its workers up (it may have ended since)."""
    return os.path.exists(os.path.join(inbox, UP_FILE))
