"""Every metric, declared once: its name, unit, meaning, whether it is a ``results.csv`` column,
and how a readable table renders it.

``results.csv`` (:func:`~specbench_lib.analysis.metrics.results_table`), the generated table of
``docs/metrics.md`` (``scripts/metrics_reference.py``) and the lead results table
(:data:`RESULTS`) read these declarations; ``tests/analysis/test_metric_declarations.py`` fails when a
computed metric has none, or a declared one is not computed.

A metric's ``kind`` says what computes it: ``cell`` (every ok cell,
:func:`~specbench_lib.analysis.metrics.cell_metrics`), ``spec`` (the server's spec counters),
``open_loop`` (a cell with a request rate), ``gpu`` (a cell whose GPUs were sampled,
:mod:`~specbench_lib.analysis.energy`), ``lossless`` (a speculative cell against ``auto``'s,
:mod:`~specbench_lib.analysis.lossless`), ``slo`` (with an SLO, :mod:`~specbench_lib.analysis.slo`)
and ``row`` (a results row, over its repeats and its panel).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.tables import ROW_KEYS, Column

KINDS = ("cell", "spec", "open_loop", "gpu", "lossless", "slo", "row")
CELL_KINDS = ("cell", "spec", "open_loop", "gpu")  # stored in a cell file's ``metrics``


@dataclass(frozen=True)
class Metric:
    """One metric: ``unit`` (``text`` is aggregated as text, every other unit as a number),
    ``meaning`` in a sentence, ``column`` (in ``results.csv``; a list or a mapping is only in the
    cell file), how a table shows it (``header``, ``form``, ``scale``, ``interval``: with its
    ``_lo`` and ``_hi`` columns), and whether it compares with another config (``baseline``)."""

    name: str
    unit: str
    meaning: str
    kind: str = "cell"
    column: bool = True
    header: str = ""
    form: str = "{:.3g}"
    scale: float = 1.0
    interval: bool = False
    # a ratio against another config's row of its panel (``auto``'s, the best ``linear``'s):
    # none at a rate profile's point, where each config runs at a rate of its own
    baseline: bool = False

    def shown(self) -> Column:
        """The metric as a readable table's column."""
        return Column(self.name, self.header or self.name, self.form, interval=self.interval,
                      scale=self.scale)


_STAT = {"mean": "mean", "p50": "median", "p90": "90th percentile", "p99": "99th percentile"}
_LATENCY = {"ttft": "TTFT: request sent → first token received",
            "tpot": "TPOT: a request's (last token − first token) / (tokens − 1)",
            "itl": "ITL: per token, a delivery's gap shared by its k tokens",
            "e2e": "E2E: request sent → last token received",
            "delivery_gap": "delivery gap: the time between a request's consecutive deliveries"}
_SCHEDULED = {"ttft": "TTFT: timed from the request's scheduled arrival (open loop)",
              "e2e": "E2E: timed from the request's scheduled arrival (open loop)"}
_LENGTH = {"output_tokens": "the answers' lengths (they vary when `stop` is eos)",
           "prompt_tokens": "the prompts' planned lengths (they vary for conversations)"}
_PCT = {"mean": "mean", "p10": "10th percentile", "p50": "median", "p90": "90th percentile"}


def _latencies(names: dict[str, str], infix: str, kind: str) -> list[Metric]:
    """A latency's statistics, shown in milliseconds (``TTFT mean (ms)``)."""
    return [Metric(f"{m}{infix}_{s}_s", "s", f"{what}; {_STAT[s]} over the cell's requests", kind,
                   header=f"{what.split(':')[0]}{infix.replace('_', ' ')} {s} (ms)",
                   form="{:.0f}", scale=1000.0)
            for m, what in names.items() for s in _STAT]


def _lengths() -> list[Metric]:
    return [Metric(f"{m}_{s}", "tokens", f"{what}; {_PCT[s]} over the cell's requests")
            for m, what in _LENGTH.items() for s in _PCT]


