"""Whether a port is free to listen on: the preflight's port check, and each placed server's."""

from __future__ import annotations

import socket

from ..core.errors import PreflightError


def check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            raise PreflightError(f"port {port} on {host} is in use: another server is running "
                                 f"there; stop it or set engine.port in the params file",
                                 what="port") from None
