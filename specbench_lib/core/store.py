"""Files that never corrupt and never leak: atomic JSON writes, checked reads (bounded YAML),
redaction."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .errors import StoreError


def utc_now(timespec: str = "seconds") -> str:
    """Now, UTC, in ISO 8601 to the second (``timespec``: "milliseconds" where order matters)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec=timespec)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to a temp file beside ``path``, fsync it, then rename it over ``path``."""

    def dump(tmp: Path) -> None:
        with open(tmp, "w") as fh:
            json.dump(data, fh, indent=2, default=str)
            fh.flush()
            os.fsync(fh.fileno())

    write_atomic(path, dump)


def write_atomic(path: Path, write: Callable[[Path], object]) -> None:
    """``write`` a temp file beside ``path`` (``.<name>.<pid>.tmp``), then rename it over
    ``path``: the file is whole or as it was, never half; a failed write (a full disk) leaves
    no temp file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_json(path: Path) -> Any:
    """The JSON in ``path``; a :class:`StoreError` naming the file when it cannot be read."""
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"cannot read JSON ({type(exc).__name__}: {exc}); a damaged file: move "
                         f"it away or restore it", path=path) from None


MAX_YAML_BYTES = 1 << 20  # a params file (or a -p value) is text a person wrote: 1 MiB at most
MAX_YAML_NODES = 100_000  # its nodes with every alias expanded (a "billion laughs" has 10^9)
MAX_YAML_DEPTH = 100  # nested collections


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that counts every node as if each alias were a copy of what it names
    and refuses a document past :data:`MAX_YAML_NODES`, nesting past :data:`MAX_YAML_DEPTH` or
    an alias to a node that contains it: an alias bomb is refused before anything expands it."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._sizes: dict[int, int] = {}  # id(node) → its node count, aliases expanded
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None and id(target) not in self._sizes:
                raise self._refused(f"alias *{event.anchor} names a node that contains it",
                                    event.start_mark)
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise self._refused(f"collections nested more than {MAX_YAML_DEPTH} deep",
                                    self.peek_event().start_mark)
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        children = node.value if isinstance(node, yaml.CollectionNode) else ()
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in children for n in pair]
        size = 1 + sum(self._sizes.get(id(child), 1) for child in children)
        self._sizes[id(node)] = size
        if size > MAX_YAML_NODES:
            raise self._refused(f"with its aliases expanded it has more than {MAX_YAML_NODES} "
                                f"nodes (an alias bomb?); write the values out", node.start_mark)
        return node

    @staticmethod
    def _refused(problem: str, mark: Any) -> yaml.YAMLError:
        return yaml.YAMLError(f"line {mark.line + 1}, column {mark.column + 1}: {problem}")


def load_yaml(text: str) -> Any:
    """YAML's safe load, bounded: a :class:`yaml.YAMLError` (as for any bad YAML) for text over
    :data:`MAX_YAML_BYTES`, or whose aliases would expand it past :data:`MAX_YAML_NODES` nodes,
    or nested past :data:`MAX_YAML_DEPTH`."""
    if len(text) > MAX_YAML_BYTES:
        raise yaml.YAMLError(f"{len(text)} characters, over the {MAX_YAML_BYTES} a params text "
                             f"may have")
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


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
