"""Measured requests of ok cells → per-cell metrics → a tidy table with speedups."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypedDict, cast

from ..model.catalogue import RATE_TOLERANCE
from ..model.metricdefs import METRIC, columns
from ..model.quantities import DECODE_RATE
from ..model.records import CellRecord, RequestRecord
from ..model.sections import SloParams
from ..model.tablekeys import GROUP as GROUP
from ..model.tablekeys import PANEL as PANEL
from ..model.tablekeys import load_points as load_points
from .latency import add_percentiles, deliveries, token_itls
from .latency import quantile as _quantile
from .specmetrics import request_spec_metrics

_LATENCIES = ("ttft", "tpot", "itl", "e2e", "delivery_gap")
# the columns of results.csv, each declared once in model/metricdefs.py
METRIC_COLUMNS = tuple(c for c in columns("cell", "spec", "open_loop") if c != "window_s")
LOSSLESS_COLUMNS = columns("lossless")
REPEAT_COLUMNS = columns("row")[:4]  # repeats_n … unstable


class CellMetrics(TypedDict, total=False):
    """The metrics of one ok cell, as :func:`cell_metrics` gives them and a cell file stores
    them (``CellRecord.metrics``); times in seconds, rates per second. The open-loop keys
    (``target_rate_rps`` … ``*_sched_*``) only for a cell with a request rate, the position and
    histogram keys only from a server's spec counters (:func:`~specbench_lib.analysis.analyse.measure`)."""

    output_tok_s: float | None
    request_throughput_rps: float | None
    request_decode_tok_s: float | None
    ttft_mean_s: float | None
    ttft_p50_s: float | None
    ttft_p90_s: float | None
    ttft_p99_s: float | None
    tpot_mean_s: float | None
    tpot_p50_s: float | None
    tpot_p90_s: float | None
    tpot_p99_s: float | None
    tpot_weighted_s: float | None  # decode time over decode tokens, summed over requests
    output_tokens_mean: float | None  # the answers' lengths (they vary when stop is eos)
    output_tokens_p10: float | None
    output_tokens_p50: float | None
    output_tokens_p90: float | None
    prompt_tokens_mean: float | None  # the prompts' lengths (they vary for conversations)
    prompt_tokens_p10: float | None
    prompt_tokens_p50: float | None
    prompt_tokens_p90: float | None
    itl_mean_s: float | None
    itl_p50_s: float | None
    itl_p90_s: float | None
    itl_p99_s: float | None
    e2e_mean_s: float | None
    e2e_p50_s: float | None
    e2e_p90_s: float | None
    e2e_p99_s: float | None
    delivery_gap_mean_s: float | None
    delivery_gap_p50_s: float | None
    delivery_gap_p90_s: float | None
    delivery_gap_p99_s: float | None
    acceptance_length: float | None
    tokens_per_step: float | None
    acceptance_length_drafted: float | None
    draft_acceptance_rate: float | None
    verify_steps: int | None
    accepted_tokens: int | None
    tau_verify: float | None  # the papers' τ: (tokens − requests) / verify passes
    spec_accept_length: float | None  # SGLang's: tokens / verify passes
    tree_node_acceptance_rate: float | None  # a tree config's accepted / tree nodes verified
    position_acceptance_rate: list[float] | None
    acceptance_histogram: list[int] | None
    tokens_per_chunk: float | None
    tokens_per_delivery: float | None
    chunk_size_counts: dict[str, int]
    n_requests: int
    n_failed: int
    completion_tokens: int
    # the cell's GPUs, where they were sampled (:mod:`.energy`)
    gpu_energy_j: float
    gpu_j_per_token: float | None
    gpu_j_per_token_lo: float | None
    gpu_j_per_token_hi: float | None
    gpu_power_mean_w: float
    gpu_memory_peak_mib: float
    gpu_util_mean_pct: float
    gpu_samples: int
    window_s: float
    target_rate_rps: float
    scheduled_rate_rps: float | None
    achieved_rate_rps: float | None
    max_send_lag_s: float
    rate_not_reached: bool
    rate_note: str | None
    ttft_sched_mean_s: float | None
    ttft_sched_p50_s: float | None
    ttft_sched_p90_s: float | None
    ttft_sched_p99_s: float | None
    e2e_sched_mean_s: float | None
    e2e_sched_p50_s: float | None
    e2e_sched_p90_s: float | None
    e2e_sched_p99_s: float | None


