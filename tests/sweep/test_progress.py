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
    assert re.fullmatch(r"\[2/4\] ngram-b8 code ctx256 c1: ok, 48\.6 tok/s \[\d+\.\d, \d+\.\d\] "
                        r"n=3 · \d+s, about \d+s left", ok), ok
    assert crashed.startswith("[3/4] ngram-b16 code ctx256 c1: crashed, server_failed: decided by the test")
    assert last.startswith("[4/4] auto code ctx256 c1 r1: ok, 10.0 tok/s") and "left" not in last


def test_silent_when_not_enabled() -> None:
    out = io.StringIO()
    progress = Progress(1, enabled=False, out=out)
    progress.server("auto", "ready in 1 s")
    progress.cell(make_cell("auto", "auto", None))
    assert out.getvalue() == ""


class Clock:
    """A clock the test moves: each event happens when the test says."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def plan_cells() -> list:
    """auto, then draft, each at context 256 then 512, concurrency 1 and 2 (8 cells)."""
    return [make_cell(config, method, budget, context=ctx, concurrency=c).spec
            for config, method, budget in (("auto", "auto", None), ("draft-b4", "draft", 4))
            for ctx in (256, 512) for c in (1, 2)]


def left_after(progress: Progress, out: io.StringIO) -> str:
    return re.search(r"about (\S+) left", out.getvalue().splitlines()[-1]).group(1)


def run_to(progresses: list[Progress], clock: Clock, cells: list, start_s: float = 5.0,
           running: str | None = None) -> str | None:
    """Each config's server starts (``start_s``), then its cells take ``TIMES[config, ctx]``;
    every progress hears every event. The config running at the end."""
    for spec in cells:
        if spec.config != running:
            for progress in progresses:
                progress.server(spec.config, "starting, waiting up to 120 s")
            clock.now += start_s
            for progress in progresses:
                progress.server(spec.config, f"ready in {start_s} s")
            running = spec.config
        clock.now += TIMES[spec.config, spec.context]
        for progress in progresses:
            progress.cell(make_cell(spec.config, spec.method, spec.budget, context=spec.context,
                                    concurrency=spec.concurrency))
    return running


# draft cells are 3x auto's, and ctx512 cells 2x ctx256's; a server takes 5 s to start
TIMES = {("auto", 256): 10.0, ("auto", 512): 20.0, ("draft-b4", 256): 30.0,
         ("draft-b4", 512): 60.0, ("auto", 1024): 12.0}


def test_the_eta_is_the_pace_of_each_config_and_context_where_a_mean_is_twice_too_low() -> None:
    cells = plan_cells()
    clock, out, old_out = Clock(), io.StringIO(), io.StringIO()
    progress = Progress(len(cells), out=out, cells=cells, clock=clock)
    old = Progress(len(cells), out=old_out, clock=clock)  # the mean per cell, as before
    running = run_to([progress, old], clock, cells[:5])  # auto's four cells, draft's first
    at = clock.now
    run_to([], clock, cells[5:], running=running)
    truth = clock.now - at  # draft ctx256 c2, ctx512 c1 and c2 (its server is up): 150 s
    assert left_after(progress, out) == "2m30s" and truth == 150.0  # draft ctx512: auto's ratio
    assert left_after(old, old_out) == "1m00s"  # 100 s / 5 cells x 3 left: 2.5x too low


def test_a_config_not_yet_seen_takes_its_contexts_mean_and_a_server_start() -> None:
    cells = plan_cells()
    clock, out = Clock(), io.StringIO()
    progress = Progress(len(cells), out=out, cells=cells, clock=clock)
    running = run_to([progress], clock, cells[:4])  # auto done; draft's server not started
    # draft: auto's means at each context (10, 10, 20, 20) and one server start of 5 s
    assert left_after(progress, out) == "1m05s"
    run_to([progress], clock, cells[4:5], running=running)
    assert left_after(progress, out) == "2m30s"  # draft's own pace; no server start left


def test_an_unseen_context_of_a_seen_config_is_scaled_only_by_measured_contexts() -> None:
    cells = [make_cell("auto", "auto", None, context=ctx).spec for ctx in (256, 512, 1024)]
    clock, out = Clock(), io.StringIO()
    progress = Progress(len(cells), out=out, cells=cells, clock=clock)
    run_to([progress], clock, [cells[2]], start_s=0.0)  # ctx1024 first: 12 s
    assert left_after(progress, out) == "24s"  # no context ratio measured: 1 x 12 s each
