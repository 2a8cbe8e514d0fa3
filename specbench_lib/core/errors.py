"""The one exception hierarchy of specbench.

    SpecbenchError
     ├── ParamsError        a params file or notebook parameter is invalid (file, key, value)
     ├── PreflightError     something a sweep needs is missing (binary, model, dataset, free port)
     ├── ServerError        a server could not be started or stopped (config, log path)
     ├── EngineError        a server answered in a way its adapter cannot read (URL, status)
     │    ├── ControlTimeout    a control call (info, tokenize, metrics) not answered within its limit
     │    └── SpecMismatch      a started server runs other speculative settings than asked for
     │         └── TreeMaskIgnored  a tree config's server verifies without its tree mask
     ├── TransportError     a connection failed or its bytes broke HTTP/1.1 (measured requests)
     │    ├── ConnectTimeout    no connection within the connect limit
     │    └── StaleConnection   a kept-alive connection closed before the response began
     ├── StoreError         a run directory cannot be created, read or locked (path)
     │    └── SchemaError       a record was written in a schema this version cannot read
     ├── ValidationFailed   a finished run is not usable (no ok cell, no baseline)
 └── UnknownReason      a verdict reason with a code the catalogue lacks (a programming error)

Every error carries structured fields besides its message, so a notebook or the CLI can show
what failed and where without parsing text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class SpecbenchError(Exception):
    """Base class of every error specbench raises on purpose."""


class ParamsError(SpecbenchError):
    """A params file or a notebook parameter is invalid."""

    def __init__(self, message: str, *, file: Path | str | None = None, key: str | None = None,
                 value: Any = None) -> None:
        self.file = str(file) if file is not None else None
        self.key = key
        self.value = value
        where = f"{self.file}: " if self.file else ""
        super().__init__(f"{where}{message}")


class PreflightError(SpecbenchError):
    """Something the sweep needs is missing or unusable; nothing was measured."""

    def __init__(self, message: str, *, what: str, path: Path | str | None = None) -> None:
        self.what = what
        self.path = str(path) if path is not None else None
        super().__init__(message)


class ServerError(SpecbenchError):
    """A server process could not be started, became unready, or could not be stopped."""

    def __init__(self, message: str, *, config: str, log_path: Path | str | None = None,
                 log_excerpt: str = "") -> None:
        self.config = config
        self.log_path = str(log_path) if log_path is not None else None
        self.log_excerpt = log_excerpt
        super().__init__(message)


class EngineError(SpecbenchError):
    """A server's answer does not have the shape its adapter expects."""

    def __init__(self, message: str, *, url: str, status: int | None = None) -> None:
        self.url = url
        self.status = status
        super().__init__(f"{message} ({url}, status {status})")


class SpecMismatch(EngineError):
    """A started server runs other speculative settings than its config asked for (read back
    from the server after its start): both values are in the message."""


class TreeMaskIgnored(SpecMismatch):
    """A tree config's started server resolved an attention backend whose verify pass ignores
    the tree mask (FA3 with top-k 1): its acceptance would be wrong and its output lossy."""


class ControlTimeout(EngineError):
    """A control call got no complete answer within ``engine.control_timeout_s``."""


class TransportError(SpecbenchError):
    """The connection failed or the server broke the HTTP protocol (a measured request)."""


class ConnectTimeout(TransportError):
    """No connection within the connect limit."""


class StaleConnection(TransportError):
    """A kept-alive connection closed before any byte of the response: the server never saw it."""


class StoreError(SpecbenchError):
    """A run directory cannot be created, read or locked."""

    def __init__(self, message: str, *, path: Path | str) -> None:
        self.path = str(path)
        super().__init__(f"{message}: {self.path}")


class SchemaError(StoreError):
    """A cell file or manifest in a schema version this specbench cannot read."""

    def __init__(self, message: str, *, path: Path | str, version: Any) -> None:
        self.version = version
        super().__init__(message, path=path)


class ValidationFailed(SpecbenchError):
    """A finished run cannot support conclusions (no ok cell, or no baseline to compare with)."""

    def __init__(self, message: str, *, run_dir: Path | str, counts: dict[str, int]) -> None:
        self.run_dir = str(run_dir)
        self.counts = counts
        super().__init__(message)


class UnknownReason(SpecbenchError, ValueError):
    """A verdict reason built with a code that :mod:`~specbench_lib.model.catalogue` does not list: a
    programming error where it is minted, a malformed record where it is read (a ``ValueError`` there)."""

    def __init__(self, code: str) -> None:
        self.code = code
        super().__init__(f"reason code {code!r} is not in the catalogue (specbench_lib/model/catalogue.py)")