class Measured(Protocol):
    """A cell's requests: a :class:`~specbench_lib.model.records.CellRecord` or a fresh ``CellDispatch``."""

    @property
    def records(self) -> list[RequestRecord]: ...

    @property
    def measured(self) -> list[RequestRecord]: ...

    @property
    def target_rate(self) -> float | None: ...


def cell_metrics(dispatch: Measured, *, exclude: Sequence[int] = ()) -> CellMetrics:
    """Metrics of one cell's measured requests, with token counts as the server reported them.

    ``output_tok_s`` is completion tokens over the measurement window, from the first request
    sent to the last token received. A *delivery* is the tokens that reached the client
    together: one chunk, or a burst of events less than :data:`~.latency.DELIVERY_GAP_S` apart
    (llama.cpp sends each accepted draft token as its own event, microseconds apart). ``delivery_gap`` is
    the time between a request's deliveries, ``tokens_per_delivery`` their mean size; ITL is per
    token, a delivery's gap shared by its k tokens (gap / k each), so its percentiles are
    latencies a user waits per token; TPOT is a request's (last − first token) / (n − 1);
    acceptance length is tokens per verify step, weighted by tokens: sum(tokens) /
    sum(verify steps). ``exclude`` names failed requests a tolerant verdict let through: they
    are left out and counted in ``n_failed``, never averaged in.
    """
    skip = set(exclude)
    recs = [r for r in dispatch.measured if r.index not in skip]
    total = sum(r.final.completion_tokens or 0 for r in recs if r.final)
    starts = [r.start for r in recs]
    lasts = [r.token_times[-1] for r in recs if r.token_times]
    window = (max(lasts) - min(starts)) if starts and lasts else 0.0
    series, decode_rates, sizes = _latency_series(recs)
    chunks = [size for r in recs for size in r.chunk_sizes]
    metrics: dict[str, Any] = {
        "output_tok_s": total / window if window > 0 else None,
        "request_throughput_rps": len(recs) / window if window > 0 else None,
        "request_decode_tok_s": _mean(decode_rates),
    }
    for name, values in series.items():
        metrics[f"{name}_mean_s"] = _mean(values)
        for q in (50, 90, 99):
            metrics[f"{name}_p{q}_s"] = _quantile(values, q / 100)
    metrics.update(_lengths(recs))
    metrics.update(request_spec_metrics(recs, total))
    metrics.update({
        "tokens_per_chunk": total / len(chunks) if chunks else None,
        "tokens_per_delivery": _mean([float(k) for k in sizes]),
        "chunk_size_counts": {str(k): v for k, v in sorted(Counter(chunks).items())},
        "n_requests": len(recs),
        "n_failed": len(dispatch.measured) - len(recs),
        "completion_tokens": total,
        "window_s": window,
    })
    metrics.update(rate_shortfall(dispatch.records, dispatch.target_rate))
    metrics.update(_from_schedule(recs))
    return cast(CellMetrics, metrics)


def _lengths(recs: Sequence[RequestRecord]) -> dict[str, float | None]:
    """Token-weighted TPOT (answers of different lengths weigh by their tokens) and the
    distributions of the answers' and the prompts' lengths (questions sent at their own length
    vary; prompts cut to a context do not)."""
    spans = [(r.token_times[-1] - r.token_times[0], len(r.token_times) - 1) for r in recs
             if len(r.token_times) >= 2]
    tokens = sum(k for _, k in spans)
    lengths = [float(r.final.completion_tokens or 0) for r in recs if r.final]
    found: dict[str, float | None] = {
        "tpot_weighted_s": sum(t for t, _ in spans) / tokens if tokens else None,
        "output_tokens_mean": _mean(lengths)}
    prompts = [float(r.prompt_tokens_planned) for r in recs]
    found["prompt_tokens_mean"] = _mean(prompts)
    for q in (10, 50, 90):
        found[f"output_tokens_p{q}"] = _quantile(lengths, q / 100)
        found[f"prompt_tokens_p{q}"] = _quantile(prompts, q / 100)
    return found


def _latency_series(recs: Sequence[RequestRecord]) -> tuple[dict[str, list[float]], list[float],
                                                             list[int]]:
    """Each latency's values over ``recs`` (TTFT, E2E, TPOT, ITL, delivery gap), the requests'
    decode rates and the sizes of their deliveries."""
    decode_rates: list[float] = []
    series: dict[str, list[float]] = {name: [] for name in _LATENCIES}
    sizes: list[int] = []
    for r in recs:
        times = r.token_times
        if r.ttft is not None:
            series["ttft"].append(r.ttft)
        series["e2e"].append(r.e2e)
        if len(times) >= 2 and times[-1] > times[0]:
            series["tpot"].append((times[-1] - times[0]) / (len(times) - 1))
            decode_rates.append((len(times) - 1) / (times[-1] - times[0]))
        found = deliveries(times)
        sizes.extend(k for _, k in found)
        series["delivery_gap"].extend(b - a for (a, _), (b, _) in zip(found, found[1:],
                                                                        strict=False))
        series["itl"].extend(token_itls(found))
    return series, decode_rates, sizes


