"""CPU hogs for the host-load tests: busy loops that are, or are not, this test's own processes.

Each hog may log ``<monotonic> <its own CPU seconds>`` lines (``time.process_time``, the kernel's
per-process CPU clock, not ``/proc``) every 50 ms: a reference the sampler's figures are checked
against.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

MARK = "specbench-hog"
SPIN = f"""# {MARK}
import sys, time
out = open(sys.argv[1], "a", buffering=1) if len(sys.argv) > 1 and sys.argv[1] else None
last = 0.0
while True:
    for _ in range(20000):
        pass
    if out is not None and time.monotonic() - last >= 0.05:
        last = time.monotonic()
        out.write(f"{{last}} {{time.process_time()}}\\n")
"""
_DETACH = """import os
pid = os.fork()
if pid:
    print(pid, flush=True)
    os._exit(0)
fd = os.open(os.devnull, os.O_RDWR)
for n in (0, 1, 2):
    os.dup2(fd, n)
"""


@contextlib.contextmanager
def other_hog(log: Path | None = None) -> Iterator[int]:
    """A busy loop that is not a descendant of this process (forked twice: its parent exits, as
    another user's job's would); yields its pid and kills it on exit."""
    done = subprocess.run([sys.executable, "-c", _DETACH + SPIN, str(log or "")],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          stdin=subprocess.DEVNULL, timeout=20, check=True, start_new_session=True)
    pid = int(done.stdout)
    try:
        yield pid
    finally:
        with contextlib.suppress(OSError):
            if MARK.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def child_hog(log: Path | None = None) -> Iterator[int]:
    """A busy loop started as this process's child (so the sweep's own); yields its pid."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN, str(log or "")], stdin=subprocess.DEVNULL)
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def cpu_rate(log: Path, since: float = 0.0, until: float = float("inf")) -> float:
    """The hog's own CPU seconds per wall second between ``since`` and ``until`` (monotonic)."""
    rows = [tuple(map(float, line.split())) for line in log.read_text().splitlines()
            if len(line.split()) == 2]
    rows = [r for r in rows if since <= r[0] <= until]
    assert len(rows) >= 2, f"the hog logged too little: {rows}"
    (t0, c0), (t1, c1) = rows[0], rows[-1]
    return (c1 - c0) / (t1 - t0)
