"""An SGLang server on an emulated GPU (tests and benchmarks only; docs/emulator.md).

It takes ``sglang.launch_server``'s flags, so a params file with ``engine.kind: sglang`` runs it
with only its binary and launcher changed (``binary``: a Python; ``launcher``: this file and the
emulator's own ``--emu-*`` options), and speaks SGLang's native API as tests/PROTOCOLS.md records
it: ``/health`` (503 while it "loads"), ``/server_info`` and ``/get_server_info`` (the resolved
speculative settings, ``max_total_num_tokens``, ``max_running_requests``), ``/tokenize`` (with
``messages``: the stand-ins' ChatML), ``/generate`` streams (cumulative ``text`` and
``output_ids``; ``spec_verify_ct`` and the other counters on the last chunk) and
``/flush_cache`` (400 while requests run). Its timing is gpu_model.py's, its acceptance
gpu_accept.py's under a truth of gpu_profiles.py, every duration divided by ``--emu-time-scale``
(or ``SPECBENCH_EMU_TIME_SCALE``).

    python tests/support/gpu_emulator.py --model-path /m/Qwen3-8B --port 30000 \\
        --emu-gpu H100 --emu-truth published --emu-time-scale 60 \\
        --speculative-algorithm DFLASH --speculative-num-draft-tokens 16
"""

from __future__ import annotations

import argparse
import os
import random
import threading
import time
import uuid
import zlib
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fake_server import chatml, words
from gpu_figures import CODE_MARKERS, DOCSTRING_MARKERS, MATH_MARKERS, MODELS
from gpu_model import AUTO_MAX_RUNNING, CHUNKED_PREFILL, SPEC_MAX_RUNNING, drafter_share, hardware
from gpu_profiles import PROFILE_NAMES, parse_overrides, truth
from gpu_sched import Request, Scheduler, new_request
from gpu_truth import Config
from protocol_servers import _Base

EMULATOR_FILE = Path(__file__).resolve()
SCALE_ENV = "SPECBENCH_EMU_TIME_SCALE"
JITTER_S = 0.05  # a request's decode should last this much real time at least (the host's jitter)
START_S = 180.0  # specbench: an SGLang start takes 3-5 minutes (params/tp1.yaml)


TASK_IDS = {"code": 0, "math": 10_000, "chat": 20_000}  # each task's block of token ids


def classify(text: str) -> str:
    """The task a text is (its acceptance): code, math or chat."""
    if any(m in text for m in CODE_MARKERS) and any(m in text for m in DOCSTRING_MARKERS):
        return "code"
    if any(m in text for m in MATH_MARKERS):
        return "math"
    return "chat"


def encode(text: str, task: str | None = None) -> list[int]:
    """The emulator's tokenizer: a word a token (the stand-ins' words), each id in the block of
    the text's task, so a prompt built from documents still says which task it is."""
    base = TASK_IDS[task or classify(text)]
    return [1 + base + zlib.crc32(w.encode()) % 10_000 for w in words(text)]


def task_of(ids: list[int]) -> str:
    """The task most of a prompt's ids belong to (chat when none is known)."""
    counts = dict.fromkeys(TASK_IDS, 0)
    for i in ids:
        for task, base in TASK_IDS.items():
            if base < i <= base + 10_000:
                counts[task] += 1
    return max(counts, key=lambda t: (counts[t], t == "chat"))


def resolve_config(args: argparse.Namespace) -> Config:
    """The config the flags ask for: none (auto), DFLASH (linear: budget = block =
    num-draft-tokens), DFLASH with the fork's --speculative-dflash-enable-ddtree (tree: budget =
    num-draft-tokens − 1, the block too), or PR #29907's DDTREE (budget --speculative-ddtree-budget,
    block num-draft-tokens)."""
    algo = (args.speculative_algorithm or "").upper()
    block = args.speculative_num_draft_tokens or args.speculative_dflash_block_size or 16
    if not algo:
        return Config("auto", "auto")
    if algo == "DFLASH" and args.speculative_dflash_enable_ddtree:
        return Config(f"ddtree-b{block - 1}", "tree", block - 1, block)
    if algo == "DFLASH":
        return Config(f"dflash-b{block}", "linear", block, block)
    if algo == "DDTREE":
        return Config(f"ddtree-b{args.speculative_ddtree_budget}", "tree",
                      int(args.speculative_ddtree_budget or block - 1), block)
    raise SystemExit(f"gpu_emulator: --speculative-algorithm {algo} is not emulated "
                     "(DFLASH, DDTREE or none)")


