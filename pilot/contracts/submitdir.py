"""``braindump.yml`` and ``<dag>.static.bp``: what pegasus-monitord needs besides dagman.out.

monitord refuses to start without the braindump (and silently populates
nothing when ``planner_arguments`` is missing), and drops every job whose node
has no ``job.info`` line in the static bp. These writers take a parsed DAG, so
a plain PMC DAG can be monitored, and the planner writes the same files.

Each node of the DAG is one job running one task. The task id is the Pegasus
job id from a ``#@`` annotation when there is one, else the node name; the
invocation record the worker writes uses the same id as its ``derivation``.
A node whose annotation names no job of the workflow's (``null``, a data job
pilot plan adds) is a job of its Pegasus type with no task, as Pegasus
writes it.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import time
import uuid
from typing import Any

from pilot import __version__
from pilot.contracts.jobstate import JOBSTATE_FILE
from pilot.dag.lexer import quote_arg
from pilot.dag.model import NO_DAX_ID, Dag, Task
from pilot.errors import ConfigError
from pilot.util.boundedload import CONFIG_BYTES, load_yaml
from pilot.util.safeopen import open_file

REPLAN = "plan the workflow again into a new --dir"


def _q(value: str) -> str:
    """A quoted NetLogger value: only ``"`` is escaped (monitord does not unescape ``\\\\``). A byte that is not
    UTF-8 (a task argument read from a PMC .dag, which passes such bytes through) is shown as U+FFFD: monitord
    reads the file as UTF-8 text, and the value is for people to read, not to run."""
    if value.isascii():
        if '"' not in value:
            return f'"{value}"'  # most values: a plan quotes millions
    else:
        value = value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return '"' + value.replace('"', '\\"') + '"'


def user_name() -> str:
    """The user a braindump and an invocation record name (the uid when the account has no name)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


# The type (number, description) of a job Pegasus adds, by the prefix of the name Pegasus (and pilot plan)
# gives it; the longest prefixes first.
DATA_JOB_TYPES = (
    ("stage_inter_", (5, "inter-site-tx")),
    ("stage_in_", (2, "stage-in-tx")),
    ("stage_out_", (3, "stage-out-tx")),
    ("register_", (4, "registration")),
    ("create_dir_", (6, "create-dir")),
    ("clean_up_", (8, "cleanup")),
    ("cleanup_", (8, "cleanup")),
    ("chmod_", (9, "chmod")),
)


def task_id(task: Task) -> str:
    dax_id = task.dax_id
    return task.name if dax_id is None or dax_id == NO_DAX_ID else dax_id


def data_job_type(name: str) -> tuple[int, str]:
    """A data job's Pegasus type, from its name (``unassigned``, Pegasus' type 0, for a name of no known kind)."""
    return next((kind for prefix, kind in DATA_JOB_TYPES if name.startswith(prefix)), (0, "unassigned"))


def transformation(task: Task) -> str:
    return task.transformation or task.name


def write_static_bp(dag: Dag, path: str, wf_uuid: str, now: float | None = None) -> None:
    ts = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now or time.time()))
    tasks = list(dag)
    ids = [_q(task_id(t)) for t in tasks]
    names = [_q(t.name) for t in tasks]
    args = [_q(" ".join(quote_arg(a) for a in t.argv[1:])) for t in tasks]
    where = {t.name: k for k, t in enumerate(tasks)}
    # A data job (NO_DAX_ID) is a job of its own type with no task, as Pegasus writes it: the workflow's tasks
    # are its own jobs, which pegasus-statistics counts.
    own = [t.dax_id != NO_DAX_ID for t in tasks]
    out = []
    for k, t in enumerate(tasks):
        if own[k]:
            out.append(
                f'ts={ts} event=task.info xwf.id={wf_uuid} task.id={ids[k]} type="1" type_desc="compute" '
                f"transformation={_q(transformation(t))} argv={args[k]}\n"
            )
    for k, t in enumerate(tasks):
        for c in t.children:
            if own[k] and own[where[c.name]]:
                out.append(
                    f"ts={ts} event=task.edge xwf.id={wf_uuid} parent.task.id={ids[k]} "
                    f"child.task.id={ids[where[c.name]]}\n"
                )
    for k, t in enumerate(tasks):
        kind = (1, "compute") if own[k] else data_job_type(t.name)
        out.append(
            f'ts={ts} event=job.info xwf.id={wf_uuid} job.id={names[k]} submit_file={_q(t.name + ".sub")} '
            f'type="{kind[0]}" type_desc="{kind[1]}" clustered="0" max_retries={_q(str(t.tries or 1))} '
            f"executable={_q(t.argv[0])} argv={args[k]} task_count=\"{int(own[k])}\"\n"
        )
    for k in range(len(tasks)):
        if own[k]:
            out.append(f"ts={ts} event=wf.map.task_job xwf.id={wf_uuid} job.id={names[k]} task.id={ids[k]}\n")
    for k, t in enumerate(tasks):
        for c in t.children:
            out.append(
                f"ts={ts} event=job.edge xwf.id={wf_uuid} parent.job.id={names[k]} "
                f"child.job.id={names[where[c.name]]}\n"
            )
    with open_file(path, "w", encoding="utf-8") as fh:
        fh.write("".join(out))


