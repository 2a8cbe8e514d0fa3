"""The one free-port helper of the tests: ports nothing listens on now, from the kernel."""

from __future__ import annotations

import socket

RUN = 8  # ports one after another: a sweep keeps each config's server up on its own (blocks.py)


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, with the :data:`RUN` − 1 after it
    free too, for the servers a sweep keeps up at once (the kernel's pick, never a fixed one:
    two test files that wrote the same number collided when run together)."""
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + RUN < 65536 and all(_free(port + k) for k in range(1, RUN)):
            return port
    return port
