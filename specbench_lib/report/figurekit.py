"""What every figure shares: its title (phase, model, engine build, run), one legend under the
panels, the latency tails (a p99 only with 100 requests behind it, else the maximum of n), the
``auto`` reference band, and failure marks that sit on the axis edge, never at a value."""

from __future__ import annotations

from typing import Any

from ..runs.manifest import Manifest
from ..runs.results import RunResult

TAIL = "p99 (max of n if n < 100)"  # a p99 needs 100 requests behind it (see .latency)
FAILED = "red"


MARKERS = "osD^v<>p*hXP"


def palette(n: int) -> list[Any]:
    """``n`` colours no two alike, for any ``n``: matplotlib's tab10 up to 10, tab20 up to 20
    (its pairs' light shade second), beyond that evenly spaced hues of ``turbo``."""
    import matplotlib

    if n <= 10:
        return [matplotlib.colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        tab = matplotlib.colormaps["tab20"]
        return [tab(2 * i if i < 10 else 2 * (i - 10) + 1) for i in range(n)]
    turbo = matplotlib.colormaps["turbo"]
    return [turbo(0.05 + 0.9 * i / (n - 1)) for i in range(n)]


def marker(i: int) -> str:
    """The ``i``-th series' marker: distinct for the first :data:`MARKERS`, and with
    :func:`palette`'s colour a distinct pair for any number of series."""
    return MARKERS[i % len(MARKERS)]


def turn_label(workload: str, rows: Any) -> str:
    """A workload's label in a figure: its name, with "turn 2" where its rows are a
    conversation's second turn (so turn 2 never reads as turn 1)."""
    turns = {int(t) for t in rows.get("turn", []) if t == t}
    return workload + "".join(f" (turn {t})" for t in sorted(turns) if t != 1)


def with_tails(table: Any) -> Any:
    """``table`` with ``ttft_tail_s`` and ``itl_tail_s``: the p99 where it is given, else the
    maximum of the row's requests (``*_max_s``)."""
    return table.assign(**{f"{m}_tail_s": table[f"{m}_p99_s"].fillna(table[f"{m}_max_s"])
                           for m in ("ttft", "itl")})


def title(result: RunResult, what: str) -> str:
    manifest = Manifest.from_dict(result.manifest)
    model = manifest.model.get("path", "?").rstrip("/").rsplit("/", 1)[-1]
    engine = manifest.engine
    name = "" if engine.get("package") else f"{engine.get('kind', '?')} "  # a package names it
    return (f"{what} · {manifest.phase or '?'} · {model} · {name}"
            f"{engine.get('version', '')}\nrun {result.run_id}")


def legend(fig: Any, axes: Any) -> float:
    """The figure's legend below its axes; returns the fraction of the figure's height it
    takes, which the caller keeps free (``tight_layout(rect=(0, that, 1, 1))``), so the legend
    never covers an axis or its label, however many rows it has."""
    import math

    seen: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    if not seen:
        return 0.02
    ncol = min(4, len(seen))
    fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=ncol,
               fontsize=8, frameon=False)
    rows = math.ceil(len(seen) / ncol)
    height_pt = fig.get_figheight() * 72
    return min(0.6, (rows * 8 * 1.45 + 12) / height_pt)


def auto_band(ax: Any, rows: Any, column: str, colour: str, label: str,
              scale: float = 1.0) -> None:
    """``auto``'s value of ``column`` as a dashed line across the panel, with its 95 % interval
    (``<column>_lo``/``_hi``, where the table has them) as a band: the reference every
    speculative point is read against."""
    for _, row in rows.iterrows():
        value = row.get(column)
        if value is None or value != value:
            continue
        ax.axhline(float(value) * scale, color=colour, linestyle="--", linewidth=1, label=label)
        low, high = row.get(f"{column}_lo"), row.get(f"{column}_hi")
        if low is not None and high is not None and low == low and high == high:
            ax.axhspan(float(low) * scale, float(high) * scale, color=colour, alpha=0.12,
                       linewidth=0, label=f"{label} 95 % interval")


def mark_failure(ax: Any, x: float | None, text: str, slot: int) -> None:
    """A cell that is not ok: a red × on the bottom edge at ``x`` (in data units) and its
    ``text`` above it, ``slot`` lines up so marks never overprint; with no ``x`` (a load curve,
    whose both axes are measured values), "× text" listed in the panel's top left corner.
    Nothing is ever drawn at a value."""
    if x is None:  # no x to stand at (a load curve's axes are both measured): a listed mark
        ax.annotate(f"× {text}", (0.02, 0.95 - 0.07 * slot), xycoords="axes fraction",
                    color=FAILED, fontsize=7, va="top")
        return
    ax.plot(x, 0.0, marker="x", color=FAILED, markersize=9, clip_on=False,
            transform=ax.get_xaxis_transform())
    ax.annotate(text, (x, 0.04 + 0.07 * slot), xycoords=("data", "axes fraction"), color=FAILED,
                fontsize=7, ha="center")


def requests_note(rows: Any) -> str:
    """``n = 3`` (or ``n = 3–9``): the measured requests behind each point of a panel (every
    repeat's or round's, ``requests_n``; a cell's own ``n_requests`` where a table has no
    ``requests_n``)."""
    column = "requests_n" if "requests_n" in getattr(rows, "columns", ()) else "n_requests"
    counts = sorted({int(n) for n in rows.get(column, []) if n == n})
    if not counts:
        return ""
    return f"n = {counts[0]}" if len(counts) == 1 else f"n = {counts[0]}–{counts[-1]}"


__all__ = ["MARKERS", "TAIL", "auto_band", "legend", "marker", "mark_failure", "palette",
           "requests_note", "title", "turn_label", "with_tails"]
