"""vLLM ``vllm serve``: OpenAI ``/v1/completions`` streaming; acceptance from ``/metrics``.

Methods map to ``--speculative-config`` JSON: ``ngram``, ``eagle``, ``eagle3``, ``mtp``,
``draft`` (``draft_model``) and ``linear`` (``dflash``), with ``num_speculative_tokens`` = budget;
a config's options are added to the JSON as they are (vLLM's own keys, e.g. prompt_lookup_max).
vLLM reports no per-request speculative counts: a cell's acceptance comes from counter deltas.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from ..errors import EngineError, ParamsError
from ..params import EngineParams, ServerConfig
from . import prometheus, tokenizer
from .argv import spec_override, template_launch, template_values
from .base import FinalStats, Launch, ServerInfo, StreamEvent, sse_json

DEFAULT_LAUNCHER = ("serve",)
METHODS = {"ngram": "ngram", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp",
           "draft": "draft_model", "linear": "dflash"}
_NEEDS_DRAFT = {"eagle", "eagle3", "draft", "linear"}
_PREFIX = "vllm:"


class VllmAdapter:
    """Maps a config to ``vllm serve`` flags and reads the OpenAI completions stream."""

    name = "vllm"
    needs_gpu = True
    spec_stats_per_request = False  # /metrics counter deltas around each cell
    health_path = "/health"
    crash_signatures = tuple(re.compile(p) for p in (
        r"EngineCore encountered a fatal error", r"EngineDeadError", r"CUDA error: ",
        r"illegal (instruction|memory access)", r"out of memory", r"RuntimeError: NCCL",
    ))

    def __init__(self, engine: EngineParams | None = None) -> None:
        self.engine = engine
        self.served_model: str | None = None

    def launch(self, server: ServerConfig, engine: EngineParams, *, parallel: int,
               model: Path, binary: Path) -> Launch:
        self.engine = engine
        templated = template_launch(server, engine, model=model, binary=binary, parallel=parallel,
                                    health_path="/health",
                                    builtin=lambda: self._spec_flags(server, engine))
        if templated is not None:
            return templated
        if engine.attention_backend:
            raise ParamsError("vLLM takes its attention backend from the VLLM_ATTENTION_BACKEND "
                              "environment variable or its own flag: put it in extra_args",
                              key="engine.attention_backend", value=engine.attention_backend)
        values = template_values(server, engine, model=model, binary=binary, parallel=parallel)
        launcher = DEFAULT_LAUNCHER if engine.launcher is None else engine.launcher
        argv = [str(binary), *launcher, str(model), "--host", engine.host, "--port", str(engine.port),
                "--tensor-parallel-size", str(engine.tp), "--max-model-len", str(engine.context)]
        if engine.mem_fraction is not None:
            argv += ["--gpu-memory-utilization", str(engine.mem_fraction)]
        if not engine.prefix_cache:
            argv += ["--no-enable-prefix-caching"]
        spec = spec_override(server, engine, values)
        argv += self._spec_flags(server, engine) if spec is None else spec
        argv += [*engine.extra_args, *server.extra_args]
        return Launch(argv, f"http://{engine.host}:{engine.port}", "/health")

    def _spec_flags(self, server: ServerConfig, engine: EngineParams) -> list[str]:
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

    def version(self, binary: Path) -> str:
        """``vllm --version`` ("unknown" if it cannot run)."""
        try:
            done = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                                  timeout=180, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return "unknown"
        lines = done.stdout.strip().splitlines()
        return lines[-1].strip() if done.returncode == 0 and lines else "unknown"

    def server_info(self, client: httpx.Client) -> ServerInfo:
        """The served model and ``max_model_len`` from ``/v1/models``."""
        resp = client.get("/v1/models")
        if resp.status_code != 200:
            raise EngineError("unexpected status", url="/v1/models", status=resp.status_code)
        models = resp.json().get("data") or []
        if not models or not isinstance(models[0].get("max_model_len"), int):
            raise EngineError("/v1/models lists no model with max_model_len", url="/v1/models")
        self.served_model = str(models[0].get("id"))
        settings = {k: models[0].get(k) for k in ("id", "root", "max_model_len")}  # not "created"
        return ServerInfo(context_per_request=models[0]["max_model_len"], raw=resp.json(),
                          settings=settings)

    def speculative_reserve(self, server: ServerConfig) -> int:
        if "reserve" in server.options:
            return int(server.options["reserve"])
        return int(server.budget or 0)

    def tokenize(self, client: httpx.Client, text: str) -> list[int]:
        """The model's tokenizer.json when ``engine.tokenizer`` names one, else ``/tokenize``."""
        engine = self.engine
        if engine is not None and engine.tokenizer not in ("auto", "server"):
            return tokenizer.encode_local(engine.tokenizer, text)
        return tokenizer.encode_server(client, text, model=self.served_model)

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

    def parse_line(self, line: str) -> StreamEvent | None:
        return _Stream()(line)

    def stream_parser(self) -> Callable[[str], StreamEvent | None]:
        return _Stream()

    def metrics_snapshot(self, client: httpx.Client) -> dict[str, float]:
        return prometheus.snapshot(client, _PREFIX)

    def cell_spec_stats(self, before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
        return prometheus.spec_deltas(before, after, _PREFIX)


class _Stream:
    """One completions stream: usage is cumulative (``continuous_usage_stats``); the last chunk
    before ``[DONE]`` has no choices and the final usage."""

    def __init__(self) -> None:
        self.completion = 0
        self.usage: dict[str, Any] | None = None
        self.finish: str | None = None
        self.final_sent = False

    def __call__(self, line: str) -> StreamEvent | None:
        data = sse_json(line)
        if isinstance(data, StreamEvent) and data.done:
            if not self.final_sent and self.usage is not None:
                data.final = self._final()
            return data
        if not isinstance(data, dict):
            return data
        if data.get("object") == "error":  # an error object at the top level
            return StreamEvent(error=json.dumps(data)[:500])
        choices = data.get("choices") or []
        usage = data.get("usage")
        text, n_tokens, ids = "", 0, []
        if choices:
            choice = choices[0]
            text = str(choice.get("text") or "")
            self.finish = choice.get("finish_reason") or self.finish
            if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                n_tokens = max(0, usage["completion_tokens"] - self.completion)
            elif isinstance(choice.get("token_ids"), list):
                n_tokens = len(choice["token_ids"])
            else:
                n_tokens = 1 if text else 0
            self.completion += n_tokens
            if isinstance(choice.get("token_ids"), list):
                ids = [int(t) for t in choice["token_ids"]]
        if isinstance(usage, dict):
            self.usage = usage
        event = StreamEvent(n_tokens=n_tokens, text=text, token_ids=ids)
        if not choices and isinstance(usage, dict):
            event.final = self._final()
        return event

    def _final(self) -> FinalStats:
        self.final_sent = True
        usage = self.usage or {}
        details = usage.get("prompt_tokens_details") or {}  # with --enable-prompt-tokens-details
        return FinalStats(prompt_tokens=usage.get("prompt_tokens"),
                          completion_tokens=usage.get("completion_tokens"),
                          finish_reason=self.finish, truncated=False,
                          cached_tokens=details.get("cached_tokens") if isinstance(details, dict)
                          else None)
