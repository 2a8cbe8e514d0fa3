"""Whether a port is free to listen on (the preflight's port check, and each placed server's),
and the next free one when it is taken (a shared host: :func:`next_free_port`)."""

from __future__ import annotations

import socket

from ..core.errors import PreflightError
from .process import lease_held


def check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            raise PreflightError(f"port {port} on {host} is in use: another server is running "
                                 f"there; stop it or set engine.port in the params file",
                                 what="port") from None


SCAN = 100  # ports tried after a taken one


def port_free(host: str, port: int) -> bool:
    """Whether ``port`` binds on ``host`` and no specbench sweep holds its lease."""
    try:
        check_port_free(host, port)
    except PreflightError:
        return False
    return not lease_held(host, port)


def next_free_port(host: str, port: int, count: int = 1) -> int | None:
    """``port`` when it (and the ``count`` − 1 after it: servers kept up at once) is free, else
    the first such of the :data:`SCAN` after it (None: none is)."""
    return next((p for p in range(port, min(port + SCAN, 65536 - count + 1))
                 if all(port_free(host, p + k) for k in range(count))), None)
