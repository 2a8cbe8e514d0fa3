"""The record model: what one request and one cell are, from the wire to the plot (a cell's
verdict: :mod:`~.verdict`).

Every reader of a run uses these types. A cell file is the versioned JSON form of a
:class:`CellRecord` (``schema_version`` :data:`SCHEMA_VERSION`); ``CellRecord.from_dict``
reads it back without loss, so metrics and the analysis-time rules can be computed again from
the stored requests (see :mod:`~specbench_lib.analysis`). What was only observable while measuring (the
server died, a log signature, the server's spec counters) is stored as a fact, never derived.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core.errors import SchemaError
from ..core.shapes import known_fields as _known
from ..core.shapes import shape_problem
from .catalogue import check
from .cellspec import CellSpec
from .hostfacts import HostLoad, Placement
from .judging import JudgeInputs as JudgeInputs
from .served import PromptRecord, Remeasured, ServedBefore
from .verdict import Status, Verdict

SCHEMA_VERSION = 4
# versions read by migrating on read (never a reason to measure a cell again): 2 lacks the
# requests' multi_reads and stalls, so coalescing keeps the counts decided while measuring;
# 2 and 3 store the judge's thresholds as fields of their own (JudgeInputs.from_dict)
MIGRATES_FROM = frozenset({2, 3})


@dataclass
class FinalStats:
    """What the server reports about one finished generation (its own token counts)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    truncated: bool = False
    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    verify_steps: int | None = None
    cached_tokens: int | None = None  # prompt tokens the server took from its prefix cache
    # verify steps by drafts accepted: [k] the steps that accepted exactly k (SGLang's own)
    accepted_histogram: list[int] | None = None
    # times the server took the request out of its running batch (SGLang's num_retractions: its
    # KV pool was full), so fewer requests were in flight than the client kept open
    retractions: int | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FinalStats:
        return cls(**_known(cls, data))


@dataclass
class RequestRecord:
    """Everything observed about one request; times are seconds from the cell's start."""

    index: int
    warmup: bool
    prompt_tokens_planned: int
    max_tokens: int
    status: int | None = None
    error: str | None = None
    error_kind: str | None = None
    start: float = 0.0
    end: float = 0.0
    token_times: list[float] = field(default_factory=list)
    chunk_sizes: list[int] = field(default_factory=list)
    final: FinalStats | None = None
    text_sha: str = ""
    output_ids: list[int] = field(default_factory=list)
    scheduled: float | None = None  # open loop: when the schedule said to send it
    # the raw reads coalescing is decided from on read (:mod:`~specbench_lib.analysis.coalescing`),
    # seconds from the cell's start: each read that carried several token events (its time, the
    # tokens of all but its last event, whether the first token was among them), and the client
    # stalls (dispatch's stall watch) that overlap the
    multi_reads: list[tuple[float, int, bool]] | None = None  # request; None: not recorded (before schema 3)
    stalls: list[tuple[float, float]] | None = None
    # schema 2 (decided while measuring; read only where multi_reads and stalls are None):
    coalesced_tokens: int = 0  # tokens whose receive time is a later event's
    first_token_coalesced: bool = False  # whether the TTFT is late too
    stop: str = "length"  # length: exactly max_tokens (EOS ignored; all older cells); eos: a cap
    turn: int | None = None  # a conversation's turn (None: none; sweep/turns.py)
    output_text: str | None = None  # a turn 1's answer (untimed), or a readable sample (cut)
    reasoning: bool | None = None  # the answer opened a reasoning block (None: not looked at)

    @property
    def ttft(self) -> float | None:
        return self.token_times[0] - self.start if self.token_times else None

    @property
    def e2e(self) -> float:
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ttft"] = self.ttft  # derived, written for readers of the raw file
        data["e2e"] = self.e2e
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        values = _known(cls, data)
        if values.get("error_kind") is not None:
            check(values["error_kind"])  # a reason code: UnknownReason (a ValueError) if not
        final = values.get("final")
        values["final"] = FinalStats.from_dict(final) if final is not None else None
        for key in ("token_times", "chunk_sizes", "output_ids"):
            values[key] = list(values.get(key) or [])
        for key in ("multi_reads", "stalls"):
            if values.get(key) is not None:
                values[key] = [tuple(item) for item in values[key]]
        return cls(**values)


@dataclass
class CellDispatch:
    """The requests of one cell as the dispatcher returns them."""

    records: list[RequestRecord]
    window_start: float
    window_end: float
    origin: float = 0.0  # time.perf_counter() at the cell's time 0 (records are relative to it)
    target_rate: float | None = None  # open loop: the requests per second asked for
    # when the client did not run on time (dispatch's stall watch), seconds from the cell's start
    stalls: tuple[tuple[float, float], ...] = ()

    @property
    def measured(self) -> list[RequestRecord]:
        return [r for r in self.records if not r.warmup]


