"""SGLang ``launch_server``: the research engine on GPUs (facts in shared/ENGINE.md).

Methods: ``auto`` (no flags), ``linear`` (DFlash, budget = block size), ``tree`` (DDTree: a
flag template from params, forks differ), ``eagle``/``eagle3``/``mtp`` (EAGLE, EAGLE3, NEXTN),
``draft`` (STANDALONE) and ``ngram`` (NGRAM). Requests go to the native ``/generate`` with token
ids; its stream carries cumulative text and counts, and errors as ``data: {"error": ...}`` lines
inside an HTTP 200 response.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from ..errors import EngineError, ParamsError
from ..params import EngineParams, ServerConfig
from . import tokenizer
from .argv import spec_override, template_launch, template_values
from .base import FinalStats, Launch, ServerInfo, StreamEvent, sse_json

DEFAULT_LAUNCHER = ("-m", "sglang.launch_server")
_EAGLE_FAMILY = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "draft": "STANDALONE"}
_NEEDS_DRAFT = {"linear", "eagle", "eagle3", "draft"}
_BUILTIN_OPTIONS = {"steps", "topk", "reserve"}
# server info that changes while it runs (throughput, memory) or per start (a drawn seed)
_VOLATILE_INFO = {"internal_states", "random_seed"}
TREE_TEMPLATES = {
    "fork": ("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "{draft_model}",
             "--speculative-dflash-enable-ddtree", "--speculative-num-draft-tokens", "{budget+1}"),
    "upstream-pr": ("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path",
                    "{draft_model}", "--speculative-ddtree-budget", "{budget}"),
}


class SGLangAdapter:
    """Maps a config to ``sglang.launch_server`` flags and reads the native ``/generate`` stream."""

    name = "sglang"
    needs_gpu = True
    spec_stats_per_request = True  # meta_info.spec_verify_ct on the final chunk
    health_path = "/health"
    crash_signatures = tuple(re.compile(p) for p in (
        r"Scheduler hit an exception", r"SIGQUIT received", r"CUDA error: ",
        r"illegal (instruction|memory access)", r"out of memory", r"watchdog timeout",
        r"Health check failed", r"Capture cuda graph failed", r"Initialization failed",
        r"terminate called after throwing",
    ))

    def __init__(self, engine: EngineParams | None = None) -> None:
        self.engine = engine

    def launch(self, server: ServerConfig, engine: EngineParams, *, parallel: int,
               model: Path, binary: Path) -> Launch:
        self.engine = engine
        templated = template_launch(server, engine, model=model, binary=binary, parallel=parallel,
                                    health_path="/health",
                                    builtin=lambda: self._spec_flags(server, engine))
        if templated is not None:
            return templated
        values = template_values(server, engine, model=model, binary=binary, parallel=parallel)
        launcher = DEFAULT_LAUNCHER if engine.launcher is None else engine.launcher
        argv = [str(binary), *launcher, "--model-path", str(model), "--tp-size", str(engine.tp),
                "--host", engine.host, "--port", str(engine.port),
                "--context-length", str(engine.context)]
        if engine.mem_fraction is not None:
            argv += ["--mem-fraction-static", str(engine.mem_fraction)]
        if engine.attention_backend:
            argv += ["--attention-backend", engine.attention_backend]
        if not engine.prefix_cache:
            argv += ["--disable-radix-cache"]
        spec = spec_override(server, engine, values)
        argv += self._spec_flags(server, engine) if spec is None else spec
        argv += [*engine.extra_args, *server.extra_args]
        return Launch(argv, f"http://{engine.host}:{engine.port}", "/health")

    def _spec_flags(self, server: ServerConfig, engine: EngineParams) -> list[str]:
        method, budget = server.method, server.budget
        if method == "auto" or budget is None:
            return []
        key = f"configs.{server.name}"
        unknown = sorted(set(server.options) - _BUILTIN_OPTIONS)
        if unknown:
            raise ParamsError(f"SGLang method {method!r} takes options {sorted(_BUILTIN_OPTIONS)}, "
                              f"not {unknown} (use spec_args for other flags)", key=f"{key}.options",
                              value=unknown)
        draft = server.draft_model or engine.draft_model
        if method in _NEEDS_DRAFT and not draft:
            raise ParamsError(f"SGLang method {method!r} needs a draft model: set draft_model in the "
                              f"config or the engine", key=f"{key}.draft_model")
        if method == "tree":
            raise ParamsError(
                "SGLang has no upstream DDTree flags and forks differ: give the config spec_args or "
                "engine.spec_templates.tree, e.g. " + " ".join(TREE_TEMPLATES["fork"]) + " (a fork) or "
                + " ".join(TREE_TEMPLATES["upstream-pr"]) + " (a proposed upstream PR)",
                key=f"{key}.spec_args")
        if method == "linear":
            return ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", str(draft),
                    "--speculative-num-draft-tokens", str(budget)]
        if method == "ngram":
            return ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", str(budget)]
        if method in _EAGLE_FAMILY:
            steps, topk = _steps_topk(server)
            flags = ["--speculative-algorithm", _EAGLE_FAMILY[method]]
            if draft:
                flags += ["--speculative-draft-model-path", str(draft)]
            return flags + ["--speculative-num-steps", str(steps), "--speculative-eagle-topk",
                            str(topk), "--speculative-num-draft-tokens", str(budget)]
        raise ParamsError(f"SGLang has no method {method!r}", key=f"{key}.method", value=method)

    def version(self, binary: Path) -> str:
        """``sglang.__version__`` as the launcher's Python sees it ("unknown" if it cannot)."""
        try:
            done = subprocess.run([str(binary), "-c", "import sglang; print(sglang.__version__)"],
                                  capture_output=True, text=True, timeout=180, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return "unknown"
        lines = done.stdout.strip().splitlines()
        return lines[-1].strip() if done.returncode == 0 and lines else "unknown"

    def server_info(self, client: httpx.Client) -> ServerInfo:
        """The effective settings from ``/server_info`` (older versions: ``/get_server_info``)."""
        info: dict[str, Any] | None = None
        for path in ("/server_info", "/get_server_info"):
            resp = client.get(path)
            if resp.status_code == 200 and isinstance(resp.json(), dict):
                info = resp.json()
                break
            if resp.status_code != 404:
                raise EngineError("unexpected status", url=path, status=resp.status_code)
        if info is None:
            raise EngineError("neither /server_info nor /get_server_info answered", url="/server_info",
                              status=404)
        states = info.get("internal_states") or [{}]
        state = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
        limits = [v for v in (info.get("context_length"), info.get("max_total_num_tokens"),
                              state.get("max_total_num_tokens"))
                  if isinstance(v, int) and not isinstance(v, bool) and v > 0]
        if not limits:
            raise EngineError("server info has no context_length or max_total_num_tokens",
                              url="/server_info")
        settings = {k: v for k, v in info.items() if k not in _VOLATILE_INFO}
        return ServerInfo(context_per_request=min(limits), raw=info, settings=settings)

    def speculative_reserve(self, server: ServerConfig) -> int:
        """Extra context a spec config takes: EAGLE family ``max(topk*steps, draft tokens)``."""
        if "reserve" in server.options:
            return int(server.options["reserve"])
        budget = int(server.budget or 0)
        if server.method in _EAGLE_FAMILY:
            steps, topk = _steps_topk(server)
            return max(topk * steps, budget)
        return budget + 1 if server.method == "tree" else budget

    def tokenize(self, client: httpx.Client, text: str) -> list[int]:
        """The model's tokenizer.json when usable (``engine.tokenizer``), else ``/tokenize``."""
        engine = self.engine
        choice = engine.tokenizer if engine else "server"
        if choice == "server" or engine is None:
            return tokenizer.encode_server(client, text)
        path = engine.model if choice == "auto" else choice
        if choice == "auto" and (path is None or not tokenizer.local_available(path)):
            return tokenizer.encode_server(client, text)
        return tokenizer.encode_local(str(path), text)

    def generation_request(self, prompt: list[int], *, max_tokens: int) -> tuple[str, dict[str, Any]]:
        return "/generate", {
            "input_ids": prompt, "stream": True,
            "sampling_params": {"max_new_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True},
        }

    def parse_line(self, line: str) -> StreamEvent | None:
        """Parse one line alone (counts need :meth:`stream_parser`, which remembers the last one)."""
        return _Stream()(line)

    def stream_parser(self) -> Callable[[str], StreamEvent | None]:
        return _Stream()

    def metrics_snapshot(self, client: httpx.Client) -> dict[str, float]:
        return {}

    def cell_spec_stats(self, before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
        return {}


class _Stream:
    """One ``/generate`` stream: text and ``completion_tokens`` are cumulative, so keep the last."""

    def __init__(self) -> None:
        self.text = ""
        self.completion = 0
        self.n_ids = 0

    def __call__(self, line: str) -> StreamEvent | None:
        data = sse_json(line)
        if not isinstance(data, dict):
            return data
        meta = data.get("meta_info") or {}
        text = str(data.get("text", ""))
        new_text = text[len(self.text):] if text.startswith(self.text) else text
        self.text = text
        completion = meta.get("completion_tokens")
        n_tokens = 0
        if isinstance(completion, int):
            n_tokens = max(0, completion - self.completion)
            self.completion = completion
        event = StreamEvent(n_tokens=n_tokens, text=new_text, token_ids=self._new_ids(data, n_tokens))
        finish = meta.get("finish_reason")
        if finish:
            kind = finish.get("type") if isinstance(finish, dict) else str(finish)
            if kind == "abort":
                message = finish.get("message", "") if isinstance(finish, dict) else ""
                return StreamEvent(error=f"abort: {message}"[:500])
            verify = meta.get("spec_verify_ct")
            verify = verify if isinstance(verify, int) and verify > 0 else None
            event.final = FinalStats(
                prompt_tokens=meta.get("prompt_tokens"), completion_tokens=completion,
                finish_reason=kind, truncated=False, verify_steps=verify,
                cached_tokens=meta.get("cached_tokens"),
                accepted_tokens=(completion - verify) if verify and isinstance(completion, int) else None,
            )
        return event

    def _new_ids(self, data: dict[str, Any], n_tokens: int) -> list[int]:
        """``output_ids`` are cumulative by default, a delta with ``--stream-output``."""
        ids = data.get("output_ids")
        if not isinstance(ids, list):
            return []
        if len(ids) == self.n_ids + n_tokens:
            new = ids[self.n_ids:]
        else:
            new = ids[-n_tokens:] if n_tokens else []
        self.n_ids += len(new)
        return [int(t) for t in new]


def _steps_topk(server: ServerConfig) -> tuple[int, int]:
    budget = int(server.budget or 1)
    topk = int(server.options.get("topk", 1))
    steps = int(server.options.get("steps", max(1, budget - 1)))
    return steps, topk