# the results.csv column order: the columns as they were before this module, then the new ones
METRICS: tuple[Metric, ...] = (
    Metric("output_tok_s", "tok/s", "completion tokens (the server's count) over the window: "
           "first request sent → last token received", header="output tok/s [95 %]",
           form="{:.1f}", interval=True),
    Metric("request_throughput_rps", "requests/s", "measured requests over the window"),
    Metric("request_decode_tok_s", "tok/s", "a request's decode rate, (tokens − 1) / (last − "
           "first token), mean over the cell's requests"),
    *_latencies(_LATENCY, "", "cell"),
    Metric("acceptance_length", "tokens/step", "tokens received over the target's forward "
           "steps, the prefill's included: the project's τ, one definition for every engine "
           "(the papers' τ counts verify passes only: `tau_verify`)", "spec",
           header="acceptance length", form="{:.2f}"),
    Metric("tokens_per_step", "tokens/step", "the same figure as `acceptance_length`", "spec"),
    Metric("draft_acceptance_rate", "fraction", "accepted / drafted tokens of a chain (None for "
           "a tree config: `tree_node_acceptance_rate`)", "spec"),
    Metric("tokens_per_chunk", "tokens", "completion tokens per stream event as the server "
           "framed them"),
    Metric("tokens_per_delivery", "tokens", "mean tokens per delivery (a chunk, or a burst of "
           "events less than 0.5 ms after its first)"),
    Metric("n_requests", "requests", "measured requests averaged (failed tolerated ones left out)"),
    Metric("n_failed", "requests", "measured requests a tolerant verdict let through, left out"),
    Metric("completion_tokens", "tokens", "completion tokens of the cell's measured requests"),
    Metric("target_rate_rps", "requests/s", "the request rate asked for", "open_loop"),
    Metric("achieved_rate_rps", "requests/s", "(n − 1) / (last send − first send)", "open_loop"),
    Metric("rate_not_reached", "bool", "sent more than 5 % slower than the drawn schedule",
           "open_loop"),
    *_latencies(_SCHEDULED, "_sched", "open_loop"),
    # computed and stored before, in results.csv since issue 40
    Metric("tpot_weighted_s", "s", "decode time over decode tokens, summed over the requests "
           "(answers of different lengths weigh by their tokens)"),
    *_lengths(),
    Metric("acceptance_length_drafted", "tokens/step", "1 + accepted / drafted steps, over the "
           "steps that carried a draft, where the engine counts those; None otherwise", "spec"),
    Metric("verify_steps", "steps", "the target's forward steps: tokens − accepted drafts",
           "spec"),
    Metric("accepted_tokens", "tokens", "accepted draft tokens, capped at tokens − requests",
           "spec"),
    Metric("tau_verify", "tokens/step", "the papers' τ (z-lab's DFlash and DDTree): the mean of "
           "accepted drafts + 1 over verify passes, the prefill's step out: (tokens − requests) "
           "/ (verify steps − requests)", "spec", header="τ (papers')", form="{:.2f}"),
    Metric("spec_accept_length", "tokens/step", "SGLang's spec_accept_length, reported by "
           "z-lab's SGLang benchmark: tokens / verify passes (completion / spec_verify_ct)",
           "spec"),
    Metric("tree_node_acceptance_rate", "fraction", "a tree config's accepted drafts over the "
           "tree nodes it verified (verify × budget): not comparable with a chain's "
           "`draft_acceptance_rate`", "spec"),
    Metric("scheduled_rate_rps", "requests/s", "the drawn schedule's own rate (Poisson draws of "
           "a few requests differ from the target)", "open_loop"),
    Metric("max_send_lag_s", "s", "the latest a request was sent after its scheduled arrival",
           "open_loop"),
    Metric("rate_note", "text", "why the rate was not reached, in words (empty when it was)",
           "open_loop"),
    # only in the cell file: a list or a mapping per cell
    Metric("position_acceptance_rate", "list", "per draft position k, the fraction of drafts "
           "whose k-th token was accepted (vLLM's /metrics)", "spec", column=False),
    Metric("acceptance_histogram", "list", "the drafts with exactly k tokens accepted, "
           "k = 0 … budget (vLLM's /metrics)", "spec", column=False),
    Metric("chunk_size_counts", "counts", "stream events by their number of tokens", column=False),
    Metric("lossless_identical", "fraction", "greedy outputs identical to `auto`'s, per prompt",
           "lossless"),
    Metric("lossless_prefix_tokens", "tokens", "tokens in common with `auto`'s output before "
           "the first difference", "lossless"),
    Metric("lossless_n", "prompts", "prompts compared with `auto`'s", "lossless"),
    Metric("window_s", "s", "the measurement window: first request sent → last token received"),
    Metric("goodput_rps", "requests/s", "requests that met every SLO limit over the window",
           "slo"),
    Metric("goodput_tok_s", "tok/s", "completion tokens of those requests over the window", "slo"),
    Metric("slo_met", "fraction", "the fraction of measured requests that met the SLO", "slo"),
    Metric("meets_slo", "bool", "at least `slo.percentile` of the requests met it (a mean over "
           "repeats: the fraction of repeats)", "slo"),
    Metric("gpu_energy_j", "J", "the cell's GPUs' power integrated over the window", "gpu"),
    Metric("gpu_j_per_token", "J/token", "GPU energy over completion tokens", "gpu",
           header="GPU J/token [95 %]", interval=True),
    Metric("gpu_j_per_token_lo", "J/token", "low end of its 95 % interval (the mean power's)",
           "gpu"),
    Metric("gpu_j_per_token_hi", "J/token", "high end of its 95 % interval", "gpu"),
    Metric("gpu_power_mean_w", "W", "mean power of the cell's GPUs", "gpu",
           header="GPU power (W)", form="{:.0f}"),
    Metric("gpu_memory_peak_mib", "MiB", "peak memory of the cell's GPUs", "gpu",
           header="GPU memory peak (MiB)", form="{:.0f}"),
    Metric("gpu_util_mean_pct", "%", "mean utilisation of the cell's GPUs", "gpu"),
    Metric("gpu_samples", "samples", "telemetry samples behind the GPU figures", "gpu"),
    Metric("repeats_n", "repeats", "the row's ok repeats", "row"),
    Metric("repeats_failed", "repeats", "the row's repeats that ended invalid or crashed", "row"),
    Metric("output_tok_s_cv", "fraction", "coefficient of variation of output tok/s over the "
           "repeats (NaN for one)", "row"),
    Metric("unstable", "bool", "a CV above `unstable_cv` or a failed repeat", "row"),
    Metric("speedup", "ratio", "output tok/s over the panel's `auto` row's: the panel's claim, "
           "paired by prompt, simultaneous over its configs", "row",
           header="speedup vs auto [95 %]", form="{:.2f}", interval=True, baseline=True),
    Metric("decode_speedup", "ratio", "a request's decode rate (after its first token) over "
           "the panel's `auto` row's: the panel's claim on `decode_rate`, paired by prompt, "
           "simultaneous over its configs", "row", header="decode speedup vs auto [95 %]",
           form="{:.2f}", interval=True, baseline=True),
    Metric("speedup_vs_linear", "ratio", "output tok/s over the panel's best `linear` row's",
           "row", baseline=True),
    Metric("requests_n", "requests", "the requests behind the row's interval", "row",
           header="requests", form="{:g}"),
)
METRIC = {m.name: m for m in METRICS}
# the lead results table: a row's keys, then these, then its notes
LEAD = ("output_tok_s", "speedup", "requests_n", "acceptance_length", "ttft_mean_s",
        "gpu_j_per_token", "gpu_power_mean_w", "gpu_memory_peak_mib")


def columns(*kinds: str) -> tuple[str, ...]:
    """The ``results.csv`` columns of the metrics of ``kinds``, in declaration order."""
    return tuple(m.name for m in METRICS if m.column and m.kind in kinds)


def against_baseline() -> tuple[str, ...]:
    """The columns that compare with another config's row (each ``baseline`` metric, with its
    interval's ends)."""
    return tuple(c for m in METRICS if m.baseline
                 for c in (m.name, *((f"{m.name}_lo", f"{m.name}_hi") if m.interval else ())))

RESULTS = (*ROW_KEYS, *(METRIC[n].shown() for n in LEAD), Column("notes", "notes"))
