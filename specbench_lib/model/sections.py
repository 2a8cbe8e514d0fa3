"""The sections of a params file below its top level: the engine and how an attached server is
reached, per-request timeouts, open-loop load, the host check, the SLO and placement (validated
pydantic models; :mod:`~.params` composes them into :class:`~.params.SweepParams`, with the
workloads of :mod:`~.workloadparams`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .kinds import APIS, DEFAULT_KIND, GPU_CLASSES, KINDS
from .valuechecks import check_env

# auto: no speculation; ngram, draft: n-gram / draft-model drafting; linear: DFlash (a block of
# draft tokens); tree: DDTree (a draft tree of `budget` nodes); eagle, eagle3, mtp: EAGLE-family
# heads. Each engine adapter maps a method to its flags (or refuses it).
Method = Literal["auto", "ngram", "draft", "linear", "tree", "eagle", "eagle3", "mtp"]


class Strict(BaseModel):
    """A params model: unknown keys are refused, values cannot change once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineParams(Strict):
    """The server program and how to start it; flags per method live in ``engines/``.

    ``binary`` is the program (llama-server; for SGLang the Python of its environment, for vLLM
    the ``vllm`` executable; for ``template`` the program of ``argv_template``) and ``launcher``
    the arguments that follow it before the engine's own flags (SGLang: ``-m
    sglang.launch_server``, vLLM: ``serve``). Templates take ``{port}``, ``{host}``, ``{model}``,
    ``{budget}`` (also ``{budget+1}``, ``{budget-1}``), ``{tp}``, ``{context}``, ``{binary}``,
    ``{draft_model}``, ``{block}`` (its trained block) and a config's options, inserted literally.
    """

    kind: str = DEFAULT_KIND  # see kinds.KINDS
    binary: str | None = None  # None: the embedded llama-server (built by make engine)
    model: str | None = None  # a model file or folder; None: the embedded SmolLM2-135M
    model_cache: str | None = None  # a persistent copy to restage `model` from (tmpfs is wiped)
    host: str = "127.0.0.1"  # the address servers bind to; a non-loopback one is a warning
    port: int = Field(8090, ge=1024, le=65535)  # the port launched servers listen on
    context: int = Field(4096, gt=0, description="total context (tokens), shared by the slots")
    # auto: one thread per server CPU (every usable CPU when the server is not pinned)
    threads: int | Literal["auto"] = "auto"
    # the server's CPUs (cpuset.py): auto keeps the last CPU for the client on a CPU engine,
    # a list pins the server there and the client to the rest, null pins nothing
    cpus: Literal["auto"] | tuple[int, ...] | None = "auto"
    ready_timeout_s: float = Field(120.0, gt=0)  # how long a start may take to answer /health
    # the whole of one control call (server info, tokenize, /metrics), however slowly it answers
    control_timeout_s: float = Field(30.0, gt=0)
    extra_args: tuple[str, ...] = ()  # appended to every launched server's argv
    launcher: tuple[str, ...] | None = None  # None: the kind's default (see the docstring)
    draft_model: str | None = None  # the default draft model of configs that need one
    tp: int = Field(1, ge=1, description="tensor-parallel size (GPUs per server)")
    mem_fraction: float | None = Field(None, gt=0, le=1)  # GPU memory share (SGLang)
    attention_backend: str | None = None  # passed to a GPU engine that takes one
    tokenizer: str = "auto"  # auto | server | a tokenizer.json or model folder
    # False: launched servers reuse no KV of earlier prompts (SGLang --disable-radix-cache, vLLM
    # --no-enable-prefix-caching, llama.cpp cache_prompt false), so every request pays its whole
    # prefill, and a request the server reports as served from its cache is invalid
    prefix_cache: bool = False
    # how cells of one config are kept from remembering each other: auto (the adapter's choice,
    # e.g. a fresh llama-server per cell for ngram-mod, whose n-gram pool outlives requests),
    # restart (a fresh server for every cell), flush (the engine's reset before every cell:
    # SGLang's /flush_cache) or none (one server per config). With auto, a plan whose corpus
    # cannot feed fresh prompts for a whole server's life gets a reset before every cell
    # instead (flush where the engine has one, else restart), so prompts need to be fresh
    # only within a cell (specbench_lib/sweep/lifetimes.py)
    isolation: Literal["auto", "restart", "flush", "none"] = "auto"
    api: str | None = None  # the protocol of a template server (kinds.APIS)
    argv_template: tuple[str, ...] = ()  # a whole argv, for kind template (or any kind)
    spec_templates: dict[str, tuple[str, ...]] = Field(default_factory=dict)  # method → flags
    # added to a launched server's environment (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN: "1")
    env: dict[str, str] = Field(default_factory=dict)
    # the GPU class the servers run on, for the time model's defaults (cpu, A100, H100, H200,
    # B200; null: cpu for a CPU engine, H100 for a GPU engine; docs/workloads.md)
    gpu: str | None = None
    # the model's billions of parameters, for the time model's defaults (null: from the model's
    # name, Qwen3-8B is 8)
    model_params_b: float | None = Field(None, gt=0)
    # a server's start in seconds, for the time model before one has started (null: its class's)
    start_s: float | None = Field(None, gt=0)

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, gpu: str | None) -> str | None:
        found = {g.lower(): g for g in GPU_CLASSES}
        if gpu is not None and gpu.lower() not in found:
            raise ValueError(f"unknown GPU class {gpu!r}; known: {', '.join(GPU_CLASSES)} "
                             f"(the time model's defaults; null: cpu for a CPU engine, H100 for "
                             f"a GPU engine)")
        return None if gpu is None else found[gpu.lower()]

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in KINDS:
            raise ValueError(f"unknown engine kind {kind!r}; known: {', '.join(KINDS)}")
        return kind

    @field_validator("threads")
    @classmethod
    def _positive_threads(cls, threads: int | str) -> int | str:
        if isinstance(threads, int) and threads < 1:
            raise ValueError(f"must be a positive number of threads or 'auto', got {threads}")
        return threads

    @field_validator("cpus")
    @classmethod
    def _cpu_list(cls, cpus: tuple[int, ...] | str | None) -> tuple[int, ...] | str | None:
        if isinstance(cpus, tuple) and (not cpus or min(cpus) < 0 or len(set(cpus)) < len(cpus)):
            raise ValueError(f"a list of distinct CPU numbers (0, 1, ...), 'auto' or null, "
                             f"got {list(cpus)}")
        return cpus

    @field_validator("env")
    @classmethod
    def _os_env(cls, env: dict[str, str]) -> dict[str, str]:
        check_env(env)
        return env

    @field_validator("api")
    @classmethod
    def _known_api(cls, api: str | None) -> str | None:
        if api is not None and api not in APIS:
            raise ValueError(f"unknown api {api!r}; known: {', '.join(APIS)}")
        return api

    @model_validator(mode="after")
    def _kind_needs(self) -> EngineParams:
        if self.kind == "template" and (self.api is None or not self.argv_template):
            raise ValueError(f"kind 'template' needs 'api' ({', '.join(APIS)}: the protocol "
                             f"the server speaks) and 'argv_template' (its whole argv)")
        if self.kind != "template" and self.api is not None:
            raise ValueError(f"'api' is only for kind 'template'; kind {self.kind!r} speaks its own")
        if self.kind != DEFAULT_KIND and (self.binary is None or self.model is None):
            raise ValueError(f"kind {self.kind!r} needs 'binary' (the program: for sglang the "
                             f"Python of its environment, for vllm the vllm executable) and 'model'")
        return self


