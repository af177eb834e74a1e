"""The numbers of a run: makespan, utilisation, critical path, per-transformation runtimes, tries.

Definitions (the README repeats them):

- makespan: first task start to last task end;
- available slot-seconds: per pilot run, the worker slots times the run's span
  (its first task start to its last task end); busy slot-seconds: the sum of
  all tries' durations; utilisation = busy / available. CPU-weighted: the sum
  of duration x requested CPUs over the hosts' CPUs times each run's span;
- critical path: the longest chain of dependent tasks, a task weighing the sum
  of its tries' durations (a retry lengthens the chain it is on). Across
  clusters, a cluster's tasks all precede every task of its child clusters;
- per transformation (the ``#@`` annotation's, else the executable's name):
  tasks, tries, failed tries, mean / p95 (nearest rank) / total duration of tries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pilot.dag.cycles import topological_order
from pilot.report.runs import Attempt, ClusterRun
from pilot.util.graphs import longest_paths
from pilot.util.tables import plural, table


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)] if ordered else 0.0


@dataclass
class RunSpan:
    start: float
    end: float
    slots: int
    cpus: int


def run_spans(c: ClusterRun) -> list[RunSpan]:
    """Each pilot run's span of task activity, with its slots and CPUs."""
    starts = sorted(r.start for r in c.runs if r.start is not None)
    groups: list[list[Attempt]] = [[] for _ in range(max(1, len(starts)))]
    for a in c.attempts:
        k = 0
        for i, s in enumerate(starts):
            if a.start >= s:
                k = i
        groups[k].append(a)
    spans = []
    for group in groups:
        if not group:
            continue
        slots_seen = {(a.host, a.slot) for a in group}
        slots = sum(s for s, _ in c.hosts.values()) if c.hosts else len(slots_seen)
        cpus = (
            sum(cp for _, cp in c.hosts.values())
            if c.hosts
            else sum(max(a.cpus for a in group if (a.host, a.slot) == hs) for hs in slots_seen)
        )
        spans.append(RunSpan(min(a.start for a in group), max(a.end for a in group), max(slots, len(slots_seen)), cpus))
    return spans


def critical_path(clusters: list[ClusterRun]) -> tuple[list[str], float]:
    """Longest chain of task durations; names are ``cluster/task`` when there are several clusters.

    The graph it is found in has the tasks and, per cluster, an entry node after its parent clusters' end nodes
    and an end node after its entry and all its tasks (both weightless): every task of a cluster precedes every
    task of its child clusters. Ties go to a task's own parents, then its cluster's entry; a cluster's end to its
    entry, then its tasks in order."""
    weight: dict[tuple[str, str], float] = {}
    for c in clusters:
        for a in c.attempts:
            key = (c.name, a.task)
            weight[key] = weight.get(key, 0.0) + a.duration
    nodes: list[tuple[str, str] | None] = []  # (cluster, task) for a task; None for a cluster's entry or end
    weights: list[float] = []
    parents: list[list[int]] = []
    ends: dict[str, int] = {}  # cluster -> its end node
    for c in clusters:  # clusters.yml lists parents first
        entry = len(nodes)
        nodes.append(None)
        weights.append(0.0)
        parents.append([ends[p] for p in c.parents if p in ends])
        at: dict[str, int] = {}
        for name in topological_order(c.dag):
            at[name] = len(nodes)
            nodes.append((c.name, name))
            weights.append(weight.get((c.name, name), 0.0))
            parents.append([*(at[p.name] for p in c.dag[name].parents), entry])
        ends[c.name] = len(nodes)
        nodes.append(None)
        weights.append(0.0)
        parents.append([entry, *at.values()])
    tasks = [k for k, node in enumerate(nodes) if node is not None]
    if not tasks:
        return [], 0.0
    paths = longest_paths(weights, parents.__getitem__)
    last = max(tasks, key=paths.finish.__getitem__)
    several = len({c.name for c in clusters}) > 1
    chain = [node for node in map(nodes.__getitem__, paths.path(last)) if node is not None and weight.get(node)]
    return [f"{cl}/{t}" if several else t for cl, t in chain], paths.finish[last]


