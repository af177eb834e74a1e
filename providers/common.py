"""Parsl settings every provider takes."""

from __future__ import annotations

from typing import Any

from providers.inputs import Site


def block_kwargs(site: Site) -> dict[str, Any]:
    """pilot submits blocks itself, one per cluster; SimpleLauncher because the script starts its one MPI job."""
    from parsl.launchers import SimpleLauncher

    return {
        "cmd_timeout": site.cmd_timeout,
        "launcher": SimpleLauncher(),
        "init_blocks": 0,
        "min_blocks": 0,
        "max_blocks": max(1, site.max_queued),
    }
