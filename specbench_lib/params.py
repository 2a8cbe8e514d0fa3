"""Params files → a validated model → the Plan of a sweep.

A params file is YAML. It may name a base file with ``extends:`` (relative to itself); the phase
file's keys override the base's, mappings merged key by key. Unknown keys and bad values are
refused with a :class:`ParamsError` that names the file, the key and the value.
"""

from __future__ import annotations

import difflib
import itertools
import re
import typing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ParamsError
from .paths import resolve_project_path
from .store import MAX_YAML_BYTES, load_yaml

# auto: no speculation; ngram, draft: n-gram / draft-model drafting; linear: DFlash (a block of
# draft tokens); tree: DDTree (a draft tree of `budget` nodes); eagle, eagle3, mtp: EAGLE-family
# heads. Each engine adapter maps a method to its flags (or refuses it).
Method = Literal["auto", "ngram", "draft", "linear", "tree", "eagle", "eagle3", "mtp"]


_REDACT_NAME = re.compile(r"^-{0,2}[A-Za-z0-9][A-Za-z0-9_.-]*$")
# measured tokens, and first tokens, whose receive time a client stall made late by more than
# 10 % of what it times (coalesced_reads): past 5 % of the tokens an ITL p95 is read from wrong
# times, past 1 % of the first tokens a TTFT p99 (on a 2-core host whose server takes both
# cores, 2-5 ms stalls touch a token or two of every few hundred: not a reason to drop a cell)
DEFAULT_MAX_COALESCED_FRACTION = 0.05
DEFAULT_MAX_COALESCED_FIRST_FRACTION = 0.01
# sizes no real study reaches: past them a typo (10^12 requests) would hang or exhaust memory
MAX_REQUESTS_PER_CELL = 100_000
MAX_WARMUP_REQUESTS = 10_000
MAX_REPEATS = 1000
MAX_PLAN_CELLS = 100_000
MAX_LEVEL = {"contexts": 10_000_000, "concurrency": 100_000, "output_tokens": 1_000_000}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _engine_kinds() -> Any:
    """The engines package, for its KINDS, APIS and DEFAULT_KIND (imported here, not at the top:
    the engine adapters import this module)."""
    from . import engines

    return engines


class EngineParams(_Strict):
    """The server program and how to start it; flags per method live in ``engines/``.

    ``binary`` is the program (llama-server; for SGLang the Python of its environment, for vLLM
    the ``vllm`` executable; for ``template`` the program of ``argv_template``) and ``launcher``
    the arguments that follow it before the engine's own flags (SGLang: ``-m
    sglang.launch_server``, vLLM: ``serve``). Templates take ``{port}``, ``{host}``, ``{model}``,
    ``{budget}`` (also ``{budget+1}``, ``{budget-1}``), ``{tp}``, ``{context}``, ``{binary}``,
    ``{draft_model}`` and a config's options; values are inserted literally (never a shell).
    """

    kind: str = Field(default_factory=lambda: _engine_kinds().DEFAULT_KIND)  # see engines.KINDS
    binary: str | None = None
    model: str | None = None
    model_cache: str | None = None  # a persistent copy to restage `model` from (tmpfs is wiped)
    host: str = "127.0.0.1"
    port: int = Field(8090, ge=1024, le=65535)
    context: int = Field(4096, gt=0, description="total context (tokens), shared by the slots")
    threads: int = Field(2, gt=0)
    ready_timeout_s: float = Field(120.0, gt=0)
    # the whole of one control call (server info, tokenize, /metrics), however slowly it answers
    control_timeout_s: float = Field(30.0, gt=0)
    extra_args: tuple[str, ...] = ()
    launcher: tuple[str, ...] | None = None  # None: the kind's default (see the docstring)
    draft_model: str | None = None  # the default draft model of configs that need one
    tp: int = Field(1, ge=1, description="tensor-parallel size (GPUs per server)")
    mem_fraction: float | None = Field(None, gt=0, le=1)
    attention_backend: str | None = None
    tokenizer: str = "auto"  # auto | server | a tokenizer.json or model folder
    # False: launched servers reuse no KV of earlier prompts (SGLang --disable-radix-cache, vLLM
    # --no-enable-prefix-caching, llama.cpp cache_prompt false), so every request pays its whole
    # prefill, and a request the server reports as served from its cache is invalid
    prefix_cache: bool = False
    # how cells of one config are kept from remembering each other: auto (the adapter's choice,
    # e.g. a fresh llama-server per cell for ngram-mod, whose n-gram pool outlives requests),
    # restart (a fresh server for every cell) or none (one server per config)
    isolation: Literal["auto", "restart", "none"] = "auto"
    api: str | None = None  # the protocol of a template server (engines.APIS)
    argv_template: tuple[str, ...] = ()  # a whole argv, for kind template (or any kind)
    spec_templates: dict[str, tuple[str, ...]] = Field(default_factory=dict)  # method → flags

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        kinds = _engine_kinds().KINDS
        if kind not in kinds:
            raise ValueError(f"unknown engine kind {kind!r}; known: {', '.join(kinds)}")
        return kind

    @field_validator("api")
    @classmethod
    def _known_api(cls, api: str | None) -> str | None:
        apis = _engine_kinds().APIS
        if api is not None and api not in apis:
            raise ValueError(f"unknown api {api!r}; known: {', '.join(apis)}")
        return api

    @model_validator(mode="after")
    def _kind_needs(self) -> EngineParams:
        engines = _engine_kinds()
        if self.kind == "template" and (self.api is None or not self.argv_template):
            raise ValueError(f"kind 'template' needs 'api' ({', '.join(engines.APIS)}: the protocol "
                             f"the server speaks) and 'argv_template' (its whole argv)")
        if self.kind != "template" and self.api is not None:
            raise ValueError(f"'api' is only for kind 'template'; kind {self.kind!r} speaks its own")
        if self.kind != engines.DEFAULT_KIND and (self.binary is None or self.model is None):
            raise ValueError(f"kind {self.kind!r} needs 'binary' (the program: for sglang the "
                             f"Python of its environment, for vllm the vllm executable) and 'model'")
        return self


