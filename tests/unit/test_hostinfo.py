"""What a worker reports about its host: the kernel's own numbers, psutil where /sys tells nothing."""

from __future__ import annotations

import psutil

from pilot.runtime import hostinfo


def test_memory_and_topology_agree_with_psutil():
    assert hostinfo.memory_mb() == psutil.virtual_memory().total // (1024 * 1024)
    cores, sockets = hostinfo.cpu_topology()
    assert cores == psutil.cpu_count(logical=False) and sockets >= 1


def test_topology_without_sys_falls_back_to_psutil(monkeypatch):
    monkeypatch.setattr(hostinfo.glob, "glob", lambda pattern: [])  # a container that masks /sys
    assert hostinfo.cpu_topology() == (psutil.cpu_count(logical=False) or 0, 0)
