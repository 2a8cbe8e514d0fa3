"""Load and output length as axes of a real sweep (on the fake server, whose token timing is
known): output lengths, fixed open-loop rates and a GuideLLM-like rate profile; goodput against
the count computed from the server's timing; the profile's rates as scheduled; a crashed load
point marked in the load figure, never drawn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib
import pytest
from cellfactory import make_cell, not_ok
from paramsfiles import DROP, fake_plan, write_params

matplotlib.use("Agg")
from ports import free_port

import specbench_lib as sb  # noqa: E402
from specbench_lib.report import plots  # noqa: E402
from specbench_lib.runs.run import RunDir  # noqa: E402

INTERVAL = 0.01  # the fake server's seconds before each token


def params(tmp_path: Path, **overrides: Any) -> Path:
    plan = fake_plan(free_port(), interval=INTERVAL, engine={"ready_timeout_s": 10}, phase="load",
                     requests_per_cell=8, warmup_requests=1, output_tokens=DROP)
    return write_params(tmp_path, plan, name="load.yaml", **overrides)


def test_output_lengths_and_a_rate_profile_are_axes_with_goodput_from_the_truth(
        tmp_path: Path) -> None:
    plan = sb.load_plan(params(tmp_path, output_tokens=[8, 24], concurrency=[1, 2],
                                     request_rate={"profile": 2, "arrival": "fixed"},
                                     slo={"e2e_s": 0.16, "percentile": 0.9}))
    assert [c.cell_id for c in plan.cells] == [
        "auto__code__ctx16__c1__o8", "auto__code__ctx16__c2__o8",
        "auto__code__ctx16__c8__o8__p1of2", "auto__code__ctx16__c8__o8__p2of2",  # uncapped: 8 of 8
        "auto__code__ctx16__c1__o24", "auto__code__ctx16__c2__o24",
        "auto__code__ctx16__c8__o24__p1of2", "auto__code__ctx16__c8__o24__p2of2"]
    result = sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    assert result.counts() == {"ok": 8, "invalid": 0, "crashed": 0, "skipped": 0}, not_ok(result)
    cells = {c.cell_id: c for c in result.cells}
    for out in (8, 24):
        sync = cells[f"auto__code__ctx16__c1__o{out}"].metrics["request_throughput_rps"]
        saturated = cells[f"auto__code__ctx16__c2__o{out}"].metrics["request_throughput_rps"]
        assert 1.6 * sync < saturated < 2.2 * sync  # two in flight on a server that overlaps
        for k in (1, 2):
            cell = cells[f"auto__code__ctx16__c8__o{out}__p{k}of2"]
            assert cell.target_rate == pytest.approx(sync + k / 3 * (saturated - sync))
            m = cell.metrics  # the schedule the client kept, fixed arrivals: within 2 %
            assert m["achieved_rate_rps"] == pytest.approx(m["scheduled_rate_rps"], rel=0.02)
            assert m["scheduled_rate_rps"] == pytest.approx(cell.target_rate, rel=1e-6)
    table = result.table().set_index(["output_tokens", "concurrency", "load"])
    # the truth: a request of n tokens takes n x 10 ms (+ the client's overhead), so every 8-token
    # request meets E2E <= 0.16 s and no 24-token one does; goodput counts them over the window
    for conc, load in ((1, ""), (2, ""), (8, "p1/2"), (8, "p2/2")):
        short, long_ = table.loc[(8, conc, load)], table.loc[(24, conc, load)]
        assert short["slo_met"] == 1.0 and long_["slo_met"] == 0.0 and long_["goodput_rps"] == 0
        assert short["goodput_rps"] == pytest.approx(short["requests_n"] / short["window_s"])
    capacity = result.slo_capacity().set_index(["output_tokens", "load_axis"])
    assert capacity.loc[(8, "concurrency"), "max_concurrency_meeting_slo"] == 2
    assert capacity.loc[(24, "concurrency"), "max_concurrency_meeting_slo"] != capacity.loc[
        (24, "concurrency"), "max_concurrency_meeting_slo"]  # NaN: no load meets it
    top = cells["auto__code__ctx16__c8__o8__p2of2"].target_rate
    assert capacity.loc[(8, "rate"), "max_rate_meeting_slo"] == pytest.approx(top)
    fig = plots.standard(result)["speedup_vs_load"]  # speedup, E2E and goodput vs load
    goodput = [ax for ax in fig.axes if ax.get_ylabel().startswith("goodput")]
    assert len(goodput) == 2  # one per output length
    short = goodput[0]  # 8 tokens: the profile's two rates, every request within the SLO
    ((line,),) = [c.lines[:1] for c in short.containers]
    rows = result.table().sort_values("target_rate_rps")
    rows = rows[(rows["output_tokens"] == 8) & (rows["load"] != "")]
    assert list(line.get_xdata()) == pytest.approx(list(rows["target_rate_rps"]))
    assert list(line.get_ydata()) == pytest.approx(list(rows["goodput_rps"]))
    text = result.summary().text()
    assert "auto code/ctx16/o8: meets the SLO (p90) up to concurrency 2 (goodput " in text
    assert "auto code/ctx16/o24: meets the SLO (p90) at no concurrency measured" in text
    assert f"auto code/ctx16/o8: meets the SLO (p90) up to {top:.3g} req/s" in text


def test_fixed_rates_are_load_points_and_a_rate_the_client_cannot_keep_says_so(
        tmp_path: Path) -> None:
    # one request in flight, 8 tokens 10 ms apart: at most about 12 requests a second
    plan = sb.load_plan(params(tmp_path, output_tokens=8, concurrency=[1],
                                     request_rate={"per_s": [4, 200], "arrival": "fixed"}))
    assert [c.cell_id for c in plan.cells] == ["auto__code__ctx16__c1__q4", "auto__code__ctx16__c1__q200"]
    result = sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    cells = {c.cell_id: c for c in result.cells}
    kept = cells["auto__code__ctx16__c1__q4"]
    assert kept.status == "ok", kept.verdict
    assert kept.metrics["achieved_rate_rps"] == pytest.approx(4, rel=0.02)
    fast = cells["auto__code__ctx16__c1__q200"]
    assert fast.status == "invalid" and fast.verdict.codes == {"rate_not_reached"}
    assert "of a scheduled 200/s" in fast.verdict.reasons[0]


def test_a_profile_point_without_ok_anchors_is_skipped_naming_them(tmp_path: Path) -> None:
    from specbench_lib.model.cellspec import CellSpec
    from specbench_lib.sweep.loadprofile import profile_rate

    spec = CellSpec("ng", "ng", "ngram", 8, "code", 16, 4, output_tokens=8, profile_point=1,
                    profile_points=3)
    crashed = make_cell("ng", "ngram", 8, "crashed", context=16)
    found = profile_rate(spec, (1, 4), {"ng__code__ctx16__c1": crashed}.get)
    assert isinstance(found, sb.Verdict) and found.status == "skipped"
    assert found.reasons[0].startswith("no_profile_rate: the synchronous cell ng__code__ctx16__c1 "
                                       "is crashed")
    ok1 = make_cell("ng", "ngram", 8, tok_s=16.0, context=16)  # 16 tokens: 1 request a second
    ok4 = make_cell("ng", "ngram", 8, tok_s=64.0, context=16, concurrency=4)
    ids = {"ng__code__ctx16__c1": ok1, "ng__code__ctx16__c4": ok4}
    assert profile_rate(spec, (1, 4), ids.get) == pytest.approx(1 + (4 - 1) / 4)
    missing = profile_rate(spec, (1, 4), {"ng__code__ctx16__c1": ok1}.get)
    assert isinstance(missing, sb.Verdict) and "saturated cell ng__code__ctx16__c4 is not measured" \
        in missing.reasons[0]


def test_a_crashed_load_point_is_marked_on_the_load_figure_never_drawn(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase="t", model={"path": "/m/x.gguf"}, engine={"kind": "llamacpp"})
    for conc, auto, spec, status in ((1, 50.0, 70.0, "ok"), (2, 80.0, 90.0, "ok"),
                                     (4, 100.0, None, "crashed")):
        run.write_cell(make_cell("auto", "auto", None, tok_s=auto, concurrency=conc))
        run.write_cell(make_cell("ng-b8", "ngram", 8, status, spec, concurrency=conc))
    result = sb.SweepResult(run.path)
    fig = plots.speedup_vs_load(result)
    ax = fig.axes[0]
    (line,) = [c.lines[0] for c in ax.containers]
    assert list(line.get_xdata()) == [1, 2]  # concurrency 4 crashed: not a point
    assert list(line.get_ydata()) == pytest.approx([70 / 50, 90 / 80])
    crosses = [x for x in ax.get_lines() if x.get_marker() == "x"]
    assert [list(c.get_xdata()) for c in crosses] == [[4]]
    assert any(t.get_text() == "ng-b8 crashed" for t in ax.texts)
    assert not any("loses from" in t.get_text() for t in ax.texts)  # it never loses here


def test_the_report_states_where_a_config_stops_paying(tmp_path: Path) -> None:
    from specbench_lib.report.export import Comparison, write

    run = RunDir(tmp_path / "run")
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase="t", model={"path": "/m/x.gguf"}, engine={"kind": "llamacpp"})
    outs = [[k, k + 1] for k in range(8)]  # 8 requests a cell, so intervals can clear 1
    for conc, auto, spec in ((1, 50.0, 100.0), (2, 80.0, 40.0)):
        run.write_cell(make_cell("auto", "auto", None, tok_s=auto, concurrency=conc, outputs=outs))
        run.write_cell(make_cell("ng-b8", "ngram", 8, tok_s=spec, concurrency=conc, outputs=outs))
    result = sb.SweepResult(run.path)
    ax = plots.speedup_vs_load(result).axes[0]  # the crossover marked where it starts to lose
    assert [t.get_text() for t in ax.texts if "loses" in t.get_text()] == ["ng-b8 loses from 2"]
    comparison = Comparison([result])
    (statement,) = comparison.crossovers()["statement"]
    assert statement == "ng-b8 code/ctx256: beats auto up to concurrency 1; loses from concurrency 2"
    write(comparison, tmp_path / "report")
    assert statement in (tmp_path / "report" / "results.html").read_text()
    saved = json.loads((tmp_path / "report" / "comparison.json").read_text())
    assert [c["statement"] for c in saved["crossovers"]] == [statement]
