"""Aligned text columns and counted nouns, as ``pilot plan``, ``pilot status``, ``pilot sites`` and ``pilot report`` print them."""

from __future__ import annotations

from collections.abc import Collection, Sequence


def table(rows: Sequence[Sequence[str]], right: Collection[int] = (), indent: str = "", sep: str = "  ") -> list[str]:
    """One line per row, columns ``sep`` (two spaces) apart and as wide as their widest cell.

    Columns whose index is in ``right`` are right-aligned (numbers); trailing
    blanks are cut so that a short last cell leaves no padding behind.
    """
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        indent
        + sep.join(
            cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths))
        ).rstrip()
        for r in rows
    ]


def plural(n: int, noun: str) -> str:
    """``1 task``, ``2 tasks``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