class AttachParams(Strict):
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


class TimeoutParams(Strict):
    """Per-request time limits (seconds); a request that exceeds one fails, it is never retried.

    ``request_s`` is the whole request; None takes the sweep's ``request_timeout_s``.
    """

    connect_s: float = Field(10.0, gt=0)
    first_token_s: float = Field(60.0, gt=0)
    between_tokens_s: float = Field(30.0, gt=0)
    request_s: float | None = Field(None, gt=0)


class RequestRateParams(Strict):
    """An open-loop arrival schedule: ``per_s`` requests a second, Poisson or evenly spaced.

    Arrival times are drawn from the sweep's seed; ``concurrency`` still caps requests in flight.
    """

    per_s: float = Field(gt=0)
    arrival: Literal["poisson", "fixed"] = "poisson"


class LoadParams(Strict):
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
    # poisson: gaps between arrivals drawn from the seed (a Poisson process); fixed: evenly spaced
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


class HostParams(Strict):
    """The host as evidence (:mod:`~specbench_lib.host.load`): it is sampled while each cell's requests run.

    A cell measured while processes other than the sweep and its server used more than
    ``max_other_cpu_cores`` CPU cores on average is ``invalid`` (``busy_host``); ``auto`` is
    max(0.5, CPUs / 8) (0.5 on a 2-core laptop, 2 on a 16-core GPU box); None judges nothing
    (the load is still recorded). ``sample_interval_s``: seconds between samples. A cell whose
    GPUs ran a compute process of someone else's holding more than ``max_other_gpu_mib`` MiB is
    ``invalid`` (``busy_gpu``; None: not judged; :mod:`~specbench_lib.host.gpus`).
    """

    max_other_cpu_cores: float | Literal["auto"] | None = "auto"
    max_other_gpu_mib: float | None = Field(0.0, ge=0)
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


class SloParams(Strict):
    """Per-request latency limits (seconds; None: no limit) and the fraction of a cell's
    requests that must meet them all for the cell to meet the SLO (see :mod:`~specbench_lib.analysis.slo`)."""

    ttft_s: float | None = Field(None, gt=0)
    tpot_s: float | None = Field(None, gt=0)
    e2e_s: float | None = Field(None, gt=0)
    percentile: float = Field(0.9, gt=0, le=1)

    @model_validator(mode="after")
    def _a_limit(self) -> SloParams:
        if self.ttft_s is None and self.tpot_s is None and self.e2e_s is None:
            raise ValueError("an slo needs at least one of ttft_s, tpot_s, e2e_s")
        return self


class PlacementParams(Strict):
    """Where each server config (one server launch and its cells) runs
    (:mod:`~specbench_lib.sweep.placement`).

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
