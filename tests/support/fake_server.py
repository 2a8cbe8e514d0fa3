"""A fault-injecting stand-in for llama.cpp's streaming ``/completion`` (tests only).

It speaks the native llama.cpp stream as recorded in docs/engine-facts.md (one ``data:`` line per
token event, a final ``"stop": true`` event with ``timings``; errors as HTTP 400 JSON). Each mode
injects one fault our users met. It is never the engine of a real sweep.

Run as a program (``python tests/support/fake_server.py --port P --mode M``) it is a whole fault *server*
for the fault-matrix sweeps, started by the sweep through the argv-template engine: it also answers
``/health``, ``/props`` and ``/tokenize``, and the modes ``startup_crash`` (prints a CUDA error and
exits before binding), ``never_ready`` (``/health`` 503 forever), ``cuda_crash`` (the second
generation prints ``CUDA error: an illegal instruction was encountered`` and the process dies
mid-stream), ``warmup_crash`` (the same, on the first generation: the server's warmup request),
``http500_some`` (every second generation answers 500), ``zombie`` (a stream stops and
``/health`` stops answering too) and ``slow_death`` (the second generation closes the server's
sockets mid-stream, then the process SIGKILLs itself 1.5 s later, as a killed process that takes a
while to tear down: its health fails before its exit status exists).

Malformed answers (each a generation's whole reply): ``done_only`` (a 200 stream of only
``data: [DONE]``), ``no_events`` (a 200 chunked body with no event at all), ``bad_utf8`` (a token
event, then a line that is not UTF-8), ``lone_surrogate`` (an event whose content is the JSON
escape ``\\ud800``, then a normal end), ``bad_length`` (``Content-Length: many``) and
``bad_chunk`` (a chunk size that is not hex); ``no_final`` (every token, then the body ends
without the final ``stop`` event).

``overclaim`` streams a quarter of the tokens, then a final event that claims all of them (as a server
that lost events would). ``countlie`` streams half the tokens, one id an event, while each event's
``tokens_predicted`` rises by 2 (a count that runs ahead of the ids all along, up to the claim).
``no_tokenize``: ``/tokenize`` answers 404 (a config-level fault). As a program, ``shutdown_crash``
serves well, then SIGTERM makes it write llama.cpp's ``GGML_ASSERT`` line and die by SIGKILL.
``learns`` is a confound with a known truth: like llama.cpp's ngram-mod it remembers the
12-grams of every prompt it was sent, and a prompt whose 12-grams it has seen before is
"drafted": the fraction f seen makes f x 90 % of its tokens accepted drafts and each token take
(1 - 0.75 f) of ``--interval``. A fresh server sent fresh prompts has f = 0: no accepted draft,
the full interval. ``--steps BUDGET:TAU:COST`` is a drafter with a known split (tests/test_stepcost.py):
after the first token, its config's verify steps yield TAU tokens on average (step j
⌊(j+1)·TAU⌋ − ⌊j·TAU⌋, each token its own event, as llama.cpp sends accepted drafts), one step
every COST × ``--interval``, and its ``timings`` count the drafts accepted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = ("ok", "http400", "error_line", "empty", "crash", "hang", "short", "chunky",
         "done_only", "no_events", "bad_utf8", "lone_surrogate", "bad_length", "bad_chunk",
         "no_final", "learns", "overclaim", "countlie", "no_tokenize")
PROCESS_MODES = (*MODES, "startup_crash", "never_ready", "cuda_crash", "http500_some", "zombie",
                 "warmup_crash", "slow_death", "setsid", "shutdown_crash")
SHUTDOWN_CRASH = "GGML_ASSERT(buf != NULL) failed"  # llama.cpp's signature (crash_signatures)
CUDA_ERROR = "CUDA error: an illegal instruction was encountered"
_SPECIAL = re.compile(r"(<\|im_(?:start|end)\|>)")


def chatml(messages: list[dict[str, str]], options: dict | None = None) -> str:
    """SmolLM2's template (ChatML), the generation prompt added, as ``/apply-template`` renders
    it (``add_generation_prompt`` defaults to true: tools/server/server-common.cpp); with
    ``options`` ``enable_thinking: false`` the empty reasoning block Qwen3's template adds."""
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    think = "<think>\n\n</think>\n\n" if (options or {}).get("enable_thinking") is False else ""
    return turns + "<|im_start|>assistant\n" + think


