"""SGLang ``launch_server``: the research engine on GPUs (facts in docs/engine-facts.md).

Methods: ``auto`` (no flags), ``linear`` (DFlash, budget = block size), ``tree`` (DDTree: a
flag template from params, forks differ), ``eagle``/``eagle3``/``mtp`` (EAGLE, EAGLE3, NEXTN),
``draft`` (STANDALONE) and ``ngram`` (NGRAM). Requests go to the native ``/generate`` with token
ids; its stream carries cumulative text and counts, and errors as ``data: {"error": ...}`` lines
inside an HTTP 200 response.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from ...core.errors import EngineError, ParamsError
from ...model.cellspec import ServerConfig
from ...model.sampling import Sampling
from ...model.sections import EngineParams
from . import chat_template, sglangspec, tokenizer
from .adapter import BaseAdapter, int_option
from .base import ServerInfo, StreamEvent, opt_int, opt_str
from .control import excerpt, json_object, post_tokens, request, url_of
from .sglangstream import SGLangStream

DEFAULT_LAUNCHER = ("-m", "sglang.launch_server")
_EAGLE_FAMILY = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "draft": "STANDALONE"}
_NEEDS_DRAFT = {"linear", "eagle", "eagle3", "draft"}
_BUILTIN_OPTIONS = {"steps", "topk", "reserve", "scheduler"}

# server info that changes while it runs (throughput, memory) or per start (a drawn seed, the
# start's time): an attached server's fingerprint must not change with a restart
_VOLATILE_INFO = {"internal_states", "random_seed", "startup_time"}
# the budgets' one meaning (docs/engines.md "Budgets"): a ``linear`` budget is the drafter's block
# (tokens drafted per step); a ``tree`` budget is the tree's node count, the drafter's block kept
# at its trained size ({block}: option ``block``, else the draft model's config). Sources in
# tests/PROTOCOLS.md.
TREE_TEMPLATES = {
    # DB-Guo/sglang-ddtree-dev: budget = num-draft-tokens - 1, and num-draft-tokens is also the
    # drafter's block (dflash_worker.py:173-191): a budget other than block - 1 changes the block
    "fork": ("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "{draft_model}",
             "--speculative-dflash-enable-ddtree", "--speculative-num-draft-tokens", "{budget+1}"),
    # sgl-project/sglang PR #29907 (open): its own algorithm DDTREE, the block kept; it needs
    # the triton backend and page size 1, refuses --speculative-use-rejection-sampling and turns
    # the overlap scheduler off (arg_groups/speculative_hook.py:288-300 in the PR), so the argv
    # says so
    "pr29907": ("--speculative-algorithm", "DDTREE", "--speculative-draft-model-path",
                "{draft_model}", "--speculative-num-draft-tokens", "{block}",
                "--speculative-ddtree-budget", "{budget}", "--attention-backend", "triton",
                "--page-size", "1", "--disable-overlap-schedule"),
}
# upstream DFLASH (0.5.23 builtin; z-lab/dflash README): block = num-draft-tokens = budget
LINEAR_TEMPLATE = ("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path",
                   "{draft_model}", "--speculative-num-draft-tokens", "{budget}")
_NOT_COMPARED = {"--speculative-draft-model-path"}  # a path the server may resolve


@dataclass(frozen=True)
class SGLangAdapter(BaseAdapter):
    """Maps a config to ``sglang.launch_server`` flags and reads the native ``/generate`` stream.

    ``incremental`` is the running server's ``incremental_streaming_output`` (:meth:`for_server`;
    ``stream_output`` before SGLang 0.5.10): its ``output_ids`` are then each chunk's own, else
    cumulative."""

    incremental: bool = False

    name = "sglang"
    needs_gpu = True
    kv_pool_estimated = True  # profiled after loading (sweep/kvpool.py; tests/PROTOCOLS.md)
    spec_stats_per_request = True  # meta_info.spec_verify_ct on the final chunk
    python_dists = ("sglang",)
    # http_server.py flush_cache → Scheduler.flush_cache: resets the radix cache, the KV pools and
    # the draft worker's cache pool (NGRAM: its n-gram corpus); refused (400) while requests run
    flush_path = "/flush_cache"
    # model_config.py:1292-1316: a context past the derived one stops the start without it
    context_override_env = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
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
        return [*self._drafting(server, engine), *sglangspec.scheduler_flags(server)]

    def _drafting(self, server: ServerConfig, engine: EngineParams) -> list[str]:
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
                "SGLang has no released DDTree and forks differ: give the config spec_args or "
                "engine.spec_templates.tree, e.g. " + " ".join(TREE_TEMPLATES["pr29907"])
                + " (PR #29907, the block kept) or " + " ".join(TREE_TEMPLATES["fork"])
                + " (DB-Guo's fork: its budget sets the drafter's block too)",
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
        found = ServerInfo(context_per_request=min(limits), raw=info, settings=settings,
                           served_model=served, version=opt_str(info.get("version")))
        return replace(found, kv_tokens=sglangspec.kv_tokens(found))

    def for_server(self, info: ServerInfo) -> SGLangAdapter:
        incremental = (info.raw.get("incremental_streaming_output") is True
                       or info.raw.get("stream_output") is True)  # the name before sglang#20614
        return self if incremental == self.incremental else replace(self, incremental=incremental)

    def check_spec(self, server: ServerConfig, argv: Sequence[str], info: ServerInfo,
                   log_text: str) -> dict[str, Any]:
        """Each ``--speculative-*`` flag of the argv against the field ``/server_info`` resolved
        it to (a field's flag is ``--`` + its name with dashes: arg_groups/arg_utils.py:290);
        a baseline against ``speculative_algorithm`` null. A tree config's resolved attention
        backends must apply the tree mask
        (:class:`~specbench_lib.core.errors.TreeMaskIgnored`). The scheduler settings the
        server resolved (overlap, running requests, page size) are returned too: the fork's
        DFLASH forces overlap off and 48 running requests (docs/engines.md, "The fork's
        dflash")."""
        raw, found, wrong = info.raw, {}, []
        if server.method == "auto":
            algo = raw.get("speculative_algorithm")
            if algo not in (None, "", "NONE"):
                wrong.append(f"speculative_algorithm: asked none, the server runs {algo!r}")
            sglangspec.mismatch(server, wrong)
            return {"speculative_algorithm": algo, **sglangspec.scheduler(raw)}
        for flag, value in sglangspec.spec_args(argv):
            name = flag[2:].replace("-", "_")
            if flag in _NOT_COMPARED or name not in raw:
                continue
            found[name] = got = raw[name]
            if not sglangspec.same(value, got):
                wrong.append(f"{name}: asked {value!r}, the server runs {got!r}")
        sglangspec.mismatch(server, wrong)
        sglangspec.check_tree_mask(server, argv, raw)
        return {**found, **sglangspec.scheduler(raw)}

    def config_refusal(self, server: ServerConfig, argv: Sequence[str]) -> str | None:
        """A tree config whose argv leaves its verify pass without the tree mask
        (:func:`~.sglangspec.tree_mask_refusal`), refused before any server starts."""
        return sglangspec.tree_mask_refusal(server.label, argv)

    def drafter_block(self, argv: Sequence[str]) -> int | None:
        """DFLASH and DDTREE run the drafter at ``--speculative-num-draft-tokens`` (its alias
        ``--speculative-dflash-block-size``; speculative_hook.py:368-425, PR #29907)."""
        flags = dict(sglangspec.spec_args(argv))
        algorithm = str(flags.get("--speculative-algorithm", "")).upper()
        if algorithm not in ("DFLASH", "DDTREE"):
            return None
        value = flags.get("--speculative-num-draft-tokens", flags.get("--speculative-dflash-block-size"))
        return int(value) if isinstance(value, str) and value.isdigit() else None

    def pairs_seeds(self, info: ServerInfo, argv: Sequence[str]) -> bool:
        """SGLang draws with ``sampling_seed`` only under ``--enable-deterministic-inference``
        (sampling/sampling_batch_info.py:128,157-172); otherwise its seed is ignored. DFLASH's
        and DDTree's sampled verify draws ``torch.rand`` whatever the flag (the fork's
        dflash_utils.py:980-992): never paired."""
        flags = dict(sglangspec.spec_args(argv))
        algorithm = str(info.raw.get("speculative_algorithm")
                        or flags.get("--speculative-algorithm", "")).upper()
        if algorithm in ("DFLASH", "DDTREE") or sglangspec.is_tree(argv):
            return False
        return (info.raw.get("enable_deterministic_inference") is True
                or "--enable-deterministic-inference" in argv)

    def running_cap(self, server: ServerConfig, argv: Sequence[str]) -> int | None:
        return sglangspec.running_cap(server.method, argv)

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
        if self.engine is not None and self.engine.tokenizer == "server":
            return "the server's own (/tokenize with messages), once it runs"
        return chat_template.check_renders(self._template_folder())

    def chat_render(self, client: httpx.Client, messages: list[dict[str, str]],
                    options: Mapping[str, Any] | None = None) -> list[int]:
        """With ``engine.tokenizer: server``, the server's own render: ``POST /tokenize`` with
        ``messages``, ``add_generation_prompt`` and ``chat_template_kwargs`` (0.5.23:
        entrypoints/openai/protocol.py:1744-1790). Else the model's ``chat_template`` rendered
        here with jinja2 (``options`` its variables) and the text's ids from :meth:`tokenize`."""
        if self.engine is not None and self.engine.tokenizer == "server":
            body: dict[str, Any] = {"messages": messages, "add_generation_prompt": True,
                                    "add_special_tokens": False}
            if options:
                body["chat_template_kwargs"] = dict(options)
            return post_tokens(client, "/tokenize", body, limit_s=self.control_timeout_s)
        text = chat_template.render_local(self._template_folder(), messages, options)
        return self.tokenize(client, text)

    def generation_request(self, prompt: list[int], *, max_tokens: int, stop: str = "length",
                           sampling: Sampling | None = None) -> tuple[str, dict[str, Any]]:
        params: dict[str, Any] = {"max_new_tokens": max_tokens, "temperature": 0.0,
                                  "ignore_eos": stop == "length"}
        if sampling is not None:
            params.update(sampling.fields(seed_key="sampling_seed"))
        return "/generate", {"input_ids": prompt, "stream": True, "sampling_params": params}

    def stream_parser(self) -> Callable[[str], StreamEvent | None]:
        return SGLangStream(incremental=self.incremental)


def _steps_topk(server: ServerConfig) -> tuple[int, int]:
    budget = int(server.budget or 1)
    topk = int_option(server, "topk", 1)
    steps = int_option(server, "steps", max(1, budget - 1))
    return steps, topk
