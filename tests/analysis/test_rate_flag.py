"""An open-loop rate that is not reached is flagged in the cell's metrics, never silent."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specbench_lib.analysis.metricfamilies.openloop import rate_shortfall
from specbench_lib.analysis.metrics import cell_metrics
from specbench_lib.model.records import CellDispatch, RequestRecord
from specbench_lib.servers.engines import FinalStats


def records(starts: list[float], scheduled: list[float] | None) -> list[RequestRecord]:
    out = []
    for i, start in enumerate(starts):
        rec = RequestRecord(i, False, 4, 2, status=200, start=start, end=start + 0.1,
                            token_times=[start + 0.05, start + 0.1], chunk_sizes=[1, 1],
                            final=FinalStats(4, 2, "length"))
        rec.scheduled = scheduled[i] if scheduled is not None else None
        out.append(rec)
    return out


def test_on_schedule_is_not_flagged() -> None:
    sched = [0.1 * i for i in range(11)]
    m = cell_metrics(CellDispatch(records([t + 0.002 for t in sched], sched), 0.0, 1.2, target_rate=10.0))
    assert m["target_rate_rps"] == 10.0
    assert m["achieved_rate_rps"] == pytest.approx(10.0)
    assert m["rate_not_reached"] is False and m["rate_note"] is None


def test_late_sends_are_flagged_with_the_figures() -> None:
    sched = [0.1 * i for i in range(11)]
    starts = [0.2 * i for i in range(11)]  # the client (or the concurrency cap) managed 5/s
    m = cell_metrics(CellDispatch(records(starts, sched), 0.0, 2.2, target_rate=10.0))
    assert m["rate_not_reached"] is True
    assert m["achieved_rate_rps"] == pytest.approx(5.0)
    assert m["max_send_lag_s"] == pytest.approx(1.0)
    assert m["rate_note"].startswith("rate_not_reached: sent 5/s of a scheduled 10/s")


def test_closed_loop_has_no_rate_figures() -> None:
    assert rate_shortfall(records([0.0, 0.1], None), None) == {}
    assert "rate_not_reached" not in cell_metrics(CellDispatch(records([0.0, 0.1], None), 0.0, 0.3))


def test_a_rate_not_reached_makes_the_cell_invalid_on_analysis() -> None:
    from cellfactory import make_cell

    from specbench_lib.analysis.analyse import analyse

    sched = [0.1 * i for i in range(11)]
    base = make_cell("auto", "auto", None)
    judge = replace(base.judge, planned=11)
    late = analyse(replace(base, judge=judge, requests=tuple(records([0.2 * i for i in range(11)],
                                                                     sched)), target_rate=10.0))
    assert late.status == "invalid" and late.verdict.codes == {"rate_not_reached"}
    assert late.verdict.reasons[0].detail.startswith("sent 5/s of a scheduled 10/s")
    on_time = analyse(replace(base, judge=judge, requests=tuple(records(
        [t + 0.002 for t in sched], sched)), target_rate=10.0))
    assert on_time.status == "ok" and on_time.metrics["rate_not_reached"] is False


def test_open_loop_latency_is_also_timed_from_the_scheduled_arrival() -> None:
    sched = [0.1 * i for i in range(11)]
    starts = [0.2 * i for i in range(11)]  # each request waited (i * 0.1 s) for a free slot
    m = cell_metrics(CellDispatch(records(starts, sched), 0.0, 2.2, target_rate=10.0))
    assert m["ttft_p50_s"] == pytest.approx(0.05)  # from the actual send: the wait is hidden
    assert m["ttft_sched_p50_s"] == pytest.approx(0.05 + 0.5)  # the median request waited 0.5 s
    assert m["e2e_sched_p99_s"] == pytest.approx(0.1 + 0.99 * 1.0)
    closed = cell_metrics(CellDispatch(records([0.0, 0.1], None), 0.0, 0.3))
    assert "ttft_sched_p50_s" not in closed
