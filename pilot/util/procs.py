"""What a process is running, from /proc: before a pid is signalled, it must be the process meant
(a pid is reused once its process has ended)."""

from __future__ import annotations

from pilot.util.safeopen import read_at_most


def cmdline(pid: int | str) -> list[bytes] | None:
    """The argument vector of process ``pid`` (empty for a zombie); None when it does not exist or cannot be read."""
    try:
        data = read_at_most(f"/proc/{pid}/cmdline", 1 << 16)
    except OSError:
        return None
    return data.split(b"\0")[:-1] if data else []
