"""Files that never corrupt and never leak: atomic JSON writes, checked reads, redaction."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path
from typing import Any

from .errors import StoreError


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to a temp file beside ``path``, fsync it, then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=2, default=str)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    """The JSON in ``path``; a :class:`StoreError` naming the file when it cannot be read."""
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"cannot read JSON ({type(exc).__name__}: {exc}); a damaged file: move "
                         f"it away or restore it", path=path) from None


_SECRET = re.compile(r"(api[_-]?key|token|secret|password|passwd|authorization|credential)", re.I)
REDACTED = "***redacted***"


def redact(value: Any) -> Any:
    """A copy of params/argv with secret values replaced: mapping keys and ``--flag value`` pairs
    whose name looks like a secret (api_key, token, password…), and ``--flag=value`` forms."""
    if isinstance(value, dict):
        return {k: REDACTED if _SECRET.search(str(k)) and v else redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        out: list[Any] = []
        hide_next = False
        for item in value:
            if hide_next:
                out.append(REDACTED)
                hide_next = False
            elif isinstance(item, str) and item.startswith("-") and _SECRET.search(item):
                name, eq, _ = item.partition("=")
                out.append(f"{name}={REDACTED}" if eq else item)
                hide_next = not eq
            else:
                out.append(redact(item))
        return out
    return value