def emulated_config(argv: list[str]) -> Config:
    """The config a server argv (the sweep's ``server_argv``) runs on the emulator: what its
    truth (gpu_truth.expected) is computed for, the tree's block as the flags set it."""
    args, _ = parser().parse_known_args(list(argv))
    return resolve_config(args)


class _Handler(_Base):
    server: EmulatorServer  # type: ignore[assignment]
    disable_nagle_algorithm = True  # as uvicorn does: a token's chunk leaves at once

    def _body(self) -> dict[str, Any]:
        import json

        data: dict[str, Any] = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        return data

    def do_GET(self) -> None:
        srv = self.server
        if self.path in ("/health", "/health_generate"):
            self._text(503 if srv.loading() else 200, "")
        elif self.path in ("/server_info", "/get_server_info"):
            self._json(200, srv.info())
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        srv = self.server
        if self.path in ("/tokenize", "/v1/tokenize"):
            self._tokenize_and_tag()
        elif self.path == "/flush_cache":
            self._body()
            if srv.scheduler.busy():
                self._text(400, "Cache not flushed because there are pending requests.")
                return
            print("Cache flushed successfully!", flush=True)
            self._text(200, "Cache flushed.\n")
        elif self.path == "/generate":
            self._generate(self._body())
        else:
            self._json(404, {"detail": "Not Found"})

    def _tokenize_and_tag(self) -> None:
        body, srv = self._body(), self.server
        if "messages" in body:
            text = chatml(body["messages"], body.get("chat_template_kwargs"))
        else:
            text = str(body.get("prompt", body.get("text", "")))
        ids = encode(text, srv.forced_task)
        self._json(200, {"count": len(ids), "max_model_len": srv.context, "tokens": ids})

    def _generate(self, body: dict[str, Any]) -> None:
        srv = self.server
        ids = list(body.get("input_ids") or encode(str(body.get("text", ""))))
        params = body.get("sampling_params") or {}
        max_new = int(params.get("max_new_tokens", 128))
        self._start_stream()
        if srv.loading():
            self._data({"error": {"message": "The server is not ready yet."}})
            self._data("[DONE]")
            self._end()
            return
        if len(ids) + max_new > srv.context:
            self._data({"error": {"message": (
                f"Requested token count exceeds the model's maximum context length of {srv.context} "
                f"tokens. You requested a total of {len(ids) + max_new} tokens: {len(ids)} tokens "
                f"from the input messages and {max_new} tokens for the completion.")}})
            self._data("[DONE]")
            self._end()
            return
        request = srv.make_request(ids, max_new, eos=not params.get("ignore_eos", False),
                                   temperature=float(params.get("temperature", 1.0)))
        srv.scheduler.submit(request)
        self._stream(request, len(ids), eos=not params.get("ignore_eos", False))

    def _stream(self, r: Request, n_prompt: int, *, eos: bool) -> None:
        rid, text, done = uuid.uuid4().hex, "", False
        out_ids: list[int] = []
        started = time.monotonic()
        while not done:
            made, done = r.events.get()
            while not done and not r.events.empty():  # coalesce what the GPU made meanwhile
                more, done = r.events.get_nowait()
                made += more
            for i in range(len(out_ids), len(out_ids) + made):
                out_ids.append(1000 + i)
                text += f" t{i}"
            meta: dict[str, Any] = {"id": rid, "finish_reason": None, "prompt_tokens": n_prompt,
                                    "weight_version": "default", "completion_tokens": len(out_ids),
                                    "cached_tokens": 0, "num_retractions": r.retractions}
            if done:
                meta["finish_reason"] = ({"type": "stop", "matched": 151645}
                                         if eos and r.produced < r.max_new
                                         else {"type": "length", "length": r.produced})
                meta["e2e_latency"] = time.monotonic() - started
                meta.update(r.spec_meta())
            self._data({"text": text, "output_ids": list(out_ids), "meta_info": meta})
        self._data("[DONE]")
        self._end()


