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


REDACTED = "***redacted***"

# A name is secret when its last word is one of these (``--token``, ``hf_token``, ``auth_token``,
# ``client_secret``, ``db.password``, ``Authorization``), or its last two words are one of the
# pairs (``api_key``, ``--api-key``, ``secret_key``). Words are split on ``-``, ``_``, ``.`` and
# lower-to-upper case changes, so a secret word inside another word (``output_tokens``,
# ``max_new_tokens``, ``tokenizer``, ``--speculative-num-draft-tokens``, ``first_token_s``) is
# never one.
SECRET_WORDS = frozenset({"token", "apikey", "password", "passwd", "passphrase", "secret",
                          "authorization", "credential", "credentials", "bearer", "cookie"})
SECRET_PAIRS = frozenset({("api", "key"), ("secret", "key"), ("access", "key"),
                          ("private", "key")})
_WORD_BREAK = re.compile(r"[-_.\s]+|(?<=[a-z0-9])(?=[A-Z])")
_HEADER = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_.-]*)\s*:\s*\S")
_BEARER = re.compile(r"\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}", re.I)


def name_words(name: str) -> tuple[str, ...]:
    """The words of a key or flag name, lower case: ``--hf-token`` → ``('hf', 'token')``."""
    return tuple(w.lower() for w in _WORD_BREAK.split(name.lstrip("-")) if w)


def is_secret_name(name: str, extra: tuple[str, ...] = ()) -> bool:
    """Whether a mapping key or ``--flag`` names a secret: a known secret word as the name's
    last word (or a known pair as its last two), or one of ``extra`` as the whole name."""
    words = name_words(str(name))
    if not words:
        return False
    if words[-1] in SECRET_WORDS or tuple(words[-2:]) in SECRET_PAIRS:
        return True
    return any(words == name_words(e) for e in extra)


def redact(value: Any, extra: tuple[str, ...] | list[str] = ()) -> Any:
    """A copy of params/argv/server info with secret values replaced, nothing else changed.

    Hidden: the value of a mapping key that names a secret (:func:`is_secret_name`), the value
    after a ``--flag`` (or in ``--flag=value``) that names one, a ``Name: value`` header line
    whose name is one (``Authorization: Bearer …``), and the credential after ``Bearer`` in any
    string. ``extra`` adds whole key or flag names (params ``redact:``).
    """
    extra = tuple(extra)
    if isinstance(value, dict):
        return {k: REDACTED if v not in (None, "") and is_secret_name(str(k), extra)
                else redact(v, extra) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        out: list[Any] = []
        hide_next = False
        for item in value:
            if hide_next and not (isinstance(item, str) and item.startswith("--")):
                out.append(REDACTED)
                hide_next = False
                continue
            hide_next = False
            if isinstance(item, str) and item.startswith("-") and len(item) > 1:
                name, eq, _ = item.partition("=")
                if is_secret_name(name, extra):
                    out.append(f"{name}={REDACTED}" if eq else item)
                    hide_next = not eq
                    continue
            out.append(redact(item, extra))
        return out
    if isinstance(value, str):
        header = _HEADER.match(value)
        if header and is_secret_name(header.group(1), extra):
            return f"{header.group(1)}: {REDACTED}"
        return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", value)
    return value