def summarize(clusters: list[ClusterRun]) -> dict:
    """The report's numbers as one JSON-ready dict (``pilot report --json`` prints it)."""
    ran = [c for c in clusters if c.attempts]
    attempts = [a for c in ran for a in c.attempts]
    spans = [s for c in ran for s in run_spans(c)]
    busy = sum(a.duration for a in attempts)
    busy_cpu = sum(a.duration * a.cpus for a in attempts)
    available = sum(s.slots * (s.end - s.start) for s in spans)
    available_cpu = sum(s.cpus * (s.end - s.start) for s in spans)
    start = min(a.start for a in attempts)
    end = max(a.end for a in attempts)
    path, length = critical_path(ran)
    per_tx: dict[str, list[Attempt]] = {}
    for a in attempts:
        per_tx.setdefault(a.transformation, []).append(a)
    transformations = {}
    for tx in sorted(per_tx):
        group = per_tx[tx]
        durations = [a.duration for a in group]
        transformations[tx] = {
            "tasks": len({a.task for a in group}),
            "tries": len(group),
            "failures": sum(a.failed for a in group),
            "mean": sum(durations) / len(durations),
            "p95": p95(durations),
            "total": sum(durations),
        }
    tasks = sum(len(c.dag) for c in clusters)
    succeeded = {(c.name, a.task) for c in ran for a in c.attempts if not a.failed}
    out = {
        "makespan": end - start,
        "start": start,
        "end": end,
        "utilisation": busy / available if available > 0 else 0.0,
        "cpu_utilisation": busy_cpu / available_cpu if available_cpu > 0 else 0.0,
        "busy_slot_seconds": busy,
        "available_slot_seconds": available,
        "critical_path": path,
        "critical_path_length": length,
        "tasks": tasks,
        "succeeded": len(succeeded),
        "tries": len(attempts),
        "failures": sum(a.failed for a in attempts),
        "killed": sum(a.status < 0 for a in attempts),
        "transformations": transformations,
        "clusters": [_cluster_numbers(c) for c in clusters],
    }
    submitted = [r.submitted for c in clusters for r in c.runs if r.submitted is not None]
    if submitted:
        out["end_to_end"] = end - min(submitted)
    return out


def _cluster_numbers(c: ClusterRun) -> dict:
    spans = run_spans(c)
    out: dict = {
        "name": c.name,
        "dag": c.dag_path,
        "tasks": len(c.dag),
        "tries": len(c.attempts),
        "failures": sum(a.failed for a in c.attempts),
    }
    if c.attempts:
        out["makespan"] = max(a.end for a in c.attempts) - min(a.start for a in c.attempts)
        available = sum(s.slots * (s.end - s.start) for s in spans)
        out["utilisation"] = sum(a.duration for a in c.attempts) / available if available > 0 else 0.0
        out["slots"] = max(s.slots for s in spans)
    out["runs"] = [
        {
            "start": r.start,
            "end": r.end,
            "reason": r.reason,
            "job_id": r.job_id,
            "submitted": r.submitted,
            "queue_wait": (r.start - r.submitted) if r.start is not None and r.submitted is not None else None,
        }
        for r in c.runs
    ]
    return out


def text(numbers: dict) -> list[str]:
    """The numbers as lines for a terminal."""
    n = numbers
    out = [
        f"makespan: {n['makespan']:.3f} s"
        + (f" (end to end with queue wait: {n['end_to_end']:.3f} s)" if "end_to_end" in n else ""),
        f"utilisation: {n['utilisation']:.1%} of slot-seconds ({n['busy_slot_seconds']:.3f} busy / "
        f"{n['available_slot_seconds']:.3f} available), {n['cpu_utilisation']:.1%} CPU-weighted",
        f"critical path: {n['critical_path_length']:.3f} s: "
        + " -> ".join(n["critical_path"][:12])
        + (f" ... ({len(n['critical_path'])} tasks)" if len(n["critical_path"]) > 12 else ""),
        f"tasks: {n['tasks']}, succeeded {n['succeeded']}; tries: {n['tries']}, failed {n['failures']}"
        + (f" ({n['killed']} killed by a signal)" if n["killed"] else ""),
    ]
    rows = [("transformation", "tasks", "tries", "failed", "mean s", "p95 s", "total s")]
    for tx, s in n["transformations"].items():
        rows.append(
            (
                tx,
                str(s["tasks"]),
                str(s["tries"]),
                str(s["failures"]),
                f"{s['mean']:.3f}",
                f"{s['p95']:.3f}",
                f"{s['total']:.3f}",
            )
        )
    out += table(rows, right=range(1, len(rows[0])))
    if len(n["clusters"]) > 1 or any(len(c["runs"]) > 1 for c in n["clusters"]):
        for c in n["clusters"]:
            runs = ", ".join(_run_text(r) for r in c["runs"]) or "not run"
            span = f"{c['makespan']:.3f} s on {plural(c['slots'], 'slot')}" if "makespan" in c else "no tasks ran"
            out.append(f"cluster {c['name']}: {span}; runs: {runs}")
    return out


def _run_text(r: dict) -> str:
    parts = [r["reason"] or "running"]
    if r["queue_wait"] is not None:
        parts.append(f"queued {r['queue_wait']:.1f} s")
    if r["job_id"]:
        parts.append(f"job {r['job_id']}")
    return " ".join(parts)
