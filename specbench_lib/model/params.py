"""The params of a sweep: its validated top level (:class:`SweepParams`: configs, levels,
requests, rules' thresholds, sizes); the values a plan is made of (:class:`~.cellspec.ServerConfig`,
:class:`~.cellspec.CellSpec`) are :mod:`~.cellspec`'s.

A params file is YAML (read by :mod:`~.layering`, expanded into a plan by :mod:`~.plan`); its
sections (engine, timeouts, load, host, SLO, placement) are :mod:`~specbench_lib.model.sections`'s
models, its workloads :mod:`~.workloadparams`'s. Unknown keys and bad values are refused;
:mod:`~.layering` names the file, the key and the value.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ..core.durations import parse_duration
from ..core.errors import ParamsError
from . import catalogue as cat
from .axes import capped, check_caps
from .categories import check_groups, per_category
from .cellspec import CellSpec, ServerConfig
from .quantities import QUANTITIES, check_measurable
from .sampling import Sampling
from .sections import (
    AttachParams,
    EngineParams,
    HostParams,
    LoadParams,
    Method,
    PlacementParams,
    SloParams,
    Strict,
    TimeoutParams,
)
from .stages import StageParams, check_stages
from .workloadparams import WorkloadParams

_REDACT_NAME = re.compile(r"^-{0,2}[A-Za-z0-9][A-Za-z0-9_.-]*$")
# sizes no real study reaches: past them a typo (10^12 requests) would hang or exhaust memory
MAX_REQUESTS_PER_CELL = 100_000
MAX_WARMUP_REQUESTS = 10_000
MAX_REPEATS = 1000
MAX_LEVEL = {"contexts": 10_000_000, "concurrency": 100_000, "output_tokens": 1_000_000}


class ConfigParams(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")  # a server's label is name-b<budget>
    method: Method  # auto (the baseline), ngram, draft, linear (DFlash), tree (DDTree), eagle…
    budgets: tuple[int, ...] = ()  # drafted tokens per step (tree: nodes); none for auto
    # more values for the engine's flags and templates (e.g. prompt_lookup_max for vLLM n-gram)
    options: dict[str, int | float | str] = Field(default_factory=dict)
    draft_model: str | None = None  # the draft model of this config (default engine.draft_model)
    extra_args: tuple[str, ...] = ()  # appended to this config's server argv
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


class KnownBad(Strict):
    """A configuration known to fail: its cells are ``skipped`` with the reason, not run.

    ``budgets`` empty means every budget of the config; ``engine_version`` and ``gpu`` are
    substrings that must appear in the engine's version and in a visible GPU's name;
    ``compute_cap`` is a GPU architecture as nvidia-smi reports it (``"12.0"`` for SM120: RTX
    5090 and RTX PRO 6000 Blackwell alike), matched exactly against each visible GPU's.
    """

    config: str  # the config's name
    budgets: tuple[int, ...] = ()
    reason: str = Field(min_length=1)  # why it fails: the skipped cells' reason
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


class SweepParams(Strict):
    # the phase (tp1, tp4, ...): the run id is minted from it, the report groups runs by it
    phase: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    description: str = ""  # free text, shown with the run
    engine: EngineParams = EngineParams()  # the server program and how to start it
    # the server configs: a method and its budgets each; one must be the `auto` baseline
    configs: tuple[ConfigParams, ...] = Field(min_length=1)
    workloads: tuple[WorkloadParams, ...] = Field(min_length=1)  # the prompt corpora
    contexts: tuple[int, ...] = Field(min_length=1)  # prompt lengths in server tokens, each an axis level
    # closed-loop requests in flight, each a load point (with request_rate: the cap on them)
    concurrency: tuple[int, ...] = Field(min_length=1)
    # {context: n}: at that context, concurrency above n is measured at n (the KV pool holds no
    # more requests of that length: `specbench doctor` names it; model/axes.py)
    concurrency_cap: dict[int, int] = Field(default_factory=dict)
    # tokens each request generates; a list makes output length an axis of the plan
    output_tokens: int | tuple[int, ...] = 128
    # the sampling temperature; a list makes it an axis of the plan (0: greedy; [0, 1] as the
    # papers report), each temperature its own panel
    temperature: float | tuple[float, ...] = 0.0
    top_p: float = Field(1.0, gt=0, le=1)  # nucleus sampling at temperature > 0 (1: off)
    top_k: int = Field(0, ge=0)  # the k most likely tokens at temperature > 0 (0: off)
    # measured requests of a cell (times the concurrency with requests_scale per_concurrency)
    requests_per_cell: int = Field(3, ge=1, le=MAX_REQUESTS_PER_CELL)
    # per_concurrency: a closed-loop cell at concurrency c sends requests_per_cell x c requests,
    # so it has requests_per_cell waves of requests in flight together (its independent units);
    # fixed: requests_per_cell at every load point
    requests_scale: Literal["per_concurrency", "fixed"] = "per_concurrency"
    # False: every cell and repeat gets fresh prompts, never text its server already answered
    # (promptbook.py); True: a cache-warm study, prompts shared by a panel's load points
    prompt_reuse: bool = False
    # shuffled: each block (repeat, round) measures its configs, and a server its cells, in an
    # order drawn from the seed (recorded), so no drift of the machine lines up with a config or
    # an axis; fixed: the plan's order
    cell_order: Literal["shuffled", "fixed"] = "shuffled"
    # a panel is decided once its leader is shown at most this fraction slower than the best
    # config (multiple comparisons with the best, claim.py; a budgeted sweep's stopping target)
    equivalence: float = Field(0.05, ge=0, lt=1)
    # the quantity the claim (its decision, a budgeted sweep's stopping rule, the answer) is
    # made on: output_rate (end to end), decode_rate (after the first token: what drafting
    # acts on), ttft or acceptance (specbench_lib/model/quantities.py); every page states the
    # others beside it
    claim_quantity: str = "output_rate"
    # how a budgeted sweep spends its error over its looks (Lan-DeMets: pocock or obf type)
    alpha_spending: Literal["pocock", "obf"] = "obf"
    # requests each server answers before its first cell, kept with the cells, never measured
    warmup_requests: int = Field(1, ge=0, le=MAX_WARMUP_REQUESTS)
    # output tokens of each warmup request (None: output_tokens). A short one already does what
    # warmup is for (first-use allocations, weights paged in, threads started) at less cost.
    warmup_output_tokens: int | None = Field(None, gt=0, le=MAX_LEVEL["output_tokens"])
    request_timeout_s: float = Field(120.0, gt=0)  # the whole request, unless timeouts.request_s
    seed: int = 0  # draws the prompts, the cell order, arrival times and the bootstrap
    known_bad: tuple[KnownBad, ...] = ()  # configs known to fail here: skipped with the reason
    timeouts: TimeoutParams = TimeoutParams()  # per-request time limits
    request_rate: LoadParams | None = None  # None: closed loop (concurrency in flight)
    host: HostParams = HostParams()  # other processes' CPU while a cell runs (busy_host)
    placement: PlacementParams = PlacementParams()  # local (one after another) or on Ray
    # failed requests a cell may tolerate (failed_fraction)
    max_failed_fraction: float = Field(cat.DEFAULT_MAX_FAILED_FRACTION, ge=0, lt=1)
    # measured tokens, and first tokens, whose receive time was lost to a client stall, as
    # fractions, above which a cell is invalid (coalesced_reads)
    max_coalesced_fraction: float = Field(cat.DEFAULT_MAX_COALESCED_FRACTION, ge=0, le=1)
    max_coalesced_first_fraction: float = Field(cat.DEFAULT_MAX_COALESCED_FIRST_FRACTION, ge=0, le=1)
    # the thresholds of cell rules that have no params key of their own, by the rule's name for
    # it (a rule's key `thresholds.<name>`, see docs/rules.md); a name no rule reads is refused
    thresholds: dict[str, float | str | bool | None] = Field(default_factory=dict)
    # measurements of each cell (mean and CV across them), each repeat a block of the claim: with
    # one, a comparison cannot tell a config from its time and is undecided (docs/drift.md)
    repeats: int = Field(1, ge=1, le=MAX_REPEATS)
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
    # a cell invalid for host-side rules alone (coalesced_reads, busy_host) is measured again at
    # once with fresh prompts, this many times at most, before it stays invalid
    retries: int = Field(2, ge=0, le=10)
    slo: SloParams | None = None  # latency limits: goodput and the load that still meets them
    # the phase's design: each stage one question with its axes, configs and time budget
    stages: tuple[StageParams, ...] = ()  # (a run measures one: model/stages.py, docs/stages.md)
    groups: dict[str, tuple[str, ...]] = Field(default_factory=dict)  # pooled: categories.py
    # more key or flag names whose values are secrets, hidden in params.yaml, the manifest and the
    # cells (whole names: `license_key` also hides `--license-key`); api_key, --api-key,
    # --hf-token, *_token, password, secret, Authorization and the like are always hidden
    redact: tuple[str, ...] = ()

    def requests_for(self, cell: CellSpec) -> int:
        """``requests_per_cell``, × the concurrency of a closed-loop cell with ``per_concurrency``."""
        scale = cell.concurrency if cell.closed_loop and self.requests_scale == "per_concurrency" else 1
        return self.requests_per_cell * scale

    def concurrency_at(self, context: int) -> tuple[int, ...]:
        """The concurrency levels at ``context``: each at most its ``concurrency_cap``."""
        return capped(self.concurrency, self.concurrency_cap.get(context))

    def request_timeouts(self) -> TimeoutParams:
        """The timeouts with the whole-request limit resolved (``request_timeout_s`` by default)."""
        if self.timeouts.request_s is not None:
            return self.timeouts
        return self.timeouts.model_copy(update={"request_s": self.request_timeout_s})

    @property
    def output_lengths(self) -> tuple[int, ...]:  # the plan's output lengths, one or several
        return self.output_tokens if isinstance(self.output_tokens, tuple) else (self.output_tokens,)

    @property
    def temperatures(self) -> tuple[float, ...]:  # the plan's temperatures, one or several
        return self.temperature if isinstance(self.temperature, tuple) else (self.temperature,)

    def sampling(self, cell: CellSpec) -> Sampling:
        """How ``cell``'s requests sample (a request's seed: :meth:`Sampling.for_prompt`)."""
        return Sampling(cell.temperature, self.top_p, self.top_k, self.seed)

    @field_validator("claim_quantity")
    @classmethod
    def _known_quantity(cls, value: str) -> str:
        if value not in QUANTITIES:
            raise ValueError(f"{value!r} is not a quantity a claim can be made on: use one of "
                             f"{', '.join(QUANTITIES)}")
        return value

    @field_validator("temperature")
    @classmethod
    def _temperatures(cls, values: float | tuple[float, ...]) -> float | tuple[float, ...]:
        listed = values if isinstance(values, tuple) else (values,)
        if not listed or any(not 0 <= v <= 2 for v in listed) or len(set(listed)) < len(listed):
            raise ValueError(f"must be distinct temperatures from 0 (greedy) to 2, got "
                             f"{list(listed)}")
        return values

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

    @field_validator("workloads")
    @classmethod
    def _per_category(cls, workloads: tuple[WorkloadParams, ...]) -> tuple[WorkloadParams, ...]:
        """A workload with ``categories`` becomes one workload per category (their own panels)."""
        return per_category(workloads)

    def runs(self, workload: WorkloadParams, context: int) -> bool:
        """Whether ``workload`` has cells at ``context``: its ``max_context``; a workload of
        natural length (prompts at their own length, the context their cap) at its smallest."""
        if not workload.runs_at(context):
            return False
        return not workload.natural or context == min(
            c for c in self.contexts if workload.runs_at(c))

    @field_validator("time_budget_s", mode="before")
    @classmethod
    def _budget_seconds(cls, value: Any) -> float | None:
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
        check_groups(self.groups, [w.name for w in self.workloads])
        check_measurable(self.claim_quantity, self.output_lengths)
        check_stages(self.stages, workloads=[w.name for w in self.workloads])
        check_caps(self.concurrency_cap)
        if not any(c.method == "auto" for c in self.configs):
            raise ValueError("one config must have method 'auto': it is the baseline of speedups")
        for w in self.workloads:
            if not any(w.runs_at(ctx) for ctx in self.contexts):
                raise ValueError(f"workload {w.name!r}: max_context {w.max_context} is below every "
                                 f"context of the plan {list(self.contexts)}; raise it or remove "
                                 f"the workload")
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
