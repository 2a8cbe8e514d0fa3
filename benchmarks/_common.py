"""Helpers shared by the benchmarks: statistics, load notes, JSON results, aligned tables."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))


def mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def quantile(values: list[float], q: float) -> float | None:
    """Linear-interpolated quantile, the definition specbench_lib.analysis.latency uses."""
    from specbench_lib.analysis.latency import quantile as _quantile

    return _quantile(values, q)


def err_pct(measured: float | None, truth: float | None) -> float | None:
    if measured is None or truth is None or truth == 0:
        return None
    return 100.0 * (measured / truth - 1.0)


def spread(values: list[float]) -> dict[str, float | None]:
    """Median, min and max of repeated measurements."""
    return {
        "median": statistics.median(values) if values else None,
        "min": min(values) if values else None,
        "max": max(values) if values else None,
    }


def load_note() -> dict[str, Any]:
    """The machine's load when a benchmark ran (other agents share these 2 cores)."""
    one, five, fifteen = os.getloadavg()
    return {
        "loadavg": [round(one, 2), round(five, 2), round(fifteen, 2)],
        "cpus": os.cpu_count(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def write_results(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, default=str))
    print(f"→ {path.relative_to(ROOT)}")
    return path


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(rows: list[dict[str, Any]], columns: list[tuple[str, str, int]]) -> str:
    """Rows as aligned text; ``columns`` are (key, header, digits)."""
    cells = [[h for _, h, _ in columns]] + [[fmt(r.get(k), d) for k, _, d in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells)
