"""Reaching a server over HTTP from outside: its health probe (the status of one ``GET``, read
within a whole-call limit) and an attached server's ``Authorization`` header.
"""

from __future__ import annotations

import os
import socket
import ssl
import time
from urllib.parse import urlsplit

from ..core.errors import PreflightError
from ..model.sections import AttachParams

HEALTH_LIMIT_S = 5.0  # one health probe, connect to status line


def http_status(base_url: str, path: str, *, headers: dict[str, str] | None = None,
                limit_s: float = HEALTH_LIMIT_S) -> int | None:
    """The status code of ``GET path`` read within ``limit_s`` in all (None when the server is
    unreachable, too slow or answers something else than HTTP): a trickling endpoint cannot
    hold the caller past the limit, as a per-read timeout would."""
    deadline = time.monotonic() + max(limit_s, 0.01)
    url = urlsplit(base_url)
    host, port = url.hostname or "127.0.0.1", url.port or (443 if url.scheme == "https" else 80)
    lines = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
               f"{lines}\r\n").encode()
    try:
        with socket.create_connection((host, port), timeout=limit_s) as raw:
            sock = ssl.create_default_context().wrap_socket(raw, server_hostname=host) \
                if url.scheme == "https" else raw
            sock.sendall(request)
            head = b""
            while b"\r\n" not in head and len(head) < 1024:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                sock.settimeout(left)
                piece = sock.recv(1024)
                if not piece:
                    break
                head += piece
    except (OSError, ValueError):
        return None
    parts = head.split(b"\r\n", 1)[0].split()
    if len(parts) >= 2 and parts[0].startswith(b"HTTP/") and parts[1].isdigit():
        return int(parts[1])
    return None


def auth_headers(attach: AttachParams | None, *, config: str) -> dict[str, str]:
    """The ``Authorization`` header of an attached server, read from its environment variable now."""
    if attach is None or attach.api_key_env is None:
        return {}
    token = os.environ.get(attach.api_key_env, "")
    if not token:
        raise PreflightError(f"config {config!r}: environment variable {attach.api_key_env} "
                             f"(attach.api_key_env) is empty or not set; export the server's API "
                             f"key there", what="api_key")
    return {"Authorization": f"Bearer {token}"}
