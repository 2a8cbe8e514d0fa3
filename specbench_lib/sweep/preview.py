"""A dry run: what a sweep would do, without starting a server or touching the network.

It works for any phase on any machine (the GPU phases on a laptop): the cells, the exact argv
of every server config, the context guard's outcome per cell and the known-bad rules that apply.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from ..analysis.validate import context_guard
from ..core.display import Rendered, html_table, html_text
from ..core.errors import PreflightError
from ..model.plan import Plan
from ..servers.engines import get_adapter
from .design import DesignEstimate
from .estimate import estimate, restarts_of
from .kvpool import kv_check
from .lifetimes import describe, launch_argvs, plan_lifetimes

_CELL_COLUMNS = ("cell", "config", "budget", "workload", "context", "output_tokens", "concurrency",
                 "load", "guard", "known_bad")


class PlanPreview(Rendered):
    """The plan of a sweep, shown as tables; stands in for a result in a dry-run notebook."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        params = plan.params
        engine = params.engine
        adapter = get_adapter(engine)
        argvs = launch_argvs(plan, adapter)
        # the corpus must feed the plan: refused here (a PreflightError) before any server starts
        self.lifetimes = plan_lifetimes(plan, adapter, argvs)
        self.estimate = estimate(plan, restarts_of(self.lifetimes))  # minutes, before any start
        self.design = DesignEstimate(plan)  # every stage of a staged phase, priced
        try:  # every panel's tokens in flight against its configs' estimated KV pools
            self.kv = f"KV pool: {kv_check(plan)}"
        except PreflightError as exc:
            self.kv = f"KV pool: PROBLEM: {exc}"
        self.argv = {s.label: argvs[s.label] or
                     [f"(attached: {s.attach.url})" if s.attach else ""]
                     for s in plan.servers}
        reserve = {s.label: adapter.speculative_reserve(s) for s in plan.servers}
        rules = {s.label: [kb for kb in params.known_bad if kb.config == s.name
                           and (not kb.budgets or s.budget in kb.budgets)] for s in plan.servers}
        self.rows: list[dict[str, Any]] = []
        for cell in plan.cells:
            refused = context_guard(prompt_tokens=cell.context, output_tokens=cell.output_tokens,
                                    reserve=reserve[cell.config], context=engine.context)
            known = rules[cell.config]
            self.rows.append({
                "cell": cell.cell_id, "config": cell.config, "budget": cell.budget,
                "workload": cell.workload, "context": cell.context,
                "output_tokens": cell.output_tokens, "concurrency": cell.concurrency,
                "load": cell.load,
                "guard": refused.reasons[0] if refused else "fits",
                "known_bad": "; ".join(_describe(kb) for kb in known),
            })

    def servers(self) -> Any:
        """One row per server config: label, method, budget and the exact argv."""
        import pandas as pd

        return pd.DataFrame([{"config": s.label, "method": s.method, "budget": s.budget,
                              "argv": shlex.join(self.argv[s.label])} for s in self.plan.servers])

    def cells(self) -> Any:
        """One row per planned cell with the context guard's outcome and known-bad rules."""
        import pandas as pd

        frame = pd.DataFrame(self.rows)
        frame["budget"] = frame["budget"].astype("Int64")
        return frame

    def summary(self) -> PlanPreview:
        """What a dry run has to show: the exact argv per config and every planned cell with
        the context guard's outcome (this preview itself; its tables: :meth:`servers`,
        :meth:`cells`)."""
        return self

    def categories(self) -> PlanPreview:
        """Nothing was measured: the preview (with its time estimate) stands in for the table
        by category."""
        return self

    def prompt_spread(self) -> PlanPreview:
        """Nothing was measured: the preview stands in for the per-prompt speedups."""
        return self

    def require_valid(self) -> None:
        """Nothing was measured in a dry run, so there is nothing to validate."""
        print(f"dry run: {len(self.rows)} cells planned, nothing measured")

    def save_figure(self, fig: Any, name: str) -> None:
        """A dry run has no run directory; figures are not saved."""

    def figures(self) -> dict[str, Any]:
        """Nothing was measured, so there is nothing to draw."""
        return {}

    def save_figures(self, figures: dict[str, Any]) -> list[Path]:
        return []

    def text(self) -> str:
        refused = sum(1 for r in self.rows if r["guard"] != "fits")
        lines = [repr(self.plan), "", f"context guard: {len(self.rows) - refused} cells fit, "
                 f"{refused} refused before sending",
                 f"prompts: fresh {describe(self.lifetimes)}", self.kv, self.estimate.text(),
                 *self.design.lines(), "", "argv per config:"]
        lines += [f"  {label}: {shlex.join(argv)} [isolation {self._mode(label)}]"
                  for label, argv in self.argv.items()]
        lines += [f"  refused: {r['cell']}: {r['guard']}" for r in self.rows if r["guard"] != "fits"]
        known = {r["config"]: r["known_bad"] for r in self.rows if r["known_bad"]}
        lines += [f"  known bad: {label}: {rule}" for label, rule in known.items()]
        return "\n".join(lines)

    def html(self) -> str:
        refused = sum(1 for r in self.rows if r["guard"] != "fits")
        servers = [[s.label, s.method, s.budget, shlex.join(self.argv[s.label])]
                   for s in self.plan.servers]
        cells = [[r[k] for k in _CELL_COLUMNS] for r in self.rows]
        flagged = ["background:#fee" if r["guard"] != "fits" or r["known_bad"] else None
                   for r in self.rows]
        return (html_text("dry run", bold=True, detail=repr(self.plan).splitlines()[0])
                + html_text(f"context guard: {len(self.rows) - refused} cells fit, {refused} "
                            f"refused before sending; nothing was started")
                + html_text(f"prompts: fresh {describe(self.lifetimes)}") + html_text(self.kv)
                + self.estimate.html()
                + self.design.html()
                + html_table(["config", "method", "budget", "argv"], servers)
                + html_table(_CELL_COLUMNS, cells, row_styles=flagged))

    def _mode(self, label: str) -> str:
        found = self.lifetimes.isolations.get(label)
        return found.mode if found is not None else "?"

    def __repr__(self) -> str:
        return self.text()


def _describe(rule: Any) -> str:
    conditions = [f"GPU ~ {rule.gpu}" if rule.gpu else "",
                  f"compute capability {rule.compute_cap}" if rule.compute_cap else "",
                  f"engine ~ {rule.engine_version}" if rule.engine_version else ""]
    when = ", ".join(c for c in conditions if c)
    return f"skipped{f' if {when}' if when else ''}: {rule.reason}"