def write_braindump(
    path: str,
    dag_file: str,
    submit_dir: str,
    wf_uuid: str,
    label: str,
    planner_arguments: str = "",
    notify: str | None = None,
    properties: str = "pegasus.properties",
) -> None:
    """Only keys Pegasus' Braindump knows (an unknown key is a TypeError in monitord). ``properties``: the
    properties file of the plan, which monitord and pegasus-analyzer read (they warn when it is missing)."""
    data = {
        "user": user_name(),
        "grid_dn": None,
        "submit_hostname": socket.gethostname(),
        "root_wf_uuid": wf_uuid,
        "wf_uuid": wf_uuid,
        "dax": dag_file,
        "dax_label": label,
        "dax_index": "0",
        "dax_version": "5.0.0",
        "pegasus_wf_name": f"{label}-0",
        "timestamp": time.strftime("%Y%m%dT%H%M%S%z"),
        "basedir": os.path.dirname(submit_dir),
        "submit_dir": submit_dir,
        "planner": "pilot",
        "planner_version": __version__,
        "planner_arguments": planner_arguments,
        "jsd": JOBSTATE_FILE,
        "rundir": os.path.basename(submit_dir),
        "vogroup": "pegasus",
        "uses_pmc": True,
        "properties": properties,
        "dag": os.path.basename(dag_file),
        "notify": notify or os.path.splitext(os.path.basename(dag_file))[0] + ".notify",
        "type": "dag",
    }
    # JSON scalars are YAML; yaml.safe_dump costs a millisecond a file, and a
    # big plan writes one braindump per cluster.
    lines = [f"{k}: {'null' if v is None else json.dumps(v)}" for k, v in data.items()]
    with open_file(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def load_braindump(path: str) -> dict[str, Any]:
    """A braindump.yml (the root one or a cluster's) as pegasus-monitord reads it, bounded (pilot.util.boundedload):
    a mapping of keys to single values, or one line saying what it is instead. FileNotFoundError when there is none."""
    data = load_yaml(path, CONFIG_BYTES, REPLAN)
    if not isinstance(data, dict) or any(
        not isinstance(k, str) or isinstance(v, (dict, list)) for k, v in data.items()
    ):
        raise ConfigError(f"{path}: not a braindump (a mapping of keys to single values); {REPLAN}")
    return data


def write_monitoring_files(
    dag: Dag | None,
    dag_file: str,
    wf_uuid: str | None = None,
    planner_arguments: str = "",
    notify: str | None = None,
    properties: str = "pegasus.properties",
) -> str:
    """Write braindump.yml and the static bp next to ``dag_file``; return the workflow uuid. With ``dag`` None,
    the braindump only: a planner's cluster whose tasks the submit directory's root static.bp maps already.

    ``notify`` names an (empty) notifications file that live monitord opens;
    by default ``<dag>.notify`` next to the DAG is created. A planner writing
    many clusters shares one.
    """
    submit_dir = os.path.dirname(os.path.abspath(dag_file))
    wf_uuid = wf_uuid or str(uuid.uuid4())
    base = os.path.splitext(os.path.basename(dag_file))[0]
    if dag is not None:
        write_static_bp(dag, os.path.join(submit_dir, base + ".static.bp"), wf_uuid)
    if notify is None:
        notify = os.path.join(submit_dir, base + ".notify")
        if not os.path.exists(notify):
            open_file(notify, "w").close()
    write_braindump(
        os.path.join(submit_dir, "braindump.yml"),
        os.path.abspath(dag_file),
        submit_dir,
        wf_uuid,
        base,
        planner_arguments,
        notify,
        properties,
    )
    return wf_uuid