@dataclass(frozen=True)
class CellFacts:
    """What was observed about the server while the cell was measured: stored, never derived.

    ``decided`` is a verdict reached before or without requests (skipped as known bad, refused
    by the context guard, the server failed to start or died in an earlier cell): the analysis
    keeps it as it is.
    """

    decided: Verdict | None = None
    server_alive: bool = True
    crash_line: str | None = None
    returncode: int | None = None
    log_excerpt: str = ""
    spec_counters: dict[str, Any] = field(default_factory=dict)
    host: HostLoad | None = None  # the host while the requests ran (None: not sampled)
    placement: Placement | None = None  # where a placed cell ran (None: this machine, alone)
    served_before: ServedBefore | None = None  # the server's history (None: not recorded)
    remeasured: tuple[Remeasured, ...] = ()  # attempts the client host spoiled (params retries)
    # the server's KV pool against the cell's load: {"kv_tokens", "needed" (concurrency ×
    # (prompt + output)), "per_request"} (None: the engine reports no pool)
    kv_fit: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["decided"] = self.decided.to_dict() if self.decided else None
        # absent, the file stays as it was
        return {k: v for k, v in data.items()
                if v or k not in ("placement", "served_before", "remeasured", "kv_fit")}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellFacts:
        values = _known(cls, data)
        decided = values.get("decided")
        values["decided"] = Verdict.from_dict(decided) if decided else None
        host = values.get("host")
        values["host"] = HostLoad.from_dict(host) if host is not None else None
        placement = values.get("placement")
        values["placement"] = Placement.from_dict(placement) if placement is not None else None
        served = values.get("served_before")
        values["served_before"] = ServedBefore.from_dict(served) if served is not None else None
        values["remeasured"] = tuple(Remeasured.from_dict(r) for r in values.get("remeasured") or ())
        return cls(**values)


@dataclass(frozen=True)
class Provenance:
    """Who measured a cell: the attempt of the run, the commit, and when."""

    attempt: int = 1
    commit: str | None = None
    dirty: bool | None = None
    started: str | None = None
    ended: str | None = None
    reused_from: str | None = None  # the run an ok cell was copied from instead of measured

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Provenance:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class CellRecord:
    """One cell: its spec and fingerprint, the requests as measured, the facts, the verdict.

    ``verdict`` and ``metrics`` are what the analysis concluded: in a file, as concluded when it
    was written; in a :class:`~specbench_lib.report.outcome.SweepResult`, as the analysis of this
    specbench concludes from the stored requests now.
    """

    run_id: str
    spec: CellSpec
    fingerprint: str
    server_label: str
    server_argv: tuple[str, ...]
    verdict: Verdict
    judge: JudgeInputs
    facts: CellFacts = CellFacts()
    provenance: Provenance = Provenance()
    requests: tuple[RequestRecord, ...] = ()
    prompts: tuple[PromptRecord, ...] = ()
    target_rate: float | None = None
    metrics: dict[str, Any] | None = None
    timing: dict[str, Any] = field(default_factory=dict)

    @property
    def cell_id(self) -> str:
        return self.spec.cell_id

    @property
    def status(self) -> Status:
        return self.verdict.status

    @property
    def records(self) -> list[RequestRecord]:
        return list(self.requests)

    @property
    def measured(self) -> list[RequestRecord]:
        return [r for r in self.requests if not r.warmup]

    def with_analysis(self, verdict: Verdict, metrics: Mapping[str, Any] | None) -> CellRecord:
        return replace(self, verdict=verdict, metrics=None if metrics is None else dict(metrics))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION, "run_id": self.run_id, "cell_id": self.cell_id,
            "fingerprint": self.fingerprint, "spec": asdict(self.spec),
            "server": {"label": self.server_label, "argv": list(self.server_argv)},
            "verdict": self.verdict.to_dict(), "metrics": self.metrics,
            "judge": asdict(self.judge), "facts": self.facts.to_dict(),
            "provenance": asdict(self.provenance), "target_rate": self.target_rate,
            "prompts": [asdict(p) for p in self.prompts],
            "requests": [r.to_dict() for r in self.requests], "timing": self.timing,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, path: Path | str = "<cell>") -> CellRecord:
        """The record of a cell file's JSON; :class:`SchemaError` for another schema version."""
        version = data.get("schema_version") if isinstance(data, dict) else None
        if isinstance(version, int) and version in MIGRATES_FROM:  # absent fields: not recorded
            data = {**data, "schema_version": SCHEMA_VERSION}
        elif version != SCHEMA_VERSION:
            raise SchemaError(
                f"cell file has schema_version {version!r}, this specbench reads "
                f"{SCHEMA_VERSION} (and migrates {sorted(MIGRATES_FROM)}; version 1 was written "
                f"before typed records, which its "
                f"numbers cannot be re-analysed from): resume the run to measure it again",
                path=path, version=version)
        try:
            server = data["server"]
            requests = tuple(RequestRecord.from_dict(r) for r in data.get("requests") or ())
            spec = CellSpec(**data["spec"])
            if not spec.output_tokens:  # written before output length was an axis: as asked
                asked = {r.max_tokens for r in requests if not r.warmup}
                spec = replace(spec, output_tokens=asked.pop() if len(asked) == 1 else 0)
            record = cls(
                run_id=str(data["run_id"]), spec=spec,
                fingerprint=str(data["fingerprint"]), server_label=str(server["label"]),
                server_argv=tuple(server.get("argv") or ()),
                verdict=Verdict.from_dict(data["verdict"]),
                judge=JudgeInputs.from_dict(data["judge"]),
                facts=CellFacts.from_dict(data.get("facts") or {}),
                provenance=Provenance.from_dict(data.get("provenance") or {}),
                requests=requests,
                prompts=tuple(PromptRecord.from_dict(p) for p in data.get("prompts") or ()),
                target_rate=data.get("target_rate"), metrics=data.get("metrics"),
                timing=dict(data.get("timing") or {}))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SchemaError(f"cell file is not a schema {SCHEMA_VERSION} cell record "
                              f"({type(exc).__name__}: {exc})", path=path,
                              version=version) from None
        problem = shape_problem(record)  # JSON of another shape: named while its file is known
        if problem:
            raise SchemaError(f"cell file is not a schema {SCHEMA_VERSION} cell record "
                              f"({problem})", path=path, version=version)
        return record
