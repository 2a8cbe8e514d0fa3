"""The manifest's read model: ``manifest.json`` as typed values, for the readers of a run.

:mod:`~specbench_lib.runs.run` writes the manifest as a JSON object (the file on disk is what it always was);
:class:`Manifest` is how the readers (the index, the report, attempts, the CLI, results) see it:
its plan-wide facts, each :class:`Attempt` of the run and each :class:`ServerEntry` (with its
:class:`ServerPlacement` when Ray placed it), instead of reading string keys of dicts. A value
missing from an older manifest reads as None (or empty); the dict stays available as ``raw``.
A server's entry is written typed too: the sweep builds a :class:`ServerRecord` over the
server's life and stores its :meth:`~ServerRecord.to_dict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.readback import JSON, NOT_IN_FILE, Doc, doc_of


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _number(value: Any) -> int | None:
    return None if value is None else int(value)


def _section(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def git_of(environment: Mapping[str, Any]) -> dict[str, Any]:
    """The ``git`` part of an environment record (commit, dirty), or empty; a commit that is
    not a string (a damaged record) reads as none."""
    git = environment.get("git")
    found = dict(git) if isinstance(git, Mapping) else {}
    if not isinstance(found.get("commit"), str):
        found.pop("commit", None)
    return found


@dataclass(frozen=True)
class Attempt:
    """One attempt of a run (a start or a resume): when, by which process, how it ended, the
    notebook it kept, and the cells it kept or reused."""

    n: int
    started: str | None = None
    ended: str | None = None
    status: str | None = None
    pid: int | None = None
    params_file: str | None = None
    budget: int | None = None
    notebook: str | None = None
    notebook_source: str | None = None  # JupyterLab's notebook that ran it, if any
    kept_cells: tuple[str, ...] = ()
    reused_from: dict[str, str] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, index: int = 0) -> Attempt:
        """An attempt as the manifest holds it; ``index``: its place in the list (an attempt
        of an older run that names no number is the ``index + 1``-th)."""
        return cls(n=int(data.get("n", index + 1)), started=_text(data.get("started")),
                   ended=_text(data.get("ended")), status=_text(data.get("status")),
                   pid=_number(data.get("pid")), params_file=_text(data.get("params_file")),
                   budget=_number(data.get("budget")), notebook=_text(data.get("notebook")),
                   notebook_source=_text(data.get("notebook_source")),
                   kept_cells=tuple(str(c) for c in data.get("kept_cells") or ()),
                   reused_from={str(k): str(v) for k, v in
                                _section(data.get("reused_from")).items()},
                   environment=_section(data.get("environment")))

    @property
    def git(self) -> dict[str, Any]:
        return git_of(self.environment)


@dataclass(frozen=True)
class ServerPlacement:
    """Where Ray placed a server config (:mod:`~specbench_lib.sweep.placement`): its node, GPUs and port."""

    engine: str
    mode: str
    node: str | None = None
    node_ip: str = ""
    gpus: tuple[str, ...] = field(default=(), metadata={JSON: list[Any] | None})  # ids or indices
    port: int | None = None
    submitted: str | None = field(default=None, metadata={JSON: Any})
    started: str | None = field(default=None, metadata={JSON: Any})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServerPlacement:
        return cls(engine=str(data.get("engine", "ray")), mode=str(data.get("mode", "packed")),
                   node=_text(data.get("node")), node_ip=str(data.get("node_ip") or ""),
                   gpus=tuple(str(g) for g in data.get("gpus") or ()),
                   port=_number(data.get("port")), submitted=_text(data.get("submitted")),
                   started=_text(data.get("started")))


@dataclass(frozen=True)
class ServerEntry:
    """A server config's entry in the manifest: how it was started (or attached), its log and,
    for a placed run, where it ran. ``raw`` holds the whole record (timing, warmup, ...)."""

    key: str = field(metadata=NOT_IN_FILE)  # its key in ``servers``
    controlled: bool | None = None
    argv: tuple[str, ...] = ()
    url: str | None = None
    log: str | None = None
    pid: int | None = None
    starts: int = 0
    error: str | None = None
    placement: ServerPlacement | None = None
    # the crash line its log showed after the config's last cell (idle, or at shutdown)
    late_crash: str | None = field(default=None, metadata={JSON: Doc({"line": str | None})})
    reported_version: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, metadata=NOT_IN_FILE)

    @classmethod
    def from_dict(cls, key: str, data: Mapping[str, Any]) -> ServerEntry:
        placed = data.get("placement")
        return cls(key=key, controlled=data.get("controlled"),
                   argv=tuple(str(a) for a in data.get("argv") or ()), url=_text(data.get("url")),
                   log=_text(data.get("log")), pid=_number(data.get("pid")),
                   starts=int(data.get("starts") or 0), error=_text(data.get("error")),
                   placement=(ServerPlacement.from_dict(placed)
                              if isinstance(placed, Mapping) else None),
                   late_crash=_text(_section(data.get("late_crash")).get("line")),
                   reported_version=_text(data.get("reported_version")), raw=dict(data))


@dataclass
class ServerRecord:
    """A server config's manifest entry as the sweep builds it over the server's life
    (:class:`~specbench_lib.sweep.serversweep.ServerSweep`; :class:`ServerEntry` reads it back).

    :meth:`to_dict` is the JSON the manifest holds: a key appears once the sweep got that far
    (started, asked the server's info, warmed up, failed), with None where that is what it got.
    """

    isolation: dict[str, Any]
    starts: int = 0
    order: list[str] = field(default_factory=list)
    cpus: dict[str, Any] | None = None  # set when a server is opened
    controlled: bool | None = None  # and how it is reached:
    argv: list[str] = field(default_factory=list)  # a launched server's
    url: str | None = None  # an attached server's, with its unit
    unit: str | None = None
    log: str | None = None
    timing: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None  # once started
    ready_s: float | None = None
    effective: dict[str, Any] | None = None  # the server's info, with:
    context_per_request: int | None = None
    reported_version: str | None = None
    warmup: dict[str, Any] | None = None
    error: str | None = None  # a server that failed, with its exit status
    returncode: int | None = None
    ended_after_stop: list[dict[str, Any]] = field(default_factory=list)
    late_crash: dict[str, Any] | None = None
    # a kept server found dead before a block (block, returncode, signal): started again
    died_idle: list[dict[str, Any]] = field(default_factory=list)
    placement: dict[str, Any] | None = None  # a Ray-placed config's (:mod:`~specbench_lib.sweep.placement`)
    speculative: dict[str, Any] | None = None  # the settings read back after its start (issue 38)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"isolation": self.isolation, "starts": self.starts,
                                "order": list(self.order)}
        if self.cpus is not None:
            data["cpus"] = self.cpus
        if self.controlled is not None:
            data["controlled"] = self.controlled
            data.update({"argv": list(self.argv)} if self.controlled
                        else {"url": self.url, "unit": self.unit})
            data.update(log=self.log, timing=self.timing)
        if self.starts:
            data["pid"] = self.pid
        if self.ready_s is not None:
            data["ready_s"] = self.ready_s
        if self.effective is not None:
            data.update(context_per_request=self.context_per_request,
                        reported_version=self.reported_version, effective=self.effective)
        if self.warmup is not None:
            data["warmup"] = self.warmup
        if self.error is not None:
            data.update(error=self.error, returncode=self.returncode)
        if self.ended_after_stop:
            data["ended_after_stop"] = list(self.ended_after_stop)
        if self.died_idle:
            data["died_idle"] = list(self.died_idle)
        later = {"late_crash": self.late_crash, "placement": self.placement,
                 "speculative": self.speculative or None}
        data.update({k: v for k, v in later.items() if v is not None})
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServerRecord:
        """The record of a :meth:`to_dict` (a Ray worker's, sent as JSON)."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True)
class Manifest:
    """A run's manifest: what it planned, where, how it went, and each attempt."""

    run_id: str | None = None
    phase: str | None = None
    status: str | None = None
    started: str | None = None
    ended: str | None = None
    budget: int | None = None
    elapsed_s: float | None = None
    params_file: str | None = None
    notebook: str | None = None
    notebook_source: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    plan_fingerprints: dict[str, str] | None = None  # None: a manifest from before plans had them
    environment: dict[str, Any] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    fingerprint_components: dict[str, Any] = field(default_factory=dict)
    verdict_counts: dict[str, int] | None = None  # None while the run has recorded none
    attempts: tuple[Attempt, ...] = ()
    servers: dict[str, ServerEntry] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, metadata=NOT_IN_FILE)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        """The manifest of a JSON object whose sections have their types (as
        :meth:`~specbench_lib.runs.run.RunDir.manifest` checks)."""
        fingerprints = data.get("plan_fingerprints")
        counts = data.get("verdict_counts")
        return cls(
            run_id=_text(data.get("run_id")), phase=_text(data.get("phase")),
            status=_text(data.get("status")), started=_text(data.get("started")),
            ended=_text(data.get("ended")), budget=_number(data.get("budget")),
            elapsed_s=data.get("elapsed_s"), params_file=_text(data.get("params_file")),
            notebook=_text(data.get("notebook")),
            notebook_source=_text(data.get("notebook_source")),
            params=_section(data.get("params")),
            plan_fingerprints=None if fingerprints is None else dict(fingerprints),
            environment=_section(data.get("environment")), engine=_section(data.get("engine")),
            model=_section(data.get("model")),
            fingerprint_components=_section(data.get("fingerprint_components")),
            verdict_counts=None if counts is None else dict(counts),
            attempts=tuple(Attempt.from_dict(a, index=i)
                           for i, a in enumerate(data.get("attempts") or ())),
            servers={str(k): ServerEntry.from_dict(str(k), v)
                     for k, v in _section(data.get("servers")).items()
                     if isinstance(v, Mapping)},
            raw=dict(data))

    @property
    def git(self) -> dict[str, Any]:
        """The run's git commit and whether the tree was dirty (its first attempt's)."""
        return git_of(self.environment)

    @property
    def last_attempt(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None


# the manifest's shape, checked on read (runs/rundir.py): its read model's, written once above
MANIFEST = doc_of(Manifest)
MANIFEST_FIX = ("a damaged manifest: restore it from a copy, or move the run directory away; "
                "the other runs read as before")
