"""A test server run as a child process that prints ``port N`` once it listens (tests and
benchmarks only): the measuring process never shares a GIL with the server it times."""

from __future__ import annotations

import subprocess


class ChildServer:
    """Start ``argv`` in a child process; ``url`` is where it answers once started."""

    def __init__(self, argv: list[str], name: str) -> None:
        self.argv, self.name = argv, name
        self._proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> ChildServer:
        self._proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "port":
            self._proc.kill()
            raise RuntimeError(f"{self.name} did not start: {line}")
        self.url = f"http://127.0.0.1:{line[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
