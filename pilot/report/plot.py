"""The timeline PNG: one row per worker slot, grouped by host; one panel per cluster job.

matplotlib is optional (``pip install 'pilot-hpc[plot]'``): ``available()``
says whether it is there, and the CLI prints the text report alone without it.
The Agg backend is used, so no display is needed (batch nodes, CI).
"""

from __future__ import annotations

from enum import IntEnum

from pilot.report.runs import ClusterRun, ReportError

ABORTS = ("walltime", "signal", "ended early")


class Outcome(IntEnum):
    """How a try ended, which decides its bar's style."""

    OK = 0
    FAILED = 1
    KILLED = 2  # ended by a signal


LEGEND_COLUMNS = 4
LABELLED_TRIES = 300  # beyond this many tries in a panel, bars go without task names


def available() -> bool:
    try:
        import matplotlib  # noqa: F401 - imported only to see that it is installed
    except ImportError:
        return False
    return True


def _rows(c: ClusterRun) -> list[tuple[str, int]]:
    return sorted({(a.host, a.slot) for a in c.attempts})


def draw(clusters: list[ClusterRun], numbers: dict, path: str) -> None:
    """Write the timeline of ``clusters`` to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    shown = [c for c in clusters if c.attempts]
    t0 = min(
        [a.start for c in shown for a in c.attempts]
        + [r.submitted for c in shown for r in c.runs if r.submitted is not None]
    )
    txs = sorted({a.transformation for c in shown for a in c.attempts})
    cmap = plt.get_cmap("tab10" if len(txs) <= 10 else "tab20")
    colour = {tx: cmap(i % cmap.N) for i, tx in enumerate(txs)}
    heights = [len(_rows(c)) + (1 if any(r.submitted is not None for r in c.runs) else 0) + 1 for c in shown]
    legend_items = len(txs) + 3
    legend_rows = -(-legend_items // LEGEND_COLUMNS)
    inches = min(40.0, 1.6 + 0.32 * sum(heights) + 0.5 * len(shown) + 0.22 * legend_rows)
    fig, axes = plt.subplots(
        len(shown), 1, sharex=True, squeeze=False, figsize=(11, inches), gridspec_kw={"height_ratios": heights}
    )
    span = max(a.end for c in shown for a in c.attempts) - t0
    for ax, c in zip(axes[:, 0], shown):
        _panel(ax, c, t0, colour, len(shown) > 1, span)
    axes[-1, 0].set_xlabel("seconds since the first " + ("submission" if "end_to_end" in numbers else "task start"))
    handles = [Patch(facecolor=colour[tx], label=tx) for tx in txs]
    handles.append(Patch(facecolor="white", edgecolor="red", hatch="xxx", label="failed try"))
    if any(a.status < 0 for c in shown for a in c.attempts):
        handles.append(Patch(facecolor="white", edgecolor="red", hatch="///", label="killed (signal)"))
    if any(r.submitted is not None for c in shown for r in c.runs):
        handles.append(Patch(facecolor="lightgrey", edgecolor="grey", label="queue wait"))
    # title above, legend below the time axis: long transformation names never cover either
    fig.legend(handles=handles, loc="lower center", fontsize=8, ncol=min(LEGEND_COLUMNS, len(handles)), frameon=False)
    n = numbers
    fig.suptitle(
        f"makespan {_secs(n['makespan'])}, utilisation {n['utilisation']:.0%} "
        f"({n['cpu_utilisation']:.0%} CPU-weighted), critical path {_secs(n['critical_path_length'])}, "
        f"{n['tries']} tries, {n['failures']} failed",
        fontsize=10,
        x=0.01,
        ha="left",
    )
    fig.tight_layout(rect=(0, (0.1 + 0.2 * legend_rows) / inches, 1, 1 - 0.4 / inches))
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:  # a --png path the user chose: one line, not an internal error
        raise ReportError(
            f"{path}: cannot write the timeline: {exc.strerror or exc}; pick another --png " "or pass --no-png"
        ) from None
    finally:
        plt.close(fig)


def _secs(value: float) -> str:
    """Seconds with the digits that matter: 0.004 s, 3.2 s, 1234 s."""
    return f"{value:.3f} s" if value < 1 else (f"{value:.1f} s" if value < 100 else f"{value:.0f} s")


def _panel(ax, c: ClusterRun, t0: float, colour: dict, titled: bool, span: float) -> None:
    rows = _rows(c)
    queue_row = any(r.submitted is not None for r in c.runs)
    index = {key: i + (1 if queue_row else 0) for i, key in enumerate(rows)}
    # One call per row, transformation and outcome: a run of a million tries stays drawable.
    groups: dict[tuple[int, str, Outcome], list[tuple[float, float]]] = {}
    for a in c.attempts:
        outcome = Outcome.KILLED if a.status < 0 else (Outcome.FAILED if a.failed else Outcome.OK)
        groups.setdefault((index[(a.host, a.slot)], a.transformation, outcome), []).append(
            (a.start - t0, max(a.duration, 1e-3))
        )
    for (y, tx, outcome), bars in groups.items():
        style = {"facecolor": colour[tx], "edgecolor": "black", "linewidth": 0.4}
        if outcome is Outcome.KILLED:  # killed at an abort, or by the system
            style.update(edgecolor="red", hatch="///", linewidth=1.0)
        elif outcome is Outcome.FAILED:
            style.update(edgecolor="red", hatch="xxx", linewidth=1.0)
        ax.broken_barh(bars, (y - 0.4, 0.8), **style)
    if len(c.attempts) <= LABELLED_TRIES:
        for a in c.attempts:
            if a.duration > span * 0.06:  # room for the task's name inside its bar
                ax.text(
                    a.start - t0 + a.duration / 2,
                    index[(a.host, a.slot)],
                    a.task,
                    ha="center",
                    va="center",
                    fontsize=6,
                    clip_on=True,
                )
    labels = [f"{host} slot {slot}" for host, slot in rows]
    if queue_row:
        labels.insert(0, "batch queue")
        for i, r in enumerate(c.runs):
            if r.submitted is not None and r.start is not None:
                ax.broken_barh(
                    [(r.submitted - t0, r.start - r.submitted)], (-0.3, 0.6), facecolor="lightgrey", edgecolor="grey"
                )
                ax.text(r.start - t0, 0, f" job {r.job_id or i + 1} starts", va="center", fontsize=7)
    previous = None
    for host, _ in rows:  # a line between hosts
        if previous is not None and host != previous:
            ax.axhline(index[(host, min(s for h, s in rows if h == host))] - 0.5, color="black", linewidth=0.8)
        previous = host
    top = -0.55  # the panel's upper edge (rows run downwards)
    for i, r in enumerate(c.runs):
        if i > 0 and r.start is not None:
            ax.axvline(r.start - t0, color="tab:blue", linestyle=":", linewidth=1.2)
            ax.text(r.start - t0, top, f" resubmitted (run {i + 1})", color="tab:blue", fontsize=7, va="top", ha="left")
        if r.reason in ABORTS and r.end is not None:
            ax.axvline(r.end - t0, color="red", linestyle="--", linewidth=1.2)
            what = (
                "wall-time abort"
                if r.reason == "walltime"
                else ("stopped by a signal" if r.reason == "signal" else "run ended early")
            )
            ax.text(r.end - t0, top, f"{what} ", color="red", fontsize=7, va="top", ha="right")
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_ylim(len(labels) - 0.5, -0.9)
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    if titled:
        ax.set_title(f"cluster {c.name}", fontsize=9, loc="left")
