"""SGLang ``launch_server``: the research engine on GPUs (facts in docs/engine-facts.md).

Methods: ``auto`` (no flags), ``linear`` (DFlash, budget = block size), ``tree`` (DDTree: a
flag template from params, forks differ), ``eagle``/``eagle3``/``mtp`` (EAGLE, EAGLE3, NEXTN),
``draft`` (STANDALONE) and ``ngram`` (NGRAM). Requests go to the native ``/generate`` with token
ids; its stream carries cumulative text and counts, and errors as ``data: {"error": ...}`` lines
inside an HTTP 200 response.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from ...core.errors import EngineError, ParamsError
from ...model.params import ServerConfig
from ...model.records import FinalStats
from ...model.sections import EngineParams, Sampling
from . import chat_template, tokenizer
from .adapter import BaseAdapter, int_option
from .base import BadLine, ServerInfo, StreamEvent, StreamParser, field_dict, field_ids, opt_int, opt_str
from .control import excerpt, json_object, request, url_of

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


@dataclass(frozen=True)
class SGLangAdapter(BaseAdapter):
    """Maps a config to ``sglang.launch_server`` flags and reads the native ``/generate`` stream.

    ``incremental`` is the running server's ``stream_output`` (:meth:`for_server`): its
    ``output_ids`` are then each chunk's own, else cumulative."""

    incremental: bool = False

    name = "sglang"
    needs_gpu = True
    spec_stats_per_request = True  # meta_info.spec_verify_ct on the final chunk
    python_dists = ("sglang",)
    # http_server.py flush_cache → Scheduler.flush_cache: resets the radix cache, the KV pools and
    # the draft worker's cache pool (NGRAM: its n-gram corpus); refused (400) while requests run
    flush_path = "/flush_cache"
    crash_signatures = tuple(re.compile(p) for p in (
        r"Scheduler hit an exception", r"SIGQUIT received", r"CUDA error: ",
        r"illegal (instruction|memory access)", r"out of memory", r"watchdog timeout",
        r"Health check failed", r"Capture cuda graph failed", r"Initialization failed",
        r"terminate called after throwing",
    ))

    def _default_argv(self, server: ServerConfig, engine: EngineParams, *, parallel: int,
                      model: Path, binary: Path) -> list[str]:
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
        return argv

    def _spec_flags(self, server: ServerConfig, engine: EngineParams, model: Path) -> list[str]:
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

    def _learns(self, server: ServerConfig, argv: Sequence[str]) -> str | None:
        if "NGRAM" in argv:
            return "NGRAM speculation keeps one n-gram cache for all requests"
        return None

    def server_info(self, client: httpx.Client) -> ServerInfo:
        """The effective settings from ``/server_info`` (older versions: ``/get_server_info``)."""
        info: dict[str, Any] | None = None
        for path in ("/server_info", "/get_server_info"):
            resp = request(client, "GET", path, limit_s=self.control_timeout_s)
            if resp.status_code == 200:
                info = json_object(client, path, resp)
                break
            if resp.status_code != 404:
                raise EngineError(f"unexpected status: {excerpt(resp)!r}", url=url_of(client, path),
                                  status=resp.status_code)
        if info is None:
            raise EngineError("neither /server_info nor /get_server_info answered",
                              url=url_of(client, "/server_info"), status=404)
        states = info.get("internal_states")
        state = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
        limits = [v for v in (opt_int(info.get("context_length")),
                              opt_int(info.get("max_total_num_tokens")),
                              opt_int(state.get("max_total_num_tokens"))) if v is not None and v > 0]
        if not limits:
            raise EngineError("server info has no context_length or max_total_num_tokens",
                              url=url_of(client, "/server_info"), status=200)
        settings = {k: v for k, v in info.items() if k not in _VOLATILE_INFO}
        served = opt_str(info.get("served_model_name")) or opt_str(info.get("model_path"))
        return ServerInfo(context_per_request=min(limits), raw=info, settings=settings,
                          served_model=served, version=opt_str(info.get("version")))

    def for_server(self, info: ServerInfo) -> SGLangAdapter:
        incremental = info.raw.get("stream_output") is True
        return self if incremental == self.incremental else replace(self, incremental=incremental)

    def speculative_reserve(self, server: ServerConfig) -> int:
        """Extra context a spec config takes: EAGLE family ``max(topk*steps, draft tokens)``."""
        if "reserve" in server.options:
            return int_option(server, "reserve", 0)
        budget = int(server.budget or 0)
        if server.method in _EAGLE_FAMILY:
            steps, topk = _steps_topk(server)
            return max(topk * steps, budget)
        return budget + 1 if server.method == "tree" else budget

    def tokenize(self, client: httpx.Client, text: str) -> list[int]:
        """The model's tokenizer.json when usable (``engine.tokenizer``), else ``/tokenize``."""
        engine = self.engine
        choice = engine.tokenizer if engine else "server"
        limit = self.control_timeout_s
        if choice == "server" or engine is None:
            return tokenizer.encode_server(client, text, limit_s=limit)
        path = engine.model if choice == "auto" else choice
        if choice == "auto" and (path is None or not tokenizer.local_available(path)):
            return tokenizer.encode_server(client, text, limit_s=limit)
        return tokenizer.encode_local(str(path), text)

    def _template_folder(self) -> str | None:
        engine = self.engine
        return None if engine is None else (
            engine.tokenizer if engine.tokenizer not in ("auto", "server") else engine.model)

    def chat_template_source(self) -> str:
        return chat_template.check_renders(self._template_folder())

    def chat_render(self, client: httpx.Client, messages: list[dict[str, str]]) -> list[int]:
        """The model's ``chat_template`` (its ``tokenizer_config.json``) rendered here with
        jinja2, the generation prompt added, and the text's ids from :meth:`tokenize` (SGLang
        has no endpoint that returns a templated prompt's ids)."""
        text = chat_template.render_local(self._template_folder(), messages)
        return self.tokenize(client, text)

    def generation_request(self, prompt: list[int], *, max_tokens: int, stop: str = "length",
                           sampling: Sampling | None = None) -> tuple[str, dict[str, Any]]:
        params: dict[str, Any] = {"max_new_tokens": max_tokens, "temperature": 0.0,
                                  "ignore_eos": stop == "length"}
        if sampling is not None:
            params.update(sampling.fields(seed_key="sampling_seed"))
        return "/generate", {"input_ids": prompt, "stream": True, "sampling_params": params}

    def stream_parser(self) -> Callable[[str], StreamEvent | None]:
        return _Stream(incremental=self.incremental)