def words(text: str) -> list[str]:
    """The stand-in tokenizer's tokens: words, the template's special tokens on their own
    (``parse_special`` defaults to true in ``/tokenize``)."""
    return _SPECIAL.sub(r" \1 ", text).split()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeLlamaServer

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        mode = self.server.mode
        if self.path == "/props":
            self._json(200, {"default_generation_settings": {"n_ctx": self.server.n_ctx}})
        elif mode == "never_ready" or (mode == "zombie" and self.server.hung.is_set()):
            if mode == "zombie":
                time.sleep(self.server.hang_s)
            self._json(503, {"error": {"message": "Loading model"}})
        else:
            self._json(200, {"status": "ok"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/tokenize" and self.server.mode == "no_tokenize":
            self._json(404, {"error": {"code": 404, "message": "File Not Found"}})
            return
        if self.path == "/tokenize":
            found = words(str(body.get("content", "")))
            self._json(200, {"tokens": [sum(map(ord, w)) % 30000 for w in found]})
            return
        if self.path == "/apply-template":
            self.server.templated.append(body)
            self._json(200, {"prompt": chatml(body["messages"], body.get("chat_template_kwargs"))})
            return
        self.server.bodies.append(body)
        mode = self.server.mode
        with self.server.lock:
            self.server.generations += 1
            nth = self.server.generations
        n_prompt, n_predict = len(body["prompt"]), int(body["n_predict"])
        if mode == "http500_some" and nth % 2 == 0:
            self._json(500, {"error": {"code": 500, "message": "internal error in slot"}})
            return
        if (mode == "cuda_crash" and nth >= 2) or mode == "warmup_crash":
            self._start_stream()
            self._event({"content": "x", "tokens": [1], "stop": False})
            print(f"Scheduler hit an exception: {CUDA_ERROR}", file=sys.stderr, flush=True)
            os._exit(134)
        if mode == "slow_death" and nth >= 2:
            self._start_stream()
            self._event({"content": "x", "tokens": [1], "stop": False})
            self.server.socket.close()  # a killed process closes its sockets first,
            self.connection.shutdown(socket.SHUT_RDWR)
            time.sleep(1.5)  # then takes a while to be reapable (a large one tearing down)
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "zombie":
            self._start_stream()
            self._event({"content": "x", "tokens": [1], "stop": False})
            self.server.hung.set()
            time.sleep(self.server.hang_s)
            return
        if mode == "http400":
            self._json(400, {"error": {"code": 400, "type": "exceed_context_size_error",
                                       "n_prompt_tokens": n_prompt, "n_ctx": 512}})
            return
        if mode in ("done_only", "no_events", "bad_utf8", "lone_surrogate", "bad_length",
                    "bad_chunk", "no_final"):
            self._malformed(mode, n_prompt, n_predict)
            return
        self._start_stream()
        if mode == "hang":
            time.sleep(self.server.hang_s)
            return
        if mode == "error_line":
            self._event({"error": {"code": 500, "message": "slot failed", "type": "server_error"}})
            self._end()
            return
        produced = {"empty": 0, "short": n_predict // 2, "crash": 3, "countlie": n_predict // 2,
                    "overclaim": n_predict // 4}.get(mode, n_predict)
        if body.get("ignore_eos") is False:  # the model's end of sequence: a length per prompt
            produced = min(produced, 1 + sum(body["prompt"]) % max(1, n_predict))
        step = 4 if mode == "chunky" else 1
        seen = self.server.remember(body["prompt"]) if mode == "learns" else 0.0
        # a token every interval on a schedule, not a sleep after each write: the time to write
        # an event does not add up, so a config's known speedup is the one the client sees
        due = time.monotonic()
        stepped = self.server.steps is not None and mode == "ok"
        decode_steps = self._stepped(produced, due) if stepped else 0
        for i in range(0, 0 if stepped else produced, step):
            k = min(step, produced - i)
            if self.server.interval:
                due += (self.server.prefill if i == 0 and self.server.prefill is not None else
                        self.server.interval * (1 - 0.75 * seen) * self.server.factor()
                        ) / self.server.speed()
                time.sleep(max(0.0, due - time.monotonic()))
            event = {"content": "x" * k, "tokens": list(range(k)), "stop": False}
            if mode == "countlie":
                event["tokens_predicted"] = 2 * (i + k)
            self._event(event)
        if mode == "crash":
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        accepted = (produced - 1 - decode_steps if stepped and produced else
                    produced - produced // step if mode == "chunky" else int(0.9 * seen * produced))
        claimed = n_predict if mode in ("overclaim", "countlie") else produced
        self._event({"content": "", "tokens": [], "stop": True, "tokens_predicted": claimed,
                     "tokens_evaluated": n_prompt, "truncated": mode == "short",
                     "stop_type": "limit", "timings": {
                         "prompt_n": n_prompt, "predicted_n": claimed,
                         "draft_n": accepted + 2, "draft_n_accepted": accepted}})
        self._end()

    def _stepped(self, produced: int, due: float) -> int:
        """``--steps``: the first token after the prefill, then the rest TAU a verify step, a step
        every COST × interval on a schedule (see the module); the decode steps it took."""
        server = self.server
        assert server.steps is not None
        tau, cost = server.steps
        left, steps = produced, -1  # the first "step" is the prefill's
        while left > 0:
            k = 1 if steps < 0 else min(left, math.floor((steps + 1) * tau) - math.floor(steps * tau))
            first = steps < 0 and server.prefill is not None
            due += (server.prefill if first else server.interval * (1 if steps < 0 else cost)
                    * server.factor()) / server.speed()
            time.sleep(max(0.0, due - time.monotonic()))
            for _ in range(k):
                self._event({"content": "x", "tokens": [0], "stop": False})
            left, steps = left - k, steps + 1
        return max(steps, 0)

    def _malformed(self, mode: str, n_prompt: int, n_predict: int) -> None:
        if mode == "bad_length":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Content-Length: many\r\n\r\ndata: {}\n\n")
            self.close_connection = True
            return
        self._start_stream()
        if mode == "done_only":
            self._raw(b"data: [DONE]\n\n")
        elif mode == "bad_utf8":
            self._event({"content": "x", "tokens": [1], "stop": False})
            self._raw(b'data: {"content": "\xff\xfe", "tokens": [2], "stop": false}\n\n')
        elif mode == "lone_surrogate":
            self._raw(b'data: {"content": "\\ud800", "tokens": [1], "stop": false}\n\n')
            for _ in range(n_predict - 1):
                self._event({"content": "x", "tokens": [1], "stop": False})
            self._event({"content": "", "tokens": [], "stop": True, "tokens_predicted": n_predict,
                         "tokens_evaluated": n_prompt, "stop_type": "limit",
                         "timings": {"prompt_n": n_prompt, "predicted_n": n_predict}})
        elif mode == "no_final":
            for _ in range(n_predict):
                self._event({"content": "x", "tokens": [1], "stop": False})
        elif mode == "bad_chunk":
            self.wfile.write(b"zz\r\ndata: {}\n\n\r\n")
            self.wfile.flush()
            self.close_connection = True
            return
        self._end()

    def _raw(self, line: bytes) -> None:
        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
        self.wfile.flush()

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _end_with(self, payload: bytes) -> None:
        """The headers and a whole body in one send, as real servers write a small answer: two
        sends with Nagle on would wait ~40 ms for the client's delayed ACK on every control call."""
        self._headers_buffer.append(b"\r\n" + payload)
        self.flush_headers()

    def _json(self, status: int, data: dict[str, Any]) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self._end_with(payload)

    def _event(self, data: dict[str, Any]) -> None:
        chunk = f"data: {json.dumps(data)}\n\n".encode()
        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        self.wfile.flush()

    def _end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class FakeLlamaServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode: str = "ok", hang_s: float = 5.0, port: int = 0,
                 interval: float = 0.0, jitter: float = 0.0, noise_seed: str = "",
                 prefill: float | None = None, drift: float = 0.0, epoch: float = 0.0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.mode = mode
        self.hang_s = hang_s
        self.n_ctx = 2048  # the context /props reports (--n-ctx)
        self.interval = interval  # seconds before each token event (0: as fast as it can)
        # seconds before the first token, the same in every config (the prefill: the target's
        # work alone); None: the first token on the token schedule
        self.prefill = prefill
        # the machine's speed grows by ``drift`` a minute of wall time since ``epoch`` (the same
        # for every config): a drift whose true speedup is 1.00
        self.drift, self.epoch = drift, epoch
        # each token's delay times a log-normal factor of mean 1 (sigma ``jitter``): noise around
        # a known mean, so a known speedup has intervals of a real width to hold it
        self.jitter = jitter
        self.noise = random.Random(noise_seed or os.getpid())  # each server its own noise
        self.generations = 0
        self.bodies: list[dict[str, Any]] = []  # the generation requests, as sent
        self.templated: list[dict[str, Any]] = []  # the /apply-template requests
        self.lock = threading.Lock()
        self.hung = threading.Event()
        self.grams: set[tuple[int, ...]] = set()  # mode learns: every prompt 12-gram seen
        self.steps: tuple[float, float] | None = None  # --steps: (τ, step cost) of its budget
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    def speed(self) -> float:
        """The machine's speed now: 1, or 1 + drift · minutes since the epoch."""
        if not self.drift:
            return 1.0
        return max(0.05, 1.0 + self.drift * (time.time() - self.epoch) / 60)

    def factor(self) -> float:
        """A token's delay factor: 1, or log-normal with mean 1 under ``jitter``."""
        if not self.jitter:
            return 1.0
        with self.lock:
            return math.exp(self.noise.gauss(0.0, self.jitter) - self.jitter ** 2 / 2)

    def remember(self, prompt: list[int]) -> float:
        """The fraction of the prompt's 12-grams seen in earlier prompts; then remembers them."""
        grams = {tuple(prompt[i:i + 12]) for i in range(max(len(prompt) - 11, 0))}
        with self.lock:
            seen = len(grams & self.grams) / len(grams) if grams else 0.0
            self.grams |= grams
        return seen

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up after an error event is normal: no traceback in the log."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> FakeLlamaServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description="a fault-injecting llama.cpp-protocol server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", choices=PROCESS_MODES, default="ok")
    parser.add_argument("--hang-s", type=float, default=600.0)
    parser.add_argument("--budget", type=int, help="the config's budget (logged only)")
    parser.add_argument("--interval", type=float, default=0.0, help="seconds before each token")
    parser.add_argument("--jitter", type=float, default=0.0, help="sigma of a log-normal "
                        "factor (mean 1) on each token's delay")
    parser.add_argument("--noise-seed", default="", help="seeds the jitter (default: the pid)")
    parser.add_argument("--nodelay", action="store_true", help="TCP_NODELAY: each event leaves "
                        "when written, not when the client's ACK of the last arrives (llama-server "
                        "leaves Nagle on; then a busy client's late reads set the pace)")
    parser.add_argument("--speedups", default="", help="BUDGET:SPEEDUP,...: the config's budget "
                        "divides --interval by its speedup (a known truth per budget)")
    parser.add_argument("--prefill", type=float, default=None, help="seconds to the first "
                        "token, the same in every config (default: --interval before --speedups)")
    parser.add_argument("--steps", default="", help="BUDGET:TAU:COST,...: the config's budget "
                        "yields TAU tokens a verify step, a step every COST x --interval")
    parser.add_argument("--n-ctx", type=int, default=2048, help="the context a request may "
                        "hold, as /props reports it")
    parser.add_argument("--drift", type=float, default=0.0, help="the machine's speed grows by "
                        "this fraction a minute of wall time since --epoch (every config alike)")
    parser.add_argument("--epoch", type=float, default=0.0, help="the drift's start (time.time())")
    # llama-server's own flags (a shipped params file's argv, its launcher swapped for this
    # stand-in: tests/sweep/test_shipped_params.py) are accepted and logged, not acted on
    args, theirs = parser.parse_known_args()
    if theirs:
        print(f"ignored llama-server flags: {' '.join(theirs)}", flush=True)
    known = dict(pair.split(":") for pair in args.speedups.split(",") if pair)
    # the first token: the prefill, the same in every config
    prefill = args.prefill if args.prefill is not None else (args.interval or None)
    if args.budget is not None and str(args.budget) in known:
        args.interval /= float(known[str(args.budget)])
    print(f"fake llama server, mode {args.mode}, budget {args.budget}", flush=True)
    # the GPUs a placement gave it (tests/sweep/test_placement.py reads this line from its log)
    print(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}", flush=True)
    # the CPUs it may run on (tests/host/test_cpuset.py: engine.cpus pins the server)
    print(f"cpus {sorted(os.sched_getaffinity(0))}", flush=True)
    if args.mode == "startup_crash":
        print(f"Capture cuda graph failed: {CUDA_ERROR}", file=sys.stderr, flush=True)
        sys.exit(1)
    if args.mode == "setsid":  # a launcher whose server leaves the process group
        child = os.fork()
        if child:
            os.waitpid(child, 0)
            return
        os.setsid()
    if args.mode == "shutdown_crash":  # serves well; SIGTERM: a crash line, then SIGKILL
        signal.signal(signal.SIGTERM, lambda *_: (
            print(f"{SHUTDOWN_CRASH}", file=sys.stderr, flush=True), os.kill(os.getpid(), signal.SIGKILL)))
    _Handler.disable_nagle_algorithm = args.nodelay
    mode = "ok" if args.mode in ("setsid", "shutdown_crash") else args.mode
    server = FakeLlamaServer(mode, hang_s=args.hang_s, port=args.port, interval=args.interval,
                             jitter=args.jitter, noise_seed=args.noise_seed, prefill=prefill,
                             drift=args.drift, epoch=args.epoch or time.time())
    stepping = {b: (float(t), float(c)) for b, t, c in
                (item.split(":") for item in args.steps.split(",") if item)}
    server.steps = stepping.get(str(args.budget)) if args.budget is not None else None
    server.n_ctx = args.n_ctx
    server.serve_forever()


if __name__ == "__main__":
    main()
