"""The paper table: ``results.tex``, one ``longtable`` per phase × workload × context.

A ``longtable`` breaks across pages (it is no float, so no "Float too large"), repeats its header
on each page, and keeps every row. Values have the headers a reader expects (output tok/s,
speedup with its 95 % interval, the requests behind it, TTFT p50 in ms, acceptance length);
configs are in plan order (a series as the params file lists it, its budgets ascending). A
failed or skipped cell is a row marked ``verdict: first reason`` with ``--`` for its values; the
verdict column is there only when some row is not ok.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from ..model.quantities import OUTPUT_RATE, QUANTITIES
from ..runs.manifest import Manifest

# the values of a row, each with its header lines and how a number is written
_VALUES: list[tuple[str, tuple[str, ...]]] = [
    ("output_tok_s", ("output", "tok/s")), ("speedup", ("speedup", "{[}95\\,\\% CI{]}")),
    ("requests_n", ("n",)), ("ttft_p50_ms", ("TTFT p50", "(ms)")),
    ("acceptance_length", ("accept.", "length"))]
_AXES: list[tuple[str, tuple[str, ...]]] = [("concurrency", ("concur-", "rency")),
                                             ("output_tokens", ("output", "tokens")),
                                             ("load", ("load",))]
_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
            "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
            "^": r"\textasciicircum{}"}
PREAMBLE = ("% specbench results: one longtable per phase x workload x context, written by\n"
            "% specbench report. \\input{results} it in a one-column document that loads\n"
            "% \\usepackage{booktabs,longtable}; the tables break across pages.\n")


class Compared(Protocol):
    """What the writer reads from a :class:`~specbench_lib.report.export.Comparison`."""

    runs: list[Any]

    def table(self) -> Any: ...

    def failed_cells(self) -> list[dict[str, Any]]: ...

    def best_budgets(self) -> Any: ...


def text(value: object) -> str:
    """``value`` as LaTeX text: every character LaTeX would read as a command escaped."""
    return "".join(_SPECIAL.get(ch, ch) for ch in str(value))


def label(value: str) -> str:
    """``value`` as a ``\\label`` key: letters, digits, ``-`` and ``.`` (``%`` would end the line)."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", value)


def write_latex(comparison: Compared, path: Path) -> Path:
    """Write ``results.tex``: a ``longtable`` per phase × workload × context of ``comparison``."""
    rows = table_rows(comparison)
    parts = []
    claims = claim_lines(comparison)
    if len(rows):
        for (phase, workload, context), panel in rows.groupby(["phase", "workload", "context"],
                                                              sort=True):
            parts.append(longtable(str(phase), str(workload), int(context), panel,
                                   claims.get((str(phase), str(workload), int(context)), [])))
    path.write_text(PREAMBLE + "\n".join(parts))
    return path


def table_rows(comparison: Compared) -> Any:
    """Every row of the paper: the ok rows of ``comparison`` and its failed cells (their
    ``verdict`` "crashed: first reason", values NaN), each with its plan rank."""
    import pandas as pd

    keys = ["phase", "workload", "context", "concurrency", "output_tokens", "load", "config",
            "series", "budget"]
    ok = comparison.table().assign(verdict="ok")
    ttft = ok["ttft_p50_s"] if "ttft_p50_s" in ok else pd.Series(float("nan"), index=ok.index)
    ok["ttft_p50_ms"] = pd.to_numeric(ttft, errors="coerce") * 1000.0
    failed = pd.DataFrame(
        [{**{k: f.get(k) for k in keys},
          "verdict": f"{f['verdict']}: {f['first_reason']}" if f["first_reason"] else f["verdict"]}
         for f in comparison.failed_cells()], columns=[*keys, "verdict"])
    columns = [*keys, *(v for v, _ in _VALUES), "speedup_lo", "speedup_hi", "verdict"]
    rows = pd.concat([ok.reindex(columns=columns), failed.reindex(columns=columns)],
                     ignore_index=True)
    rows = rows[rows["phase"].notna()].copy()
    rows["phase"] = rows["phase"].astype(str)
    rows["load"] = rows["load"].fillna("").astype(str)
    for name in ["budget", "output_tokens", "requests_n", *(v for v, _ in _VALUES)]:
        rows[name] = pd.to_numeric(rows[name], errors="coerce")
    rows["output_tokens"] = rows["output_tokens"].where(rows["output_tokens"] > 0)  # 0: unknown
    ranks = plan_ranks(comparison.runs)
    rows["rank"] = [ranks.get((p, s), len(ranks))
                    for p, s in zip(rows["phase"], rows["series"], strict=True)]
    rows["budget_key"] = rows["budget"].fillna(-1)
    return rows.sort_values(["phase", "workload", "context", "concurrency", "output_tokens",
                             "load", "rank", "budget_key", "config", "verdict"],
                            na_position="first").drop_duplicates(subset=[*keys, "verdict"])


def plan_ranks(runs: Iterable[Any]) -> dict[tuple[str, str], int]:
    """(phase, series) → its place in the run's params ``configs`` (plan order)."""
    ranks: dict[tuple[str, str], int] = {}
    for run in runs:
        manifest = Manifest.from_dict(getattr(run, "manifest", None) or {})
        configs = manifest.params.get("configs") or []
        for index, config in enumerate(configs if isinstance(configs, list) else []):
            if isinstance(config, dict):  # a damaged manifest's entry is no config
                ranks.setdefault((str(manifest.phase), str(config.get("name"))), index)
    return ranks


