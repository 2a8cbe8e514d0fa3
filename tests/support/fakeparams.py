"""Params files for sweeps on ``tests/support/fake_server.py`` through the argv-template engine: the
engine block, the argv of a config, and the lines that leave the client host unjudged, written
once for every test (and benchmark) that sweeps fake servers with a known timing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

FAKE = Path(__file__).resolve().parent / "fake_server.py"

# these sweeps judge what they are about (load points, placement, pages), not the client host:
# the two rules that judge it would flake on 2 shared cores (as tests/data/tiny.yaml says)
LENIENT_HOST = ("max_coalesced_fraction: 0.5\nmax_coalesced_first_fraction: 0.5\n"
                "host: {max_other_cpu_cores: null}\n")
# the smallest plan of a page or front-door test: one code panel, two 8-token requests a cell
SMALL_CELLS = ("workloads:\n  - {name: code, source: humaneval}\ncontexts: [16]\nconcurrency: [1]\n"
               "output_tokens: 8\nrequests_per_cell: 2\nwarmup_requests: 0\n")


def fake_argv(*extra: str, interval: float | None = None, budget: bool = False) -> str:
    """A fake server's argv template as a JSON (so YAML) list: ``extra`` flags (``--mode
    startup_crash``), a token every ``interval`` s, the config's budget logged."""
    return json.dumps(["{binary}", str(FAKE), "--port", "{port}",
                       *(["--interval", str(interval)] if interval is not None else []),
                       *extra, *(["--budget", "{budget}"] if budget else [])])


def fake_engine(port: int, argv: str, *, ready_timeout_s: float = 20, api: str = "llamacpp",
                model: Path | str = FAKE, extra: str = "") -> str:
    """The ``engine:`` block of a params file whose servers are fake servers on ``port`` (or
    another stand-in ``model`` speaking ``api``); ``extra``: more engine keys, one per line."""
    more = "".join(f"  {line}\n" for line in extra.splitlines() if line.strip())
    return (f"engine:\n  kind: template\n  api: {api}\n  binary: {sys.executable}\n"
            f"  model: {model}\n  port: {port}\n  context: 2048\n"
            f"  ready_timeout_s: {ready_timeout_s:g}\n{more}  argv_template: {argv}\n")