def _from_schedule(recs: Sequence[RequestRecord]) -> dict[str, Any]:
    """Open loop: TTFT and E2E timed from each request's *scheduled* arrival, so time spent
    waiting for a free slot counts (no coordinated omission); empty for a closed loop."""
    timed = [r for r in recs if r.scheduled is not None]
    if not timed:
        return {}
    series = {"ttft": [r.token_times[0] - r.scheduled for r in timed if r.token_times
                       and r.scheduled is not None],
              "e2e": [r.end - r.scheduled for r in timed if r.scheduled is not None]}
    found: dict[str, Any] = {}
    for name, values in series.items():
        found[f"{name}_sched_mean_s"] = _mean(values)
        for q in (50, 90, 99):
            found[f"{name}_sched_p{q}_s"] = _quantile(values, q / 100)
    return found




def rate_shortfall(records: list[RequestRecord], target_rate: float | None) -> dict[str, Any]:
    """Target vs achieved send rate of an open-loop cell's measured requests (empty if closed loop).

    The achieved rate is (n - 1) / (last send - first send); it is compared with the rate of the
    drawn schedule itself (Poisson draws of a few requests differ from the target), and
    ``rate_not_reached`` is set when it falls more than ``RATE_TOLERANCE`` below it.
    """
    sent = [r for r in records if not r.warmup and r.scheduled is not None]
    if target_rate is None or len(sent) < 2:
        return {}
    starts = sorted(r.start for r in sent)
    planned = sorted(r.scheduled for r in sent if r.scheduled is not None)
    achieved = (len(sent) - 1) / (starts[-1] - starts[0]) if starts[-1] > starts[0] else None
    scheduled = (len(sent) - 1) / (planned[-1] - planned[0]) if planned[-1] > planned[0] else None
    late = max(r.start - (r.scheduled or 0.0) for r in sent)
    short = achieved is not None and scheduled is not None and (
        achieved < (1 - RATE_TOLERANCE) * scheduled)
    return {"target_rate_rps": target_rate, "scheduled_rate_rps": scheduled,
            "achieved_rate_rps": achieved, "max_send_lag_s": late, "rate_not_reached": short,
            "rate_note": (f"rate_not_reached: sent {achieved:.3g}/s of a scheduled {scheduled:.3g}/s "
                          f"(target {target_rate:g}/s)") if short else None}