def claim_lines(comparison: Compared) -> dict[tuple[str, str, int], list[str]]:
    """Per phase × workload × context, each panel's claim in words (:mod:`~specbench_lib.analysis.claim`, as
    the summary and the answer state it), for the note after the table."""
    from ..analysis.best import time_words, verdict_words

    found: dict[tuple[str, str, int], list[str]] = {}
    for row in comparison.best_budgets().to_dict("records"):
        if row.get("decision") not in ("decided", "tie", "undecided") or row.get("alpha") is None:
            continue
        where = f"concurrency {int(row['concurrency'])}" + (f", {row['load']}" if row["load"]
                                                           else "")
        on = QUANTITIES.get(str(row.get("quantity")))
        where += f" (on the {on.short})" if on is not None and on is not OUTPUT_RATE else ""
        found.setdefault((str(row["phase"]), str(row["workload"]), int(row["context"])),
                         []).append(f"{where}: {verdict_words(row, float(row['equivalence']))}"
                                    f"{time_words(row)}")
    return found


FOLLOWS = "; each panel's claim follows the table"


def longtable(phase: str, workload: str, context: int, rows: Any,
              claims: Iterable[str] = ()) -> str:
    """One panel's ``longtable``: a column per axis the panel varies, the config, its values,
    and a verdict column only when a row is not ok; its caption says what the interval is over,
    and a note after it each panel's claim (``claims``)."""
    axes = [(name, head) for name, head in _AXES
            if name == "concurrency" or rows[name].replace("", None).dropna().nunique() > 1
            or (name == "load" and (rows[name] != "").any())]
    with_verdict = bool((rows["verdict"] != "ok").any())
    heads = [*(h for _, h in axes), ("config",), *(h for _, h in _VALUES),
             *([("verdict",)] if with_verdict else [])]
    spec = "r" * len(axes) + "l" + "r" * len(_VALUES) + ("l" if with_verdict else "")
    header = " & ".join(_head(h) for h in heads) + " \\\\"
    tag = f"tab:specbench-{label(phase)}-{label(workload)}-{context}"
    width = len(heads)
    failed = "; a failed cell shows its verdict and first reason, -- for its values" \
        if with_verdict else ""
    lines = ["\\begingroup\\footnotesize\\setlength{\\tabcolsep}{3pt}",
             f"\\begin{{longtable}}{{@{{}}{spec}@{{}}}}",
             f"\\caption{{{text(phase)}, {text(workload)}, context {context}: output tokens/s, "
             f"speedup vs autoregressive (the geometric mean over prompts of the per-prompt "
             f"speedup, every config sent the same prompts) with its 95\\,\\% interval (paired t "
             f"over the blocks' means: each repeat or round a block measuring every config in an "
             f"order of its own, or over the prompts with one block; simultaneous over the "
             f"panel's configs, at the level of the claim's test, so a config shown slower than "
             f"another has its interval against it excluding 1; n: the "
             f"requests behind a row, over all its repeats or rounds), TTFT p50, "
             f"mean acceptance length (tokens per verify step){failed}"
             f"{FOLLOWS if claims else ''}.}}"
             f"\\label{{{tag}}}\\\\",
             "\\toprule", header, "\\midrule", "\\endfirsthead",
             f"\\multicolumn{{{width}}}{{@{{}}l}}{{{text(phase)}, "
             f"{text(workload)}, context {context} (continued)}}\\\\",
             "\\toprule", header, "\\midrule", "\\endhead",
             "\\midrule", f"\\multicolumn{{{width}}}{{r@{{}}}}{{continued on the "
             f"next page}}\\\\", "\\endfoot", "\\bottomrule", "\\endlastfoot"]
    previous = None
    for row in rows.to_dict("records"):
        if previous is not None and row["concurrency"] != previous:
            lines.append("\\addlinespace")
        previous = row["concurrency"]
        cells = [*(_axis(name, row[name]) for name, _ in axes), text(row["config"]),
                 *_values(row), *([text(row["verdict"])] if with_verdict else [])]
        lines.append(" & ".join(cells) + " \\\\")
    # the claims after the table, not in its caption: a caption is set in one box first, and
    # a dozen panels' claims are wider than TeX's largest dimension ("Dimension too large")
    note = ([f"\\noindent Claims of table~\\ref{{{tag}}}: {text('. '.join(claims))}.\\par"]
            if claims else [])
    lines += ["\\end{longtable}", *note, "\\endgroup", ""]
    return "\n".join(lines)


def _head(lines: tuple[str, ...]) -> str:
    if len(lines) == 1:
        return lines[0]
    return "\\begin{tabular}[b]{@{}c@{}}" + "\\\\".join(lines) + "\\end{tabular}"


def _axis(name: str, value: Any) -> str:
    if name == "load":
        return text(value) if value else "--"
    return "--" if _missing(value) else str(int(value))


def _values(row: dict[str, Any]) -> list[str]:
    """A row's values as printed: ``--`` for a value not measured (a failed cell, or one with
    no such number)."""
    def number(value: Any, form: str) -> str:
        return "--" if _missing(value) else form.format(value)

    speedup = number(row["speedup"], "{:.2f}")
    if speedup != "--" and not (_missing(row["speedup_lo"]) or _missing(row["speedup_hi"])):
        speedup += f" [{row['speedup_lo']:.2f}, {row['speedup_hi']:.2f}]"
    return [number(row["output_tok_s"], "{:.1f}"), speedup, number(row["requests_n"], "{:.0f}"),
            number(row["ttft_p50_ms"], "{:.1f}"), number(row["acceptance_length"], "{:.2f}")]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
