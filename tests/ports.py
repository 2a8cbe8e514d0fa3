"""The one free-port helper of the tests: a port nothing listens on now, from the kernel."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick, never a fixed one:
    two test files that wrote the same number collided when run together)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