def process_age() -> float:
    """Seconds since this process started (/proc; 0 where unknown): a GPU server's start counts
    from its process's, its Python's imports included."""
    try:
        since_boot = float(Path("/proc/uptime").read_text().split()[0])
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        return max(0.0, since_boot - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


class EmulatorServer(ThreadingHTTPServer):
    daemon_threads = True
    # SGLang's HTTP server listens with uvicorn's (and granian's) backlog of 2048
    # (http_server.py:2768-2779); socketserver's 5 dropped a c16 cell's 16 connects past the
    # fifth, each retried after the kernel's 1 s SYN timeout
    request_queue_size = 2048

    def __init__(self, args: argparse.Namespace, scale: float) -> None:
        super().__init__((args.host, args.port), _Handler)
        self.args, self.scale = args, scale
        self.api, self.mode = "sglang", "ok"
        self.context = args.context_length
        self.config = resolve_config(args)
        model = args.emu_model or Path(args.model_path).name
        if model not in MODELS:
            raise SystemExit(f"gpu_emulator: model {model!r} unknown: give --emu-model, one of "
                             f"{', '.join(MODELS)}")
        self.hw = hardware(args.emu_gpu, model, args.tp_size)
        self.truth = truth(args.emu_truth, parse_overrides(args.emu_set))
        spec = self.config.method != "auto"
        self.pool = self.hw.pool_tokens(args.mem_fraction_static,
                                        drafter_share(self.hw.model) if spec else 0.0)
        self.max_running = args.max_running_requests or (SPEC_MAX_RUNNING if spec else AUTO_MAX_RUNNING)
        self.scheduler = Scheduler(self.hw, self.truth, self.config, pool=self.pool,
                                   max_running=self.max_running, chunk=args.chunked_prefill_size,
                                   scale=scale, log=lambda line: print(line, flush=True))
        self.rng = random.Random(args.emu_seed)
        self.forced_task = args.emu_workload
        self.lock = threading.Lock()
        self.started = time.time()
        self.ready_at = time.monotonic() - process_age() + args.emu_start_s / scale

    def loading(self) -> bool:
        return bool(time.monotonic() < self.ready_at)

    def make_request(self, ids: list[int], max_new: int, *, eos: bool, temperature: float) -> Request:
        task = self.forced_task or task_of(ids)
        text = random.Random(hash((self.args.emu_seed or 0, *ids)))  # the prompt's own draws
        with self.lock:
            return new_request(self.config, self.truth, task=task, prompt=len(ids), max_new=max_new,
                               eos=eos, temperature=temperature, rng=self.rng, text=text)

    def info(self) -> dict[str, Any]:
        a, spec = self.args, self.config.method != "auto"
        info: dict[str, Any] = {
            "model_path": a.model_path, "served_model_name": a.model_path, "tp_size": a.tp_size,
            "context_length": self.context, "mem_fraction_static": a.mem_fraction_static,
            "max_total_num_tokens": self.pool, "max_running_requests": self.max_running,
            "max_req_input_len": self.context - 1, "chunked_prefill_size": a.chunked_prefill_size,
            "disable_overlap_schedule": spec, "disable_radix_cache": a.disable_radix_cache,
            "speculative_algorithm": (a.speculative_algorithm or None) and a.speculative_algorithm.upper(),
            "version": "0.5.23", "incremental_streaming_output": False,
            "enable_deterministic_inference": False, "startup_time": self.started,
            "internal_states": [{"max_total_num_tokens": self.pool,
                                 "emulator": self.emulator_state()}]}
        for key in ("speculative_num_draft_tokens", "speculative_draft_model_path",
                    "speculative_ddtree_budget", "speculative_dflash_enable_ddtree",
                    "speculative_dflash_block_size"):
            value = getattr(a, key)
            if value is not None:
                info[key] = value
        return info

    def emulator_state(self) -> dict[str, Any]:
        s = self.scheduler
        return {"gpu": self.hw.gpu.name, "model": self.hw.model.name, "tp": self.hw.tp,
                "truth": self.truth.name, "time_scale": self.scale, "config": self.config.name,
                "method": self.config.method, "budget": self.config.budget,
                "block": self.config.block, "running": len(s.running), "waiting": len(s.waiting),
                **{k: round(v, 6) for k, v in s.stats.items()}}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-path", required=True)
    p.add_argument("--tp-size", type=int, default=1)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--context-length", type=int, default=32768)
    p.add_argument("--mem-fraction-static", type=float, default=0.85)
    p.add_argument("--max-running-requests", type=int, default=None)
    p.add_argument("--chunked-prefill-size", type=int, default=CHUNKED_PREFILL)
    p.add_argument("--disable-radix-cache", action="store_true")
    for flag in ("--speculative-algorithm", "--speculative-draft-model-path"):
        p.add_argument(flag, default=None)
    for flag in ("--speculative-num-draft-tokens", "--speculative-dflash-block-size",
                 "--speculative-ddtree-budget", "--speculative-num-steps", "--speculative-eagle-topk"):
        p.add_argument(flag, type=int, default=None)
    p.add_argument("--speculative-dflash-enable-ddtree", action="store_true", default=None)
    p.add_argument("--emu-gpu", default="H100", help="H100, H200, A100 or B200")
    p.add_argument("--emu-model", default=None, help="default: the model path's folder name")
    p.add_argument("--emu-truth", default="published", choices=PROFILE_NAMES)
    p.add_argument("--emu-set", action="append", default=[], metavar="KNOB=VALUE")
    p.add_argument("--emu-time-scale", type=float, default=None,
                   help=f"GPU seconds a real second (default ${SCALE_ENV}, else 1)")
    p.add_argument("--emu-start-s", type=float, default=START_S, help="GPU seconds to start")
    p.add_argument("--emu-seed", type=int, default=None)
    p.add_argument("--emu-workload", default=None, help="every prompt this task (code, chat, math)")
    return p


def main(argv: list[str] | None = None) -> None:
    args, theirs = parser().parse_known_args(argv)
    scale = args.emu_time_scale or float(os.environ.get(SCALE_ENV, "1") or 1)
    server = EmulatorServer(args, scale)
    if theirs:
        print(f"ignored sglang flags: {' '.join(theirs)}", flush=True)
    state = server.emulator_state()
    print(f"gpu_emulator: {state['gpu']} x{state['tp']} {state['model']}, {state['config']}, truth "
          f"{state['truth']}, time scale {scale:g}, KV pool {server.pool} tokens, serving on "
          f"http://{args.host}:{server.server_address[1]}", flush=True)
    print(f"gpu_emulator: {scale_advice(server)}", flush=True)
    threading.Thread(target=_announce_ready, args=(server,), daemon=True).start()
    server.serve_forever()


def scale_advice(server: EmulatorServer, output: int = 256) -> str:
    """The largest time scale that keeps a lone request's decode of ``output`` tokens above the
    host's jitter in real time (benchmarks/emulator_fidelity.py measured why)."""
    from gpu_truth import Panel, expected

    rate = expected(server.config, Panel("code", 3072, 1, output, eos=False), server.truth, server.hw)
    longest = (output - 1) / rate.decode_rate / JITTER_S
    return (f"a lone {output}-token answer decodes in {(output - 1) / rate.decode_rate:.2f} GPU s "
            f"here: keep the time scale at most {longest:.0f} for its timing to hold")


def wait_ready(url: str, limit_s: float) -> None:
    """Poll ``/health`` until it answers 200 (``TimeoutError`` after ``limit_s``)."""
    import httpx

    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"the emulator at {url} was not ready in {limit_s:g} s")


def _announce_ready(server: EmulatorServer) -> None:
    time.sleep(max(0.0, server.ready_at - time.monotonic()))
    print("The server is fired up and ready to roll!", flush=True)


if __name__ == "__main__":
    main()