class _Stream(StreamParser):
    """One ``/generate`` stream: text and ``completion_tokens`` are cumulative, so keep the last.

    The tokens a chunk brought are the ids that arrived in it (``output_ids``), never the
    server's ``completion_tokens``: a server whose count disagrees with what it streamed is then
    caught by ``token_count_mismatch`` instead of inflating throughput. Only a stream without
    ``output_ids`` is counted by the server's count."""

    def __init__(self, *, incremental: bool = False) -> None:
        self.text = ""
        self.completion = 0
        self.n_ids = 0
        self.incremental = incremental

    def parse(self, data: dict[str, Any]) -> StreamEvent:
        meta = field_dict(data, "meta_info")
        text = data.get("text", "")
        if not isinstance(text, str):
            raise BadLine("stream field 'text' is not a string")
        new_text = text[len(self.text):] if text.startswith(self.text) else text
        self.text = text
        completion = opt_int(meta.get("completion_tokens"))
        ids = self._new_ids(data)
        if ids is not None:
            n_tokens = len(ids)
        else:
            n_tokens = 0 if completion is None else max(0, completion - self.completion)
        if completion is not None:
            self.completion = completion
        event = StreamEvent(n_tokens=n_tokens, text=new_text, token_ids=ids or [])
        finish = meta.get("finish_reason")
        if finish:
            kind = opt_str(finish.get("type")) if isinstance(finish, dict) else str(finish)
            if kind == "abort":
                message = finish.get("message", "") if isinstance(finish, dict) else ""
                return StreamEvent(error=f"abort: {message}"[:500])
            verify = opt_int(meta.get("spec_verify_ct"))
            verify = verify if verify is not None and verify > 0 else None
            event.final = FinalStats(
                prompt_tokens=opt_int(meta.get("prompt_tokens")), completion_tokens=completion,
                finish_reason=kind, truncated=False, verify_steps=verify,
                cached_tokens=opt_int(meta.get("cached_tokens")),
                accepted_tokens=(completion - verify) if verify and completion is not None else None,
            )
        return event

    def _new_ids(self, data: dict[str, Any]) -> list[int] | None:
        """The ids this chunk brought (None without ``output_ids``): cumulative by default, a
        delta with ``--stream-output``; a cumulative list shorter than before is a bad line."""
        ids = field_ids(data, "output_ids")
        if ids is None:
            return None
        if self.incremental or not ids:  # an empty list brings none (then counted as none)
            new = ids
        elif len(ids) < self.n_ids:
            raise BadLine(f"stream field 'output_ids' shrank from {self.n_ids} to {len(ids)} "
                          "ids (cumulative unless the server runs with --stream-output)")
        else:
            new = ids[self.n_ids:]
        self.n_ids += len(new)
        return new


def _steps_topk(server: ServerConfig) -> tuple[int, int]:
    budget = int(server.budget or 1)
    topk = int_option(server, "topk", 1)
    steps = int_option(server, "steps", max(1, budget - 1))
    return steps, topk
