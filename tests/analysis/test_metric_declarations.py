"""Every metric is declared once (its family in analysis/metricfamilies/, found by
analysis/metricset.py) and the declarations are the truth: a
computed metric without a declaration, or a declared one nothing computes, fails here; every
declared column reaches results.csv (15 computed metrics never did before issue 40), and the
columns results.csv had before keep their order."""

from __future__ import annotations

from pathlib import Path

from cellfactory import make_cell, request

from specbench_lib.analysis.analyse import analyse
from specbench_lib.analysis.metricfamilies.gpu import gpu_metrics
from specbench_lib.analysis.metricfamilies.lossless import compare_cells
from specbench_lib.analysis.metricfamilies.slo import goodput
from specbench_lib.analysis.metrics import CellMetrics, cell_metrics, results_table
from specbench_lib.analysis.metricset import CELL_KINDS, KINDS, METRIC, METRICS, RESULTS, columns
from specbench_lib.model.hostfacts import HostLoad
from specbench_lib.model.records import CellDispatch
from specbench_lib.model.sections import SloParams

# the 15 computed, stored and documented metrics that results.csv dropped before issue 40
ONCE_DROPPED = {"tpot_weighted_s", "output_tokens_mean", "output_tokens_p10", "output_tokens_p50",
                "output_tokens_p90", "prompt_tokens_mean", "prompt_tokens_p10", "prompt_tokens_p50",
                "prompt_tokens_p90", "acceptance_length_drafted", "verify_steps", "accepted_tokens",
                "scheduled_rate_rps", "max_send_lag_s", "rate_note"}
COUNTERS_ONLY = {"position_acceptance_rate", "acceptance_histogram"}  # analyse.measure, vLLM's


def _open_loop_metrics() -> set[str]:
    recs = [request(i, tokens=8, last=1.0 + i) for i in range(3)]
    for i, r in enumerate(recs):
        r.scheduled, r.start = float(i), float(i) + 0.01
    return set(cell_metrics(CellDispatch(recs, 0.0, 4.0, target_rate=1.0)))


def _gpu_metrics() -> set[str]:
    fields = ["t_s", "index", "util_pct", "memory_mib", "power_w"]
    samples = [[float(t), 0, 50.0, 100.0, 300.0] for t in range(5)]
    return set(gpu_metrics(HostLoad(window_s=4.0, gpu={"fields": fields, "samples": samples}), 100))


def _table_columns(cells: list, slo: SloParams | None = None) -> list[str]:  # type: ignore[type-arg]
    return list(results_table(cells, slo=slo).columns)


def test_every_computed_metric_is_declared_and_every_declared_one_computed() -> None:
    cells = [make_cell("auto", "auto", None, outputs=[[1, 2]]),
             make_cell("ngram-b4", "ngram", 4, outputs=[[1, 2]])]
    tree = analyse(make_cell("ddtree-b8", "tree", 8, outputs=[[1, 2]])).metrics or {}
    computed = {"cell": _open_loop_metrics() | COUNTERS_ONLY, "gpu": _gpu_metrics(),
                "tree": set(tree),
                "lossless": set(compare_cells(cells[1], cells[0])),
                "slo": set(goodput(cells[0], SloParams(ttft_s=1.0)))}
    table = set(_table_columns(cells))
    declared = {m.name for m in METRICS}
    every = set().union(*computed.values())
    assert every - declared == set(), "declare these in their family (analysis/metricfamilies/)"
    assert set(CellMetrics.__annotations__) - declared == set(), "CellMetrics keys undeclared"
    assert {m.name for m in METRICS if m.kind in CELL_KINDS} == set(CellMetrics.__annotations__)
    rows = {m.name for m in METRICS if m.kind == "row"}
    assert declared - every - rows == set(), "declared, but nothing computes them"
    assert rows - table == set(), "declared row metrics the results table lacks"
    assert {m.kind for m in METRICS} <= set(KINDS) and len(METRIC) == len(METRICS)


def test_results_csv_carries_every_declared_column(tmp_path: Path) -> None:
    cells = [make_cell("auto", "auto", None), make_cell("ngram-b4", "ngram", 4)]
    table = results_table(cells, slo=SloParams(ttft_s=1.0))
    path = tmp_path / "results.csv"
    table.to_csv(path, index=False)
    header = path.read_text().splitlines()[0].split(",")
    expected = columns("cell", "spec", "open_loop", "lossless", "slo", "row")
    assert [c for c in expected if c not in header] == []
    assert ONCE_DROPPED <= set(header)
    assert not {m.name for m in METRICS if not m.column} & set(header)  # lists stay in cell files
    assert table.loc[0, "verify_steps"] == 16 and table.loc[0, "output_tokens_mean"] == 16


def test_the_columns_results_csv_had_keep_their_order() -> None:
    cells = [make_cell("auto", "auto", None), make_cell("ngram-b4", "ngram", 4)]
    header = _table_columns(cells)
    before = ["output_tok_s", "request_throughput_rps", "ttft_mean_s", "acceptance_length",
              "n_requests", "rate_not_reached", "e2e_sched_p99_s", "lossless_identical",
              "lossless_n", "window_s", "repeats_n", "unstable", "speedup"]
    assert sorted(before, key=header.index) == before


def test_the_lead_table_reads_its_headers_from_the_declarations() -> None:
    shown = {c.name: c for c in RESULTS}
    for name in ("output_tok_s", "speedup", "acceptance_length", "ttft_mean_s", "gpu_j_per_token"):
        assert shown[name] == METRIC[name].shown()
    assert shown["ttft_mean_s"].text({"ttft_mean_s": 0.0123}) == "12"  # seconds shown in ms


def test_the_columns_against_another_config_come_from_the_declarations() -> None:
    """A rate profile's point blanks the columns that compare with another config: those are
    the ``baseline`` declarations with their interval's ends (hand-listed before issue 50)."""
    from specbench_lib.analysis.metricset import against_baseline

    assert set(against_baseline()) == {"speedup", "speedup_lo", "speedup_hi", "speedup_vs_linear",
                                       "decode_speedup", "decode_speedup_lo", "decode_speedup_hi"}
    assert all(METRIC[c.removesuffix("_lo").removesuffix("_hi")].baseline for c in against_baseline())