class AttachParams(_Strict):
    """A server that is already running: the sweep measures it and never starts or stops it.

    ``url`` is where it answers (``http://127.0.0.1:30000``); ``unit`` its systemd unit, whose
    state is read with ``systemctl is-active`` and whose journal becomes the config's log;
    ``api_key_env`` the environment variable holding its bearer token (the token itself is never
    written to params, manifests or cells).
    """

    url: str = Field(pattern=r"^https?://[^\s/]+(/\S*)?$")
    unit: str | None = Field(None, pattern=r"^[A-Za-z0-9@_.:][A-Za-z0-9@_.:\\-]*$")
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")

    @field_validator("url")
    @classmethod
    def _no_trailing_slash(cls, url: str) -> str:
        return url.rstrip("/")


class ConfigParams(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    method: Method
    budgets: tuple[int, ...] = ()
    options: dict[str, int | float | str] = Field(default_factory=dict)
    draft_model: str | None = None
    extra_args: tuple[str, ...] = ()
    spec_args: tuple[str, ...] = ()  # a flag template replacing the adapter's flags for the method
    argv: tuple[str, ...] = ()  # a whole argv template for this config's servers
    attach: AttachParams | None = None  # measure a running server instead of starting one

    @field_validator("budgets")
    @classmethod
    def _positive(cls, budgets: tuple[int, ...]) -> tuple[int, ...]:
        bad = [b for b in budgets if b <= 0]
        if bad:
            raise ValueError(f"budgets must be positive integers, got {bad}")
        if len(set(budgets)) != len(budgets):
            raise ValueError(f"budgets repeat a value: {list(budgets)}")
        return budgets

    @model_validator(mode="after")
    def _budget_rule(self) -> ConfigParams:
        if self.method == "auto" and self.budgets:
            raise ValueError("method 'auto' takes no budgets (it drafts nothing)")
        if self.method != "auto" and not self.budgets:
            raise ValueError(f"method '{self.method}' needs at least one budget")
        if self.attach is not None:
            flags = [k for k in ("argv", "spec_args", "extra_args") if getattr(self, k)]
            if flags:
                raise ValueError(f"an attached server is already running, so {flags} cannot apply; "
                                 f"remove them or 'attach'")
            if len(self.budgets) > 1:
                raise ValueError(f"an attached server runs one budget, got {list(self.budgets)}; "
                                 f"give each budget its own config and server")
        return self


class WorkloadParams(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    source: Literal["humaneval", "sharegpt", "copyedit", "jsonl"]
    path: str | None = None
    field: str = "text"

    @model_validator(mode="after")
    def _path_for_jsonl(self) -> WorkloadParams:
        if self.source == "jsonl" and not self.path:
            raise ValueError("source 'jsonl' needs 'path' (a JSONL file) and 'field'")
        return self


class KnownBad(_Strict):
    """A configuration known to fail: its cells are ``skipped`` with the reason, not run.

    ``budgets`` empty means every budget of the config; ``engine_version`` and ``gpu`` are
    substrings that must appear in the engine's version and in a visible GPU's name;
    ``compute_cap`` is a GPU architecture as nvidia-smi reports it (``"12.0"`` for SM120: RTX
    5090 and RTX PRO 6000 Blackwell alike), matched exactly against each visible GPU's.
    """

    config: str
    budgets: tuple[int, ...] = ()
    reason: str = Field(min_length=1)
    engine_version: str | None = None
    gpu: str | None = None
    compute_cap: str | None = Field(None, pattern=r"^\d+\.\d+$")

    def applies(self, server: ServerConfig, *, engine_version: str, gpus: list[str]) -> bool:
        """Whether this entry covers ``server`` on this engine and these GPUs (the environment's
        ``name, driver, memory[, compute capability]`` lines)."""
        if server.name != self.config:
            return False
        if self.budgets and server.budget not in self.budgets:
            return False
        if self.engine_version and self.engine_version not in engine_version:
            return False
        if self.compute_cap and not any(g.rsplit(",", 1)[-1].strip() == self.compute_cap
                                        for g in gpus):
            return False
        return not self.gpu or any(self.gpu in name for name in gpus)


class TimeoutParams(_Strict):
    """Per-request time limits (seconds); a request that exceeds one fails, it is never retried.

    ``request_s`` is the whole request; None takes the sweep's ``request_timeout_s``.
    """

    connect_s: float = Field(10.0, gt=0)
    first_token_s: float = Field(60.0, gt=0)
    between_tokens_s: float = Field(30.0, gt=0)
    request_s: float | None = Field(None, gt=0)


class RequestRateParams(_Strict):
    """An open-loop arrival schedule: ``per_s`` requests a second, Poisson or evenly spaced.

    Arrival times are drawn from the sweep's seed; ``concurrency`` still caps requests in flight.
    """

    per_s: float = Field(gt=0)
    arrival: Literal["poisson", "fixed"] = "poisson"


class LoadParams(_Strict):
    """Open-loop load points (params ``request_rate``): fixed rates, or a rate profile.

    ``per_s``: one rate or several, each a load point crossed with ``concurrency`` (the cap on
    requests in flight). ``profile``: that many rates spread evenly between each config's
    synchronous throughput (its concurrency-1 cell) and its saturated one (its highest
    concurrency), measured first, as GuideLLM's sweep profile does; the rate cells are not
    capped (every request of the cell may be in flight, the server queues what its slots cannot
    take: their concurrency is ``requests_per_cell``, or the highest level if that is more).
    """

    per_s: float | tuple[float, ...] | None = None
    profile: int | None = Field(None, ge=1, le=20)
    arrival: Literal["poisson", "fixed"] = "poisson"

    @model_validator(mode="after")
    def _one_kind(self) -> LoadParams:
        if (self.per_s is None) == (self.profile is None):
            raise ValueError("give per_s (one rate or a list of rates, requests a second) or "
                             "profile (a number of rates between synchronous and saturated), "
                             "not both, not neither")
        if any(r <= 0 for r in self.rates):
            raise ValueError(f"rates must be positive, got {list(self.rates)}")
        return self

    @property
    def rates(self) -> tuple[float, ...]:
        """The fixed rates (none for a profile)."""
        if self.per_s is None:
            return ()
        return self.per_s if isinstance(self.per_s, tuple) else (self.per_s,)

    def at(self, per_s: float) -> RequestRateParams:
        """The arrival schedule of one load point."""
        return RequestRateParams(per_s=per_s, arrival=self.arrival)


class HostParams(_Strict):
    """The host as evidence (:mod:`.hostload`): it is sampled while each cell's requests run.

    A cell measured while processes other than the sweep and its server used more than
    ``max_other_cpu_cores`` CPU cores on average is ``invalid`` (``busy_host``); ``auto`` is
    max(0.5, CPUs / 8) (0.5 on a 2-core laptop, 2 on a 16-core GPU box); None judges nothing
    (the load is still recorded). ``sample_interval_s``: seconds between samples.
    """

    max_other_cpu_cores: float | Literal["auto"] | None = "auto"
    sample_interval_s: float = Field(0.5, gt=0, le=60)

    @field_validator("max_other_cpu_cores")
    @classmethod
    def _positive_cores(cls, cores: float | str | None) -> float | str | None:
        if isinstance(cores, float) and cores <= 0:
            raise ValueError(f"must be a positive number of cores, 'auto' or null, got {cores}")
        return cores

    def cpu_limit(self, cpus: int) -> float | None:
        """The threshold in cores on a host with ``cpus`` CPUs (None: not judged)."""
        if self.max_other_cpu_cores == "auto":
            return max(0.5, cpus / 8)
        return self.max_other_cpu_cores


class SloParams(_Strict):
    """Per-request latency limits (seconds; None: no limit) and the fraction of a cell's
    requests that must meet them all for the cell to meet the SLO (see :mod:`.slo`)."""

    ttft_s: float | None = Field(None, gt=0)
    tpot_s: float | None = Field(None, gt=0)
    e2e_s: float | None = Field(None, gt=0)
    percentile: float = Field(0.9, gt=0, le=1)

    @model_validator(mode="after")
    def _a_limit(self) -> SloParams:
        if self.ttft_s is None and self.tpot_s is None and self.e2e_s is None:
            raise ValueError("an slo needs at least one of ttft_s, tpot_s, e2e_s")
        return self


class PlacementParams(_Strict):
    """Where each server config (one server launch and its cells) runs (:mod:`.placement`).

    ``engine`` ``local`` runs the configs one after another on this machine (the default);
    ``ray`` runs each as a Ray task that asks for ``gpus_per_server`` GPUs (None: ``engine.tp``;
    Ray sets ``CUDA_VISIBLE_DEVICES``) and ``cpus_per_server`` CPUs, on the cluster at
    ``address`` (``auto``: the one ``ray start`` runs on this machine or ``RAY_ADDRESS``;
    ``local``: a new one on this machine alone; ``ray://host:port`` or ``host:port``). ``mode``
    ``exclusive`` runs one server per node at a time (clean numbers), ``packed`` fills the GPUs
    (speed); each cell records who shared its node. A placed server takes the first free port
    of ``engine.port + 1`` … ``engine.port + port_span`` on its node.
    """

    engine: Literal["local", "ray"] = "local"
    address: str = Field("auto", pattern=r"^(auto|local|ray://[^\s/]+|[^\s/:]+:\d+)$")
    gpus_per_server: int | None = Field(None, ge=0)
    cpus_per_server: float = Field(1.0, ge=0)
    mode: Literal["exclusive", "packed"] = "packed"
    port_span: int = Field(64, ge=1, le=4096)

    def gpus(self, engine: EngineParams) -> int:
        """The GPUs each placed server asks for."""
        return engine.tp if self.gpus_per_server is None else self.gpus_per_server


class SweepParams(_Strict):
    phase: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    description: str = ""
    engine: EngineParams = EngineParams()
    configs: tuple[ConfigParams, ...] = Field(min_length=1)
    workloads: tuple[WorkloadParams, ...] = Field(min_length=1)
    contexts: tuple[int, ...] = Field(min_length=1)
    concurrency: tuple[int, ...] = Field(min_length=1)
    # tokens each request generates; a list makes output length an axis of the plan
    output_tokens: int | tuple[int, ...] = 128
    requests_per_cell: int = Field(3, ge=1, le=MAX_REQUESTS_PER_CELL)
    # per_concurrency: a closed-loop cell at concurrency c sends requests_per_cell x c requests,
    # so it has requests_per_cell waves of requests in flight together (its independent units);
    # fixed: requests_per_cell at every load point
    requests_scale: Literal["per_concurrency", "fixed"] = "per_concurrency"
    # False: every cell and repeat gets fresh prompts, never text its server already answered
    # (promptbook.py); True: a cache-warm study, prompts shared by a panel's load points
    prompt_reuse: bool = False
    # shuffled: a server's cells run in an order drawn from the seed (recorded), so no drift of
    # the machine lines up with an axis; fixed: the plan's order
    cell_order: Literal["shuffled", "fixed"] = "shuffled"
    # speedups within this fraction of each other are a tie (a decided answer), in best configs
    equivalence: float = Field(0.03, ge=0, lt=1)
    warmup_requests: int = Field(1, ge=0, le=MAX_WARMUP_REQUESTS)
    # output tokens of each warmup request (None: output_tokens). A short one already does what
    # warmup is for (first-use allocations, weights paged in, threads started) at less cost.
    warmup_output_tokens: int | None = Field(None, gt=0, le=MAX_LEVEL["output_tokens"])
    request_timeout_s: float = Field(120.0, gt=0)
    seed: int = 0
    known_bad: tuple[KnownBad, ...] = ()
    timeouts: TimeoutParams = TimeoutParams()
    request_rate: LoadParams | None = None  # None: closed loop (concurrency in flight)
    host: HostParams = HostParams()  # other processes' CPU while a cell runs (busy_host)
    placement: PlacementParams = PlacementParams()  # local (one after another) or on Ray
    max_failed_fraction: float = Field(0.0, ge=0, lt=1)  # failed requests a cell may tolerate
    # measured tokens, and first tokens, whose receive time was lost to a client stall, as
    # fractions, above which a cell is invalid (coalesced_reads)
    max_coalesced_fraction: float = Field(DEFAULT_MAX_COALESCED_FRACTION, ge=0, le=1)
    max_coalesced_first_fraction: float = Field(DEFAULT_MAX_COALESCED_FIRST_FRACTION, ge=0, le=1)
    repeats: int = Field(1, ge=1, le=MAX_REPEATS)  # measurements of each cell (mean and CV across them)
    # rounds: every config once per round, each round on a fresh server (drift lands on every
    # config alike); back_to_back: a config's repeats one after another on one server
    repeat_order: Literal["rounds", "back_to_back"] = "rounds"
    # adaptive repeats: after each round from the second, stop once every speedup's 95 % interval
    # has a half-width of at most this fraction of the speedup; `repeats` is the limit
    repeat_until_half_width: float | None = Field(None, gt=0, lt=1)
    unstable_cv: float = Field(0.10, gt=0)  # CV of output tok/s across repeats above which: unstable
    # a wall-time budget (seconds, or "10m"): the sweep measures in rounds and stops once every
    # panel's best config is decided or the budget is spent (rounds.py); None: the fixed full plan
    time_budget_s: float | None = None
    # with a time budget: at most this many rounds (the looks its error is spent over); fewer
    # when the corpus cannot feed fresh prompts for more
    max_rounds: int = Field(12, ge=2, le=MAX_REPEATS)
    slo: SloParams | None = None  # latency limits: goodput and the load that still meets them
    # more key or flag names whose values are secrets, hidden in params.yaml, the manifest and the
    # cells (whole names: `license_key` also hides `--license-key`); api_key, --api-key,
    # --hf-token, *_token, password, secret, Authorization and the like are always hidden
    redact: tuple[str, ...] = ()

    def requests_for(self, cell: CellSpec) -> int:
        """The measured requests of ``cell``: ``requests_per_cell``, times the concurrency for a
        closed-loop cell when ``requests_scale`` is ``per_concurrency``."""
        closed = cell.rate is None and cell.profile_point is None
        scale = cell.concurrency if closed and self.requests_scale == "per_concurrency" else 1
        return self.requests_per_cell * scale

    def request_timeouts(self) -> TimeoutParams:
        """The timeouts with the whole-request limit resolved (``request_timeout_s`` by default)."""
        if self.timeouts.request_s is not None:
            return self.timeouts
        return self.timeouts.model_copy(update={"request_s": self.request_timeout_s})

    @property
    def output_lengths(self) -> tuple[int, ...]:
        """The output lengths of the plan, one or several."""
        return self.output_tokens if isinstance(self.output_tokens, tuple) else (self.output_tokens,)

    @field_validator("contexts", "concurrency", "output_tokens")
    @classmethod
    def _positive_levels(cls, values: int | tuple[int, ...], info: Any) -> int | tuple[int, ...]:
        listed = values if isinstance(values, tuple) else (values,)
        if not listed or any(v <= 0 for v in listed):
            raise ValueError(f"must be positive integers, got {list(listed)}")
        bound = MAX_LEVEL[info.field_name]
        if any(v > bound for v in listed):
            raise ValueError(f"must be at most {bound} (no study needs more), got {list(listed)}")
        return values

    @field_validator("time_budget_s", mode="before")
    @classmethod
    def _budget_seconds(cls, value: Any) -> float | None:
        from .durations import parse_duration

        try:
            return parse_duration(value)
        except ParamsError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("redact")
    @classmethod
    def _names_to_redact(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        bad = [n for n in names if not _REDACT_NAME.match(n)]
        if bad:
            raise ValueError(f"names to redact are key or flag names (letters, digits, '-', '_', "
                             f"'.'; a flag may start with '-' or '--'), got {bad}")
        return names

    @model_validator(mode="after")
    def _names_and_baseline(self) -> SweepParams:
        for what, names in (("configs", [c.name for c in self.configs]),
                            ("workloads", [w.name for w in self.workloads])):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"{what} names must be unique, repeated: {dupes}")
        if not any(c.method == "auto" for c in self.configs):
            raise ValueError("one config must have method 'auto': it is the baseline of speedups")
        if self.repeat_until_half_width is not None and (
                self.repeats < 2 or self.repeat_order != "rounds"):
            raise ValueError("repeat_until_half_width needs repeat_order 'rounds' and repeats >= 2 "
                             f"(the limit), got {self.repeat_order!r} and {self.repeats}")
        if self.time_budget_s is not None and (self.repeat_until_half_width is not None
                                               or self.repeat_order != "rounds"):
            raise ValueError("time_budget_s measures in rounds and stops on its own: it needs "
                             "repeat_order 'rounds' and no repeat_until_half_width")
        if self.request_rate is not None and self.request_rate.profile is not None and (
                1 not in self.concurrency or len(self.concurrency) < 2):
            raise ValueError("request_rate.profile spreads rates between the concurrency-1 cell and "
                             "the highest concurrency: concurrency needs 1 and a higher level, got "
                             f"{list(self.concurrency)}")
        return self


@dataclass(frozen=True)
class ServerConfig:
    """One server start: a config at one budget (``budget`` is None for the baseline)."""

    name: str
    method: Method
    budget: int | None
    options: dict[str, int | float | str]
    draft_model: str | None
    extra_args: tuple[str, ...]
    spec_args: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()
    attach: AttachParams | None = None  # a running server: nothing is launched for it

    @property
    def label(self) -> str:
        return self.name if self.budget is None else f"{self.name}-b{self.budget}"


@dataclass(frozen=True)
class CellSpec:
    """One measurement: a server config × workload × context × concurrency.

    ``config`` is the server's label (``ngram-b16``); ``series`` the config's name (``ngram``),
    which a plot draws as one line over its budgets.
    """

    config: str
    series: str
    method: Method
    budget: int | None
    workload: str
    context: int
    concurrency: int
    repeat: int = 0
    repeats: int = 1
    output_tokens: int = 0  # 0: a cell written before output length was in the spec
    outputs: int = 1  # output lengths in the plan: with several, the id names the cell's
    rate: float | None = None  # open loop at a fixed rate (requests a second); None: closed
    profile_point: int | None = None  # open loop at point k of a rate profile (decided when run)
    profile_points: int = 0

    @property
    def load(self) -> str:
        """The open-loop load point ("2.5/s", "p2/3" of a profile); "" for a closed loop, whose
        load is its concurrency."""
        if self.rate is not None:
            return f"{self.rate:g}/s"
        if self.profile_point is not None:
            return f"p{self.profile_point}/{self.profile_points}"
        return ""

    @property
    def cell_id(self) -> str:
        base = f"{self.config}__{self.workload}__ctx{self.context}__c{self.concurrency}"
        if self.outputs > 1:
            base += f"__o{self.output_tokens}"
        if self.rate is not None:
            base += f"__q{self.rate:g}"
        if self.profile_point is not None:
            base += f"__p{self.profile_point}of{self.profile_points}"
        return f"{base}__r{self.repeat}" if self.repeats > 1 else base

    def row(self) -> dict[str, Any]:
        """The spec as a table row's keys: its fields and its ``load``."""
        return {**asdict(self), "load": self.load}


@dataclass(frozen=True)
class Plan:
    params: SweepParams
    source: Path
    servers: tuple[ServerConfig, ...]
    cells: tuple[CellSpec, ...]
    budget: int | None

    def cells_for(self, server: ServerConfig) -> list[CellSpec]:
        return [c for c in self.cells if c.config == server.label]

    def __repr__(self) -> str:
        p = self.params
        each = "per wave (x concurrency)" if p.requests_scale == "per_concurrency" else "each"
        lines = [f"Plan {p.phase} ({self.source.name}): {len(self.servers)} server configs x "
                 f"{len(p.workloads)} workloads x contexts {list(p.contexts)} x concurrency "
                 f"{list(p.concurrency)} = {len(self.cells)} cells, {p.requests_per_cell} "
                 f"requests {each} "
                 f"({p.warmup_requests} warmup per server), "
                 f"{'/'.join(map(str, p.output_lengths))} output tokens"
                 + (f"; in rounds (at most {p.max_rounds}) within a {p.time_budget_s:g} s time "
                    "budget" if p.time_budget_s is not None else "")]
        lines += [f"  {s.label}: method {s.method}, budget {s.budget}"
                  + (f", attached to {s.attach.url}" if s.attach else "") for s in self.servers]
        return "\n".join(lines)

    def text(self) -> str:
        return repr(self)

    def html(self) -> str:
        from .display import html_table, html_text

        rows = [[s.label, s.method, s.budget, s.attach.url if s.attach else "launched"]
                for s in self.servers]
        return (html_text(repr(self).splitlines()[0], bold=True)
                + html_table(["config", "method", "budget", "server"], rows))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.text(), "text/html": self.html()}


def load_params(path: str | Path) -> SweepParams:
    """Read and validate a params file (and the base it ``extends``)."""
    file = resolve_project_path(path)
    if not file.is_file():
        raise ParamsError("params file not found; pass an existing file as params_file",
                          file=path, key="params_file", value=str(path))
    raw = _read_layered(file, seen=())
    try:
        return SweepParams.model_validate(raw)
    except ValidationError as exc:
        raise _translate(exc, file, raw) from None


def build_plan(params: SweepParams, *, source: Path, budget: int | None = None) -> Plan:
    """Expand params into server configs and cells; ``budget`` keeps one budget plus baselines.
    With ``time_budget_s`` the cells are ``max_rounds`` rounds (repeats) of every cell, the most
    the sweep may measure (:mod:`.rounds` decides how many it does)."""
    if params.time_budget_s is not None and params.repeats != params.max_rounds:
        params = params.model_copy(update={"repeats": params.max_rounds})
    available = sorted({b for c in params.configs for b in c.budgets})
    if budget is not None and budget not in available:
        raise ParamsError(f"budget {budget} is not in any config; available budgets: {available}",
                          file=source, key="budget", value=budget)
    servers: list[ServerConfig] = []
    for cfg in params.configs:
        budgets: tuple[int | None, ...] = cfg.budgets or (None,)
        for b in budgets:
            if budget is not None and b is not None and b != budget:
                continue
            servers.append(ServerConfig(cfg.name, cfg.method, b, dict(cfg.options),
                                        cfg.draft_model, cfg.extra_args, cfg.spec_args, cfg.argv,
                                        cfg.attach))
    count = _cell_count(params, len(servers))
    if count > MAX_PLAN_CELLS:
        raise ParamsError(f"the plan has {count} cells (configs × workloads × contexts × output "
                          f"lengths × load points × repeats), more than {MAX_PLAN_CELLS}; "
                          f"shorten a list or lower repeats", file=source, value=count)
    cells = tuple(_cells(params, servers))
    _require_context_room(params, servers, source)
    return Plan(params, source, tuple(servers), cells, budget)


def _cells(params: SweepParams, servers: list[ServerConfig]) -> list[CellSpec]:
    """Servers × workloads × contexts × output lengths × load points × repeats. A rate profile's
    cells come after the closed-loop cells of their server, which they are spread between."""
    outputs = params.output_lengths
    load = params.request_rate
    closed = load is None or load.profile is not None
    cells: list[CellSpec] = []
    for s, w, ctx, out in itertools.product(servers, params.workloads, params.contexts, outputs):
        common = dict(config=s.label, series=s.name, method=s.method, budget=s.budget,
                      workload=w.name, context=ctx, repeats=params.repeats, output_tokens=out,
                      outputs=len(outputs))
        for conc, rep in itertools.product(params.concurrency, range(params.repeats)):
            if closed:
                cells.append(CellSpec(**common, concurrency=conc, repeat=rep))
            cells += [CellSpec(**common, concurrency=conc, repeat=rep, rate=rate)
                      for rate in (load.rates if load is not None else ())]
        if load is not None and load.profile is not None:
            cap = max(*params.concurrency, params.requests_per_cell)  # an open loop: uncapped
            cells += [CellSpec(**common, concurrency=cap, repeat=rep,
                               profile_point=k, profile_points=load.profile)
                      for rep in range(params.repeats) for k in range(1, load.profile + 1)]
    return cells


def _cell_count(params: SweepParams, servers: int) -> int:
    """How many cells :func:`_cells` makes, counted without making them."""
    load = params.request_rate
    per_level = (load is None or load.profile is not None) + len(load.rates if load else ())
    profile = load.profile if load is not None and load.profile is not None else 0
    return (servers * len(params.workloads) * len(params.contexts) * len(params.output_lengths)
            * params.repeats * (len(params.concurrency) * per_level + profile))


def _require_context_room(params: SweepParams, servers: list[ServerConfig], source: Path) -> None:
    """Refuse a plan none of whose cells fits ``engine.context`` (the context of each request
    of a launched server), before any server starts; the context guard would refuse them all.
    Attached servers, and argv templates that do not pass ``{context}``, have their own."""
    bound = [s for s in servers if s.attach is None
             and (not (s.argv or params.engine.argv_template)
                  or any("{context" in a for a in (s.argv or params.engine.argv_template)))]
    if not bound:
        return
    smallest = min(params.contexts)
    need = smallest + min(params.output_lengths) + 1
    context = params.engine.context
    if need > context:
        raise ParamsError(
            f"engine.context = {context} fits no cell: the smallest needs prompt {smallest} + "
            f"output_tokens {min(params.output_lengths)} + 1 = {need} tokens (before any speculative "
            f"reserve); raise engine.context to at least {need}, or lower contexts or "
            f"output_tokens", file=source, key="engine.context", value=context)


def load_plan(path: str | Path, *, budget: int | None = None,
              notebook: str | Path | None = None, time_budget: Any = "params") -> Plan:
    """Load a params file and build its plan in one step (what a notebook calls).

    ``time_budget``: seconds or a duration (``"10m"``) over the file's ``time_budget_s``, None
    for the fixed full plan, ``"params"`` (the default) for what the file says.
    ``notebook`` is papermill's ``PAPERMILL_OUTPUT_PATH`` (``papermill --inject-paths``, always
    set by ``specbench run``): a parameter papermill passed that the notebook does not declare
    (``-p budgt 16``) is refused (see :func:`check_notebook_parameters`).
    """
    check_notebook_parameters(notebook)
    params = load_params(path)
    if time_budget != "params":  # a notebook's (or --time-budget's) budget over the file's
        from .durations import parse_duration

        seconds = parse_duration(time_budget, key="time_budget")
        try:
            params = SweepParams.model_validate({**params.model_dump(), "time_budget_s": seconds})
        except ValidationError as exc:
            raise _translate(exc, resolve_project_path(path), params.model_dump()) from None
    return build_plan(params, source=resolve_project_path(path), budget=budget)


# papermill's own parameters (--inject-paths), which a notebook need not declare
PAPERMILL_PATHS = ("PAPERMILL_INPUT_PATH", "PAPERMILL_OUTPUT_PATH")


def unknown_parameter(name: str, value: Any, declared: list[str], *,
                      notebook: str | Path) -> ParamsError:
    """The error for a notebook parameter the notebook does not declare, with the close match."""
    close = difflib.get_close_matches(name, declared, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ParamsError(f"unknown notebook parameter {name!r}{hint}; the notebook takes: "
                       f"{', '.join(declared)}", file=notebook, key=name, value=value)


def check_notebook_parameters(notebook: str | Path | None) -> None:
    """Refuse the parameters papermill injected into ``notebook`` that its ``parameters`` cell
    does not declare (papermill itself only warns, and the value would be silently unused).

    ``notebook`` is the executed notebook papermill is writing (``PAPERMILL_OUTPUT_PATH``): it
    holds the ``parameters`` cell and, in its ``papermill.parameters`` metadata, what was
    passed. Nothing is checked without it (an interactive session, papermill without
    ``--inject-paths``, output to stdout or a URL) or when it cannot be read.
    """
    if not notebook or str(notebook) == "-" or "://" in str(notebook):
        return
    path = Path(notebook).expanduser()
    try:
        import nbformat
        import papermill

        nb = nbformat.read(path, as_version=4)
        passed = dict(nb.metadata.get("papermill", {}).get("parameters") or {})
        declared = list(papermill.inspect_notebook(str(path))) if passed else []
    except Exception:  # an unreadable notebook is no reason to refuse a sweep
        return
    for name, value in passed.items():
        if name not in declared and name not in PAPERMILL_PATHS:
            raise unknown_parameter(name, value, declared, notebook=path)


def _read_layered(file: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    if file in seen:
        raise ParamsError("'extends' forms a cycle", file=file, key="extends", value=str(file))
    try:
        data = load_yaml(_read_text(file)) or {}
    except yaml.YAMLError as exc:
        raise ParamsError(f"not valid YAML: {exc}", file=file) from None
    if not isinstance(data, dict):
        raise ParamsError("the top level must be a mapping of keys", file=file,
                          value=type(data).__name__)
    base_name = data.pop("extends", None)
    if base_name is None:
        return data
    base_file = (file.parent / str(base_name)).resolve()
    if not base_file.is_file():
        raise ParamsError("base file named by 'extends' not found", file=file, key="extends",
                          value=base_name)
    return _merge(_read_layered(base_file, (*seen, file)), data)


def _read_text(file: Path) -> str:
    """The file's text; a :class:`ParamsError` naming the line, its key and the bytes when it is
    not UTF-8 (a file saved in Latin-1 or UTF-16 by an editor), or when it cannot be read."""
    try:
        with open(file, "rb") as fh:
            raw = fh.read(MAX_YAML_BYTES + 1)
    except OSError as exc:
        raise ParamsError(f"cannot read the params file ({exc.strerror or exc})", file=file,
                          key="params_file", value=str(file)) from None
    if len(raw) > MAX_YAML_BYTES:
        raise ParamsError(f"the file is over {MAX_YAML_BYTES} bytes, far more than any params "
                          f"file (a page of YAML); is it the right file?", file=file,
                          key="params_file", value=str(file))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_no = raw.count(b"\n", 0, exc.start) + 1
        line = raw.split(b"\n")[line_no - 1].decode("utf-8", errors="replace")
        key = re.match(r"^[\s-]*([^\s:#][^:#]*?)\s*:", line)
        bad = raw[exc.start:exc.end]
        raise ParamsError(
            f"not UTF-8 text: byte{'s' if len(bad) > 1 else ''} {bad.hex(' ')} at line {line_no}"
            f"{f' (key {key.group(1)!r})' if key else ''}: {line.strip()!r}; save the file as "
            f"UTF-8", file=file, key=key.group(1) if key else None, value=bad) from None


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _translate(exc: ValidationError, file: Path, raw: dict[str, Any]) -> ParamsError:
    lines = []
    first_key, first_value = None, None
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        value = err.get("input")
        if err["type"] == "extra_forbidden":
            msg = _unknown_key(err["loc"])
        else:
            msg = err["msg"]
        shown = "" if isinstance(value, dict) else f" = {value!r}"
        lines.append(f"  {key}{shown}: {msg}")
        if first_key is None:
            first_key, first_value = key, value
    text = "invalid params:\n" + "\n".join(lines)
    return ParamsError(text, file=file, key=first_key, value=first_value)


def _unknown_key(loc: tuple[int | str, ...]) -> str:
    """The message for a key the model does not have, with the closest known key."""
    known = _known_keys(loc[:-1])
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    if close:
        return f"unknown key {str(loc[-1])!r}; did you mean {close[0]!r}?"
    listed = f" (known here: {', '.join(known)})" if known else ""
    return f"unknown key {str(loc[-1])!r}; remove it or check its spelling{listed}"


def _known_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the params model accepts at ``loc`` (a validation error's location)."""
    model: type[BaseModel] | None = SweepParams
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part)) if model else None
        if field is None:
            return []
        model = _model_in(field.annotation)
    if model is None:
        return []
    return [*model.model_fields, *(["extends"] if model is SweepParams else [])]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The params model inside a field's annotation (``tuple[ConfigParams, ...]``,
    ``AttachParams | None``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
