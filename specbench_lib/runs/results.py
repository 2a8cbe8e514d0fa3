"""A run's results as a value: its cells analysed now, verdicts, the ok-only table, checks.

A :class:`RunResult` reads a run directory once (manifest and cell records), analyses every
cell from its stored requests (:func:`~specbench_lib.analysis.analyse`), and caches its tables. It is the
read model: drawing is :mod:`~specbench_lib.report.plots`', writing files
:mod:`~specbench_lib.report.writers`', and the value a sweep
returns, with both, :class:`~specbench_lib.report.outcome.SweepResult`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from ..analysis.analyse import analyse
from ..core.display import Rendered, html_table, html_text
from ..core.errors import StoreError, ValidationFailed
from ..core.tables import plan_names, plan_sorted
from ..model.answerfile import answer_or_error
from ..model.quantities import OUTPUT_RATE, QUANTITIES
from ..model.records import CellRecord
from ..model.verdict import STATUSES
from .configfaults import ConfigFault, late_crashes
from .manifest import Manifest
from .run import RunDir

_COLOURS = {"ok": "#d8f3dc", "invalid": "#ffe5b4", "crashed": "#ffccd5", "skipped": "#e9ecef"}


class RunResult(Rendered):
    """The cells of one run directory; shows itself as a verdict table in JupyterLab.

    Only cells whose fingerprint matches the run's plan are read (``cells``); any other cell file
    is ``stale`` (an earlier plan, engine, model or code version) and never reaches a table or a
    plot. ``missing`` lists planned cells that have no current file (an interrupted run);
    ``damaged`` the cell files that could not be read (each a :class:`StoreError` naming it).
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.dir = RunDir(Path(run_dir))
        self.run_dir = self.dir.path
        self.manifest: dict[str, Any] = self.dir.manifest()
        records, self.damaged = self.dir.read_cells()
        every = [analyse(c) for c in records]
        expected = self.info.plan_fingerprints
        if expected is None:
            self.cells, self.stale = every, []
        else:
            self.cells = [c for c in every if expected.get(c.cell_id) == c.fingerprint]
            self.stale = [c for c in every if expected.get(c.cell_id) != c.fingerprint]
        self.missing = sorted(set(expected or ()) - {c.cell_id for c in self.cells})

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    @property
    def info(self) -> Manifest:
        """The manifest as its read model (``manifest`` is the JSON object it was read from)."""
        return Manifest.from_dict(self.manifest)

    @property
    def phase(self) -> str | None:
        return self.info.phase

    @cached_property
    def config_faults(self) -> tuple[ConfigFault, ...]:
        """The configs whose server crashed after their last cell (idle or at shutdown)."""
        return late_crashes(self.info, self.cells)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(STATUSES, 0)
        for cell in self.cells:
            counts[cell.status] += 1
        return counts

    def cell(self, cell_id: str) -> CellRecord:
        found = next((c for c in self.cells if c.cell_id == cell_id), None)
        if found is None:
            raise StoreError(f"no current cell {cell_id!r} in this run", path=self.run_dir)
        return found

    @cached_property
    def _verdicts(self) -> Any:
        import pandas as pd

        rows = []
        for cell in self.cells:
            spec = cell.spec
            rows.append({"config": spec.config, "series": spec.series, "budget": spec.budget,
                         "workload": spec.workload, "context": spec.context,
                         "output_tokens": spec.output_tokens, "concurrency": spec.concurrency,
                         "load": spec.load, "temperature": spec.temperature, "turn": spec.turn,
                         "rate_rps": cell.target_rate or spec.rate,
                         "verdict": cell.status,
                         "output_tok_s": (cell.metrics or {}).get("output_tok_s"),
                         "reasons": "; ".join(cell.verdict.reasons),
                         "failed": not cell.verdict.ok and not cell.verdict.by_design})
        frame = pd.DataFrame(rows, columns=["config", "series", "budget", "workload", "context",
                                            "output_tokens", "concurrency", "load",
                                            "temperature", "turn", "rate_rps",
                                            "verdict", "output_tok_s", "reasons", "failed"])
        frame["budget"] = frame["budget"].astype("Int64")
        return frame

    def verdicts(self) -> Any:
        """One row per cell: its spec, verdict, reasons and (ok cells only) throughput."""
        return self._verdicts.copy()

    @cached_property
    def _table(self) -> Any:
        from ..analysis.metrics import results_table

        params = self.info.params
        return results_table(self.cells, unstable_cv=params.get("unstable_cv", 0.10),
                             slo=self.slo, alphas=self.alphas)

    @cached_property
    def alphas(self) -> dict[tuple[Any, ...], float]:
        """A budgeted run's error per panel, that of the look its answer was made at
        (``answer.json``, through its typed reader); empty for a fixed plan (one look at α) and
        for a damaged answer (named by the answer's own readers; the claims are then at α)."""
        found, _ = answer_or_error(self.run_dir)
        return {p.panel.values(): float(p.alpha)
                for p in (found.panels if found else ()) if p.alpha is not None}

    @property
    def slo(self) -> Any:
        """The run's SLO (``slo`` in its params), or None; set it to read the run against
        another one: ``result.slo = SloParams(ttft_s=0.5)`` (tables are then made again)."""
        if "_slo" not in self.__dict__:
            found = self.info.params.get("slo")
            from ..model.sections import SloParams

            try:
                self.__dict__["_slo"] = SloParams.model_validate(found) if found else None
            except ValueError:  # a damaged manifest's slo (pydantic's error): read as none
                self.__dict__["_slo"] = None
        return self.__dict__["_slo"]

    @slo.setter
    def slo(self, value: Any) -> None:
        self.__dict__["_slo"] = value
        for cached in ("_table", "_best"):
            self.__dict__.pop(cached, None)

    def slo_capacity(self) -> Any:
        """Per config × workload × context × output length, the highest concurrency and rate that
        meet the SLO (see :func:`~specbench_lib.analysis.slo.capacity`), or None when the run has no SLO."""
        from ..analysis.slo import capacity

        return None if self.slo is None else capacity(self._table, self.slo)

    def table(self) -> Any:
        """The metrics of ok cells only, with speedup vs ``auto`` (see metrics.results_table)."""
        return self._table.copy()

    def best(self, quantity: str | None = None) -> Any:
        """Per workload × context × concurrency: the best config, its speedup with an interval
        that accounts for having picked it, the confidence set for the best and its decision
        (decided / tie / undecided), and the flags that limit the claim (see
        :mod:`~specbench_lib.analysis.best`), on ``quantity`` (the run's ``claim_quantity`` by
        default; :mod:`~specbench_lib.model.quantities`)."""
        if quantity is None or quantity == self.quantity:
            return self._best.copy()
        return self._claims_on(quantity).copy()

    @property
    def quantity(self) -> str:
        """What the run's claims are made on (its params' ``claim_quantity``)."""
        return str(self.info.params.get("claim_quantity") or OUTPUT_RATE.name)

    @property
    def equivalence(self) -> float:
        return float(self.info.params.get("equivalence", 0.05))

    @cached_property
    def _best(self) -> Any:
        return self._claims_on(self.quantity)

    def _claims_on(self, quantity: str) -> Any:
        from ..analysis.best import best_configs
        from ..analysis.metrics import GROUP

        return best_configs(self.cells, self._table, GROUP, alphas=self.alphas,
                            equivalence=self.equivalence, quantity=quantity,
                            explain=quantity == self.quantity)

    def claims(self) -> Any:
        """:meth:`best` on every quantity (:data:`~specbench_lib.model.quantities.QUANTITIES`),
        the run's own first: one frame, a ``quantity`` column."""
        import pandas as pd

        order = [self.quantity, *(q for q in QUANTITIES if q != self.quantity)]
        return pd.concat([self.best(q) for q in order], ignore_index=True)

    def pooled(self) -> RunResult:
        """This run read with its params' ``groups`` as workloads (only them): each group's
        members' cells pooled (:func:`~specbench_lib.analysis.bycategory.pooled`), so its table,
        claims and figures are the same computation's over the pooled prompts."""
        from ..analysis.bycategory import pooled

        found = copy.copy(self)
        found.__dict__ = {k: v for k, v in self.__dict__.items()
                          if k not in ("_table", "_best", "_verdicts", "alphas")}
        found.cells = pooled(self.cells, self.info.params.get("groups") or {})
        return found

    def categories(self, answers: int = 3, thinking_end: Sequence[int] | None = None) -> Any:
        """The category × config table (every workload, then every group of ``groups``: tokens
        per step, the claim's speedup with its interval, answer and prompt length, the
        decision), with up to ``answers`` answers per category (see
        :mod:`~specbench_lib.analysis.bycategory`);
        with a reasoning model's ``thinking_end`` (its end-of-thinking token ids), each row's
        reasoning and answer segments too (:mod:`~specbench_lib.analysis.thinking`)."""
        import pandas as pd

        from ..analysis.bycategory import ByCategory, answer_lengths, category_table, first_turns

        groups = self.info.params.get("groups") or {}
        frames = [category_table(self._table, self._best, answer_lengths(self.cells))]
        if any(c.spec.turn == 2 for c in self.cells):  # turn 1 of a turn-2 run, said so
            frames.append(first_turns(self.cells))
        if groups:
            pool = self.pooled()
            frames.append(category_table(pool.table(), pool.best(), answer_lengths(pool.cells),
                                         groups))
        frame = pd.concat(frames, ignore_index=True)
        order = [str(w.get("name")) for w in self.info.params.get("workloads", [])] + list(groups)
        frame["plan_order"] = [order.index(w) if w in order else len(order) for w in frame["workload"]]
        frame = plan_sorted(frame, plan_names(self.info.params), ["plan_order", "turn"])
        if thinking_end is not None:  # token ids, or a ParamsError naming it
            from ..analysis.thinking import thinking_table

            frame = frame.merge(thinking_table(self.cells, thinking_end),
                                on=["workload", "turn", "config"], how="left")
        return ByCategory(frame.drop(columns="plan_order").reset_index(drop=True),
                          self.answer_samples(answers))

    def answer_samples(self, per_workload: int = 3) -> dict[str, list[str]]:
        """Up to ``per_workload`` answer texts per workload (turn 2 named so), from the samples
        its ok cells kept (each cell's first measured answers, cut: ``RequestRecord.output_text``),
        ``auto``'s first."""
        found: dict[str, list[str]] = {}
        for cell in sorted(self.cells, key=lambda c: (c.spec.method != "auto", c.cell_id)):
            label = cell.spec.workload + (f" (turn {cell.spec.turn})" if cell.spec.turn != 1
                                          else "")
            kept = found.setdefault(label, [])
            first = [r for r in cell.requests if r.turn == 1 and r.warmup and r.output_text]
            if cell.spec.turn == 2 and first and len(kept) < per_workload:  # said as such
                kept.append(f"{cell.spec.config}, turn 1 (sent before turn 2, untimed): "
                            f"{(first[0].output_text or '')[:600]}")
            for rec in cell.measured if cell.verdict.ok else ():
                if rec.output_text and len(kept) < per_workload:
                    kept.append(f"{cell.spec.config}: {rec.output_text}")
        return {k: v for k, v in found.items() if v}

    def summary(self) -> Any:
        """The best-config statements, then mean output tok/s and speedup, each with its 95 %
        interval, the requests and independent units behind it (and why a row has none) and
        its flags, per config, workload, context and concurrency."""
        from ..analysis.best import Summary
        from ..analysis.crossover import crossovers
        from ..analysis.metrics import PANEL
        from ..analysis.metricset import SUMMARY, columns

        gpu = set(columns("gpu"))  # only where the run's GPUs were sampled
        cols = ["config", *PANEL, *(c for c in SUMMARY if c not in gpu or c in self._table)]
        table = plan_sorted(self._table[cols], plan_names(self.info.params), PANEL)
        others = {q.label: self.best(q.name) for q in QUANTITIES.values() if q.name != self.quantity}
        return Summary(self._best, table, crossovers(self._table), self.slo_capacity(),
                       others=others, quantity=QUANTITIES[self.quantity].label)

    def require_valid(self) -> None:
        """Raise :class:`ValidationFailed` when the run has no ok cell or no ok baseline."""
        counts = self.counts()
        if counts["ok"] == 0:
            raise ValidationFailed(f"run {self.run_id} has no ok cell: {counts}; see the verdict "
                                   f"table's reasons", run_dir=self.run_dir, counts=counts)
        if not any(c.verdict.ok and c.spec.method == "auto" for c in self.cells):
            raise ValidationFailed(f"run {self.run_id} has no ok 'auto' baseline cell, so no "
                                   f"speedup can be computed: {counts}", run_dir=self.run_dir,
                                   counts=counts)

    def text(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.counts().items())
        extra = "".join(f", {len(v)} {k}" for k, v in (("stale", self.stale),
                                                       ("missing", self.missing),
                                                       ("damaged", self.damaged)) if v)
        info = self.info
        elapsed = "?" if info.elapsed_s is None else info.elapsed_s
        lines = [f"run {self.run_id} · {info.status} · {counts}{extra} · {elapsed} s"]
        for cell in self.cells:
            tok_s = (cell.metrics or {}).get("output_tok_s")
            lines.append(f"  {cell.cell_id}: {cell.status}"
                         + (f", {tok_s:.1f} tok/s" if tok_s is not None else "")
                         + (f" ({'; '.join(cell.verdict.reasons)})" if cell.verdict.reasons else ""))
        lines += [f"  damaged: {error}" for error in self.damaged]
        lines += [f"  {fault}" for fault in self.config_faults]
        return "\n".join(lines)

    def html(self) -> str:
        head = html_text(self.text().splitlines()[0], bold=True)
        frame = plan_sorted(self._verdicts, plan_names(self.info.params),
                            ["workload", "context", "output_tokens", "concurrency", "load"],
                            config_first=True)
        rows = [[r.config, r.workload, r.context, r.concurrency, r.verdict,
                 "" if r.output_tok_s is None or r.output_tok_s != r.output_tok_s
                 else f"{r.output_tok_s:.1f}", r.reasons] for r in frame.itertuples()]
        styles = [f"background:{_COLOURS.get(r.verdict, 'white')}" for r in frame.itertuples()]
        table = html_table(["config", "workload", "context", "concurrency", "verdict",
                            "output tok/s", "reasons"], rows, row_styles=styles)
        damaged = "".join(html_text(f"damaged: {e}") for e in self.damaged)
        faults = "".join(html_text(str(f), bold=True) for f in self.config_faults)
        return f"{head}{faults}{table}{damaged}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.run_id!r}, {self.counts()})"
