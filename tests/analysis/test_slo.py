"""SLOs and goodput: requests that met every limit, over the cell's window; the highest load that
still meets the SLO. An SLO miss is a measurement, never a verdict."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from cellfactory import spread_cell
from paramsfiles import write_params

from specbench_lib.analysis.metricfamilies.slo import goodput
from specbench_lib.analysis.metrics import results_table
from specbench_lib.analysis.slo import capacity
from specbench_lib.core.errors import ParamsError
from specbench_lib.model.plan import load_plan
from specbench_lib.model.sections import SloParams


def latencies_cell(e2e: list[float], *, concurrency: int = 1, config: str = "auto"):
    """Requests one after another, each 16 tokens, request i taking ``e2e[i]`` seconds."""
    cell = spread_cell(config, "auto" if config == "auto" else "ngram",
                       None if config == "auto" else 8, [16 / t for t in e2e])
    return replace(cell, spec=replace(cell.spec, concurrency=concurrency))


def test_goodput_counts_the_requests_that_met_every_limit() -> None:
    cell = latencies_cell([1.0, 2.0, 3.0, 4.0])  # TTFT 1/16 of each, window 10 s
    found = goodput(cell, SloParams(e2e_s=2.5))
    assert found["goodput_rps"] == pytest.approx(2 / 10) and found["slo_met"] == 0.5
    assert found["goodput_tok_s"] == pytest.approx(32 / 10) and not found["meets_slo"]
    assert goodput(cell, SloParams(e2e_s=2.5, percentile=0.5))["meets_slo"]
    both = goodput(cell, SloParams(e2e_s=3.5, ttft_s=0.15))  # TTFT 0.0625, 0.125, 0.1875, 0.25
    assert both["slo_met"] == 0.5
    assert goodput(cell, SloParams(tpot_s=1.0))["slo_met"] == 1.0  # TPOT is at most 0.25 s


def test_the_table_carries_goodput_and_capacity_is_the_highest_load_meeting_it() -> None:
    cells = [latencies_cell([1.0] * 4, concurrency=1), latencies_cell([1.5] * 4, concurrency=2),
             latencies_cell([3.0] * 4, concurrency=4)]  # the load grows, so does the latency
    slo = SloParams(e2e_s=2.0)
    table = results_table(cells, slo=slo).set_index("concurrency")
    assert list(table["meets_slo"]) == [1.0, 1.0, 0.0] and table.loc[4, "goodput_rps"] == 0
    assert "goodput_rps" not in results_table(cells).columns  # no SLO, no SLO columns
    (row,) = capacity(results_table(cells, slo=slo), slo).to_dict("records")
    assert row["max_concurrency_meeting_slo"] == 2
    assert row["goodput_rps"] == pytest.approx(4 / 6)
    strict = SloParams(e2e_s=0.5)
    (none,) = capacity(results_table(cells, slo=strict), strict).to_dict("records")
    assert none["max_concurrency_meeting_slo"] is None


def test_an_slo_comes_from_params_and_needs_a_limit(tmp_path: Path) -> None:
    path = write_params(tmp_path, slo={"ttft_s": 0.5, "e2e_s": 4, "percentile": 0.95})
    assert load_plan(path).params.slo == SloParams(ttft_s=0.5, e2e_s=4, percentile=0.95)
    with pytest.raises(ParamsError, match="at least one of ttft_s, tpot_s, e2e_s"):
        load_plan(write_params(tmp_path, slo={"percentile": 0.9}))
