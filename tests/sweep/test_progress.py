"""Progress while a sweep runs: a line per server start and per finished cell, with the verdict,
the headline number and its interval, the time elapsed and left."""

from __future__ import annotations

import io
import re

from cellfactory import make_cell, spread_cell

from specbench_lib.sweep.progress import Progress


def test_a_line_per_cell_with_its_verdict_number_interval_and_eta() -> None:
    out = io.StringIO()
    progress = Progress(4, done=1, out=out)
    progress.server("ngram-b8", "ready in 1.2 s")
    progress.cell(spread_cell("ngram-b8", "ngram", 8, [40.0, 50.0, 60.0]))
    progress.cell(make_cell("ngram-b16", "ngram", 16, "crashed", None))
    progress.cell(make_cell("auto", "auto", None, repeat=1, repeats=2))
    first, ok, crashed, last = out.getvalue().splitlines()
    assert first == "  server ngram-b8: ready in 1.2 s"
    # no time model: no estimate of the time left (the sweep's is tests/sweep/test_budget_kept.py's)
    assert re.fullmatch(r"\[2/4\] ngram-b8 code ctx256 c1: ok, 48\.6 tok/s \[\d+\.\d, \d+\.\d\] "
                        r"n=3 · \d+s", ok), ok
    assert crashed.startswith("[3/4] ngram-b16 code ctx256 c1: crashed, server_failed: decided by the test")
    assert last.startswith("[4/4] auto code ctx256 c1 r1: ok, 10.0 tok/s") and "left" not in last


def test_silent_when_not_enabled() -> None:
    out = io.StringIO()
    progress = Progress(1, enabled=False, out=out)
    progress.server("auto", "ready in 1 s")
    progress.cell(make_cell("auto", "auto", None))
    assert out.getvalue() == ""
