"""llama.cpp ``llama-server``: the embedded CPU engine (facts in shared/ENGINE.md)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from ..errors import EngineError
from ..params import EngineParams, ServerConfig
from . import prometheus
from .argv import spec_override, template_launch, template_values
from .base import FinalStats, Launch, ServerInfo, StreamEvent, sse_json

_NGRAM_DEFAULTS = {"n_match": 8, "n_min": 8}
# /props keys that describe the configuration (not media_marker: random per start; is_sleeping)
_SETTINGS = ("default_generation_settings", "total_slots", "model_path", "model_ftype", "build_info")


class LlamaCppAdapter:
    """Maps a config to ``llama-server`` flags and reads its native ``/completion`` stream."""

    name = "llamacpp"
    needs_gpu = False
    spec_stats_per_request = True  # timings.draft_n / draft_n_accepted per request
    health_path = "/health"
    crash_signatures = tuple(re.compile(p) for p in (
        r"GGML_ASSERT", r"Segmentation fault", r"terminate called after throwing",
        r"std::bad_alloc", r"out of memory", r"[Ii]llegal instruction", r"Aborted",
    ))

    def __init__(self, engine: EngineParams | None = None) -> None:
        self.engine = engine

    def launch(self, server: ServerConfig, engine: EngineParams, *, parallel: int,
               model: Path, binary: Path) -> Launch:
        templated = template_launch(server, engine, model=model, binary=binary, parallel=parallel,
                                    health_path="/health", builtin=lambda: self._spec_flags(server, model))
        if templated is not None:
            return templated
        values = template_values(server, engine, model=model, binary=binary, parallel=parallel)
        spec = spec_override(server, engine, values)
        argv = [str(binary), "-m", str(model), "--host", engine.host, "--port", str(engine.port),
                "-np", str(parallel), "-c", str(engine.context * parallel), "--no-kv-unified",
                "-t", str(engine.threads), "--no-webui", "--metrics", "--log-prefix"]
        argv += self._spec_flags(server, model) if spec is None else spec
        argv += [*engine.extra_args, *server.extra_args]
        return Launch(argv, f"http://{engine.host}:{engine.port}", "/health")

    def _spec_flags(self, server: ServerConfig, model: Path) -> list[str]:
        opts = server.options
        if server.method == "auto":
            return []
        budget = int(server.budget or 0)
        if server.method == "ngram":
            n_match = int(opts.get("n_match", _NGRAM_DEFAULTS["n_match"]))
            n_min = min(int(opts.get("n_min", _NGRAM_DEFAULTS["n_min"])), budget)
            return ["--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", str(n_match),
                    "--spec-ngram-mod-n-min", str(n_min), "--spec-ngram-mod-n-max", str(budget)]
        if server.method == "draft":
            draft = server.draft_model or str(model)
            n_min = min(int(opts.get("n_min", 0)), budget)
            return ["--spec-type", "draft-simple", "-md", draft, "--spec-draft-n-max", str(budget),
                    "--spec-draft-n-min", str(n_min)]
        raise ValueError(f"llama.cpp has no method {server.method!r}; use auto, ngram or draft")

    def version(self, binary: Path) -> str:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                              timeout=30, check=False)
        text = (done.stdout + done.stderr).strip()
        match = re.search(r"version:\s*(\S+.*)", text)
        return match.group(1).strip() if match else text.splitlines()[0] if text else "unknown"

    def server_info(self, client: httpx.Client) -> ServerInfo:
        props = _get_json(client, "/props")
        settings = props.get("default_generation_settings", {})
        n_ctx = settings.get("n_ctx")
        if not isinstance(n_ctx, int) or n_ctx <= 0:
            raise EngineError("/props has no default_generation_settings.n_ctx", url="/props")
        settings = {k: props[k] for k in _SETTINGS if k in props}
        return ServerInfo(context_per_request=n_ctx, raw=props, settings=settings)

    def speculative_reserve(self, server: ServerConfig) -> int:
        return int(server.budget or 0)

    def tokenize(self, client: httpx.Client, text: str) -> list[int]:
        resp = client.post("/tokenize", json={"content": text, "add_special": False})
        if resp.status_code != 200:
            raise EngineError("tokenize failed", url="/tokenize", status=resp.status_code)
        tokens = resp.json().get("tokens")
        if not isinstance(tokens, list):
            raise EngineError("tokenize answer has no 'tokens' list", url="/tokenize")
        return [int(t) for t in tokens]

    def generation_request(self, prompt: list[int], *, max_tokens: int) -> tuple[str, dict[str, Any]]:
        return "/completion", {
            "prompt": prompt, "n_predict": max_tokens, "temperature": 0.0, "ignore_eos": True,
            "cache_prompt": bool(self.engine and self.engine.prefix_cache), "stream": True,
            "return_tokens": True,
        }

    def parse_line(self, line: str) -> StreamEvent | None:
        return _Stream()(line)

    def stream_parser(self) -> Callable[[str], StreamEvent | None]:
        return _Stream()

    def metrics_snapshot(self, client: httpx.Client) -> dict[str, float]:
        """``llamacpp:spec_decode_*`` counters (the server runs with ``--metrics``)."""
        return prometheus.snapshot(client, "llamacpp:")

    def cell_spec_stats(self, before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
        """Counter deltas: a cross-check of the per-request ``timings`` draft counts."""
        return prometheus.spec_deltas(before, after, "llamacpp:")


def _get_json(client: httpx.Client, path: str) -> dict[str, Any]:
    resp = client.get(path)
    if resp.status_code != 200:
        raise EngineError("unexpected status", url=path, status=resp.status_code)
    data = resp.json()
    if not isinstance(data, dict):
        raise EngineError("answer is not a JSON object", url=path, status=resp.status_code)
    return data


class _Stream:
    """One ``/completion`` stream. An event's token count is the step of the cumulative
    ``tokens_predicted``, not the length of its ``tokens``: llama-server holds back a token that
    ends inside a UTF-8 character and then sends one event that lists only the last id (measured:
    a 3-byte character from 2 tokens arrived as ``"tokens": [231], "tokens_predicted": 2``)."""

    def __init__(self) -> None:
        self.predicted = 0

    def __call__(self, line: str) -> StreamEvent | None:
        data = sse_json(line)
        if not isinstance(data, dict):
            return data
        tokens = data.get("tokens")
        ids = [int(t) for t in tokens] if isinstance(tokens, list) else []
        n_tokens = len(ids) if isinstance(tokens, list) else (1 if data.get("content") else 0)
        predicted = data.get("tokens_predicted")
        if isinstance(predicted, int):
            n_tokens = max(predicted - self.predicted, 0)
        self.predicted += n_tokens
        event = StreamEvent(n_tokens=n_tokens, text=str(data.get("content", "")), token_ids=ids)
        if data.get("stop"):
            timings = data.get("timings", {})
            predicted = data.get("tokens_predicted", timings.get("predicted_n"))
            accepted = timings.get("draft_n_accepted", 0)
            event.final = FinalStats(
                prompt_tokens=data.get("tokens_evaluated", timings.get("prompt_n")),
                completion_tokens=predicted,
                finish_reason=data.get("stop_type"),
                truncated=bool(data.get("truncated", False)),
                draft_tokens=timings.get("draft_n", 0),
                accepted_tokens=accepted,
                verify_steps=(predicted - accepted) if isinstance(predicted, int) else None,
                cached_tokens=timings.get("cache_n"),
            )
            event.done = True
        return event

