"""A fault-injecting stand-in for llama.cpp's streaming ``/completion`` (tests only).

It speaks the native llama.cpp stream as recorded in shared/ENGINE.md (one ``data:`` line per
token event, a final ``"stop": true`` event with ``timings``; errors as HTTP 400 JSON). Each mode
injects one fault our users met. It is never the engine of a real sweep.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = ("ok", "http400", "error_line", "empty", "crash", "hang", "short", "chunky")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeLlamaServer

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._json(200, {"status": "ok"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        mode = self.server.mode
        n_prompt, n_predict = len(body["prompt"]), int(body["n_predict"])
        if mode == "http400":
            self._json(400, {"error": {"code": 400, "type": "exceed_context_size_error",
                                       "n_prompt_tokens": n_prompt, "n_ctx": 512}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if mode == "hang":
            time.sleep(self.server.hang_s)
            return
        if mode == "error_line":
            self._event({"error": {"code": 500, "message": "slot failed", "type": "server_error"}})
            self._end()
            return
        produced = {"empty": 0, "short": n_predict // 2, "crash": 3}.get(mode, n_predict)
        step = 4 if mode == "chunky" else 1
        for i in range(0, produced, step):
            k = min(step, produced - i)
            self._event({"content": "x" * k, "tokens": list(range(k)), "stop": False})
        if mode == "crash":
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        accepted = produced - produced // step if mode == "chunky" else 0
        self._event({"content": "", "tokens": [], "stop": True, "tokens_predicted": produced,
                     "tokens_evaluated": n_prompt, "truncated": mode == "short",
                     "stop_type": "limit", "timings": {
                         "prompt_n": n_prompt, "predicted_n": produced,
                         "draft_n": accepted + 2, "draft_n_accepted": accepted}})
        self._end()

    def _json(self, status: int, data: dict[str, Any]) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _event(self, data: dict[str, Any]) -> None:
        chunk = f"data: {json.dumps(data)}\n\n".encode()
        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        self.wfile.flush()

    def _end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class FakeLlamaServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode: str = "ok", hang_s: float = 5.0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode = mode
        self.hang_s = hang_s
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> FakeLlamaServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
