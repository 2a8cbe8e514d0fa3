"""Whether a port is free to listen on (the preflight's port check, and each placed server's),
and the next free one when it is taken (a shared host: :func:`next_free_port`)."""

from __future__ import annotations

import socket

from ..core.errors import PreflightError
from .process import lease_held

MAX_PORT = 65535


def check_port_free(host: str, port: int) -> None:
    """``port`` binds on ``host``; a PreflightError with the fix otherwise (in use, or no port
    at all: above :data:`MAX_PORT`)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OverflowError:  # bind's own refusal of a port past 65535
            raise PreflightError(f"port {port} is not a port (0 to {MAX_PORT}); set engine.port "
                                 f"lower in the params file", what="port") from None
        except OSError:
            raise PreflightError(f"port {port} on {host} is in use: another server is running "
                                 f"there; stop it or set engine.port in the params file",
                                 what="port") from None


def check_port_available(host: str, port: int) -> None:
    """:func:`check_port_free`, and no other specbench sweep holds its lease (which a sweep takes
    before its servers bind: a free port is not yet a port to use)."""
    check_port_free(host, port)
    holder = lease_held(port)
    if holder is not None:
        raise PreflightError(f"port {port} on {host} is held by another specbench {holder}; "
                             f"wait for it or set engine.port in the params file", what="port")


SCAN = 100  # ports tried after a taken one


def port_free(host: str, port: int) -> bool:
    """Whether ``port`` binds on ``host`` and no other specbench sweep holds its lease."""
    try:
        check_port_available(host, port)
    except PreflightError:
        return False
    return True


def next_free_port(host: str, port: int, count: int = 1) -> int | None:
    """``port`` when it (and the ``count`` − 1 after it: servers kept up at once) is free, else
    the first such of the :data:`SCAN` after it (None: none is)."""
    return next((p for p in range(port, min(port + SCAN, MAX_PORT + 2 - count))
                 if all(port_free(host, p + k) for k in range(count))), None)