def results_table(cells: Sequence[CellRecord], *, unstable_cv: float = 0.10,
                  slo: SloParams | None = None, alphas: Mapping[Any, float] | None = None) -> Any:
    """A pandas DataFrame of ok cells: one row per config × :data:`PANEL` (workload × context ×
    output tokens × concurrency × open-loop load point).

    Repeats of a cell are averaged; ``output_tok_s_cv`` is their coefficient of variation
    (sample std / mean; NaN for one repeat), ``repeats_failed`` counts the row's repeats that
    ended ``invalid`` or ``crashed``, and ``unstable`` flags a CV above ``unstable_cv`` or any
    failed repeat (the row stays, marked). ``speedup`` compares mean output tok/s with the ``auto`` row of
    the same workload, context and concurrency; it is NaN when that baseline is not ok;
    ``speedup_vs_linear`` does the same against the best ok ``linear`` config, when any. The
    ``lossless_*`` columns compare greedy outputs with ``auto``'s (see :mod:`~.lossless`).
    ``output_tok_s_lo/hi`` is a 95 % bootstrap interval over the row's independent units
    (repeats, requests, or blocks of requests in flight together); ``speedup`` and
    ``speedup_lo/hi`` are the panel's claim (:mod:`~.claim`: paired by prompt, simultaneous
    over the panel's configs, at the panel's error in ``alphas``: a budgeted run's last look),
    ``requests_n`` the requests and ``units_n`` the units behind them, ``interval_note`` why a
    row has none (see :mod:`~specbench_lib.analysis.intervals`). TTFT, ITL and E2E
    percentiles are of the row's requests pooled over its repeats, with intervals
    (``ttft_p50_s_lo/hi``, …); p99 (every ``*_p99_s``) only with at least 100 requests behind
    it, else NaN, and ``*_max_s`` the maximum of ``max_n`` requests (see :mod:`~.latency`).
    With an ``slo``, the :data:`~specbench_lib.analysis.slo.SLO_COLUMNS` too (``meets_slo`` as the fraction of
    repeats that met it).
    """
    import pandas as pd

    from .claim import claim_columns, panel_claims
    from .energy import ENERGY_COLUMNS
    from .intervals import add_intervals
    from .lossless import losslessness
    from .slo import SLO_COLUMNS, goodput

    same = losslessness(cells)

    rows = [{**c.spec.row(), **(c.metrics or {}), **same.get(c.cell_id, {}),
             **(goodput(c, slo) if slo is not None else {})} for c in cells if c.verdict.ok]
    gpus = any("gpu_energy_j" in (c.metrics or {}) for c in cells)  # sampled GPUs only
    columns = [*GROUP, *METRIC_COLUMNS, *LOSSLESS_COLUMNS, "window_s",
               *(SLO_COLUMNS if slo is not None else ()), *(ENERGY_COLUMNS if gpus else ())]
    table = pd.DataFrame(rows, columns=columns)
    text = [c for c in columns if c in METRIC and METRIC[c].unit == "text"]
    numeric = [c for c in columns if c not in GROUP and c not in text]
    table[numeric] = table[numeric].apply(pd.to_numeric, errors="coerce")
    grouped = table.groupby(GROUP, dropna=False, sort=False)
    means = grouped[numeric].mean().reset_index()
    for name in text:  # the repeats' notes, each said once
        means[name] = grouped[name].agg(_said_once).to_numpy()
    means = means[[*GROUP, *(c for c in columns if c not in GROUP)]].copy()  # one block
    means = _speedups(_repeat_columns(means, grouped, cells, unstable_cv))
    keys = PANEL
    means = add_intervals(means, cells, keys, GROUP)
    means = claim_columns(means, panel_claims(cells, alphas=alphas))
    means = claim_columns(means, panel_claims(cells, alphas=alphas, quantity=DECODE_RATE.name),
                          "decode_speedup")
    means = add_percentiles(means, cells, GROUP)
    # a rate profile's point k runs each config at its own rate: no like-for-like baseline
    profile = means["load"].str.startswith("p")
    means.loc[profile, ["speedup", "speedup_lo", "speedup_hi", "speedup_vs_linear",
                        "decode_speedup", "decode_speedup_lo", "decode_speedup_hi"]] = float("nan")
    return means


def _repeat_columns(means: Any, grouped: Any, cells: Sequence[CellRecord],
                    unstable_cv: float) -> Any:
    """The :data:`REPEAT_COLUMNS` of each row: its repeats, failed repeats, CV, stability."""
    from .intervals import key_value

    tok_s = grouped["output_tok_s"]
    means["repeats_n"] = grouped.size().to_numpy()
    failed = Counter(tuple(key_value(c.spec.row()[k]) for k in GROUP) for c in cells
                     if c.status in ("invalid", "crashed"))
    means["repeats_failed"] = [failed[tuple(key_value(v) for v in row)]
                               for row in means[GROUP].itertuples(index=False, name=None)]
    means["output_tok_s_cv"] = (tok_s.std(ddof=1) / tok_s.mean()).to_numpy()
    means["unstable"] = (means["output_tok_s_cv"] > unstable_cv) | (means["repeats_failed"] > 0)
    return means


def _speedups(means: Any) -> Any:
    """``speedup`` against the panel's ``auto`` row (its first, the claims' baseline, where a
    plan has two: an A/A pair), ``speedup_vs_linear`` against its best ``linear`` row (NaN where
    there is none)."""
    keys = PANEL
    base = means[means["method"] == "auto"][[*keys, "output_tok_s"]].drop_duplicates(
        subset=keys, keep="first")
    base = base.rename(columns={"output_tok_s": "auto_tok_s"})
    means = means.merge(base, on=keys, how="left")
    means["speedup"] = means["output_tok_s"] / means["auto_tok_s"]
    linear = means[means["method"] == "linear"].groupby(keys)["output_tok_s"].max()
    means = means.merge(linear.rename("linear_tok_s").reset_index(), on=keys, how="left")
    means["speedup_vs_linear"] = means["output_tok_s"] / means["linear_tok_s"]
    return means.drop(columns=["auto_tok_s", "linear_tok_s"])


def _said_once(values: Any) -> str | None:
    """A text column's repeats as one text: each distinct note once, in order (None if none)."""
    notes = list(dict.fromkeys(str(v) for v in values if isinstance(v, str) and v))
    return "; ".join(notes) or None


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None
