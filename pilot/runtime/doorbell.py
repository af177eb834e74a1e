"""Same-host wakeups beside MPI, so a waiting rank sleeps in the kernel instead of polling.

MPI has no receive that both blocks without spinning and can time out, so a
waiting rank polls. Between polls it sleeps; how long it sleeps is how late
it sees a message. Ranks on one host can do better: each has a UNIX datagram
socket in the abstract namespace (no file, gone with the process), the ranks
swap addresses once at start, and a sender rings the receiver's socket right
after handing a message to MPI. The receiver waits in ``select`` on its
socket, with the poll interval as timeout, and wakes within microseconds of
the message. Messages from other hosts are still found by polling.

A ring is one datagram of one byte; a full socket buffer means the receiver
is already due to wake, so such a ring is dropped. Host identity is the boot
id plus the node name, so two containers that share a name but not a kernel
never ring each other.

The socket comes from ``_socket``, the standard library's C half of
``socket``: the Python half turns every constant of the C module into enums
at import, some 4 ms of CPU on every rank at start, for a doorbell that needs
none of what it adds.
"""

from __future__ import annotations

import _socket
import os
import select


def host_identity() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
    except OSError:
        boot = ""
    return f"{boot}/{os.uname().nodename}"


class Doorbell:
    def __init__(self) -> None:
        self.sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM | _socket.SOCK_NONBLOCK | _socket.SOCK_CLOEXEC)
        self.sock.bind("")  # Linux autobind: a unique abstract address
        self.address = self.sock.getsockname()
        self.fd = self.sock.fileno()
        self.peers: dict[int, bytes] = {}

    def introduce(self, table: list[tuple[str, bytes]], rank: int) -> None:
        """``table[r]`` is rank r's (host identity, address); keep the other ranks of this host."""
        mine = table[rank][0]
        self.peers = {r: addr for r, (host, addr) in enumerate(table) if host == mine and r != rank and addr}

    def serves_all(self, size: int) -> bool:
        """Whether every other rank can ring this one (no rank on another host)."""
        return len(self.peers) == size - 1

    def ring(self, dest: int) -> None:
        addr = self.peers.get(dest)
        if addr is None:
            return
        try:
            self.sock.sendto(b"!", addr)
        except OSError:  # buffer full (a wake is pending anyway) or the peer is gone
            pass

    def wait(self, timeout: float) -> bool:
        """Sleep until rung or ``timeout`` s; True if rung (the rings are consumed)."""
        ready, _, _ = select.select((self.fd,), (), (), max(0.0, timeout))
        if not ready:
            return False
        try:
            while self.sock.recv(64):
                pass
        except BlockingIOError:
            pass
        return True

    def close(self) -> None:
        self.sock.close()
