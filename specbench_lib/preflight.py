"""Checks before a sweep: binary, model file, free port. Clear errors, nothing measured yet."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from .errors import PreflightError
from .params import EngineParams
from .paths import default_llama_server, default_model

_SETUP_HINT = "run 'make setup' (scripts/setup_engine.sh builds llama-server and fetches the model)"


def engine_files(engine: EngineParams) -> tuple[Path, Path]:
    """The server binary and model file a sweep will use, checked to exist."""
    binary = Path(engine.binary).expanduser() if engine.binary else default_llama_server()
    model = Path(engine.model).expanduser() if engine.model else default_model()
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise PreflightError(f"server binary not found or not executable: {binary}; {_SETUP_HINT}",
                             what="binary", path=binary)
    if not model.is_file() or model.stat().st_size == 0:
        raise PreflightError(f"model file missing or empty: {model} (a reboot wipes tmpfs such as "
                             f"/dev/shm); {_SETUP_HINT}", what="model", path=model)
    return binary, model


def check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            raise PreflightError(f"port {port} on {host} is in use: another server is running "
                                 f"there; stop it or set engine.port in the params file",
                                 what="port") from None
