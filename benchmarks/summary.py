"""Figures vs goals from the benchmarks' JSON results (benchmarks/results/*.json).

.venv/bin/python benchmarks/summary.py
"""

from __future__ import annotations

import json
from typing import Any

from _common import RESULTS, table


def _load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _verdict(ok: bool | None) -> str:
    return "—" if ok is None else ("met" if ok else "NOT met")


def rows() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    tf = _load("timing_fidelity")
    if tf:
        pts = tf["points"]

        def worst(key: str, level: int) -> float:
            return max(
                max(abs(p["error_pct"][key]["min"]), abs(p["error_pct"][key]["max"]))
                for p in pts
                if p["concurrency"] <= level
            )

        for level in (8, 32, 64):
            itl = max(worst("itl_mean", level), worst("tpot_mean", level))
            out.append(
                {
                    "benchmark": "timing",
                    "figure": f"ITL/TPOT mean |error| %, worst point, c <= {level}",
                    "value": f"{itl:.3f}",
                    "goal": "<= 0.1",
                    "status": _verdict(itl <= 0.1),
                }
            )
        ttft = [p for p in pts if p["concurrency"] <= 32]
        good = sum(p["goal_ttft"] for p in ttft)
        out.append(
            {
                "benchmark": "timing",
                "figure": "TTFT p99 within 10 % or 1 ms (points, c <= 32, all repeats)",
                "value": f"{good}/{len(ttft)}",
                "goal": "all",
                "status": _verdict(good == len(ttft)),
            }
        )
    co = _load("client_overhead")
    if co:
        ratios = [r["ratio"] for r in co["rows"] if r["conc"] >= 8]
        at32 = next((r for r in co["rows"] if r["conc"] == 32), None)
        out.append(
            {
                "benchmark": "client",
                "figure": "request rate vs aiohttp client, c 8-64 (min of medians)",
                "value": f"{min(ratios):.2f}x",
                "goal": ">= 2x",
                "status": _verdict(min(ratios) >= 2),
            }
        )
        if at32 is not None:
            out.append(
                {
                    "benchmark": "client",
                    "figure": "client CPU per request at c=32 (sampler, stall watch, QUICKACK on), ms",
                    "value": f"{at32['cpu_ms']:.3f} ({at32['cpu_us_tok']:.0f} µs/token)",
                    "goal": "<= 0.1",
                    "status": _verdict(at32["cpu_ms"] <= 0.1),
                }
            )
        worst = max(co["rows"], key=lambda r: r["cpu_ms"])
        out.append(
            {
                "benchmark": "client",
                "figure": f"client CPU per request, worst concurrency (c={worst['conc']}), ms",
                "value": f"{worst['cpu_ms']:.3f}",
                "goal": "(report)",
                "status": "—",
            }
        )
        if co.get("sampler"):
            share = co["sampler"]["cores"]
            out.append(
                {
                    "benchmark": "client",
                    "figure": f"host sampler alone at {co['sampler']['interval_s']} s, % of a core",
                    "value": f"{100 * share:.2f}",
                    "goal": "< 1",
                    "status": _verdict(share < 0.01),
                }
            )
        flagged = [r for r in co["open_loop"] if r["achieved"] is not None]
        silent = [r for r in flagged if r["achieved"] < 0.95 * r["scheduled"] and not r["flag"]]
        out.append(
            {
                "benchmark": "client",
                "figure": "open-loop rates not reached and not flagged",
                "value": str(len(silent)),
                "goal": "0",
                "status": _verdict(not silent),
            }
        )
    so = _load("sweep_overhead")
    if so:
        split = so["split"]
        out.append(
            {
                "benchmark": "sweep",
                "figure": "wall / (start-up + measurement windows)",
                "value": f"{split['overhead']:.3f}",
                "goal": "<= 1.05",
                "status": _verdict(split["overhead"] <= 1.05),
            }
        )
        if so.get("papermill"):
            added = so["papermill"]["added_s"]["median"]
            out.append(
                {
                    "benchmark": "sweep",
                    "figure": "papermill added per notebook run, s",
                    "value": f"{added:.2f}",
                    "goal": "(report)",
                    "status": "—",
                }
            )
    rs = _load("results_scale")
    if rs:
        peak = rs["steps"][-1]["maxrss_mb"]
        out.append(
            {
                "benchmark": "results",
                "figure": f"{rs['cells']} cells: load + table + files + plots, s",
                "value": f"{rs['total_s']:.1f}",
                "goal": "< minutes",
                "status": _verdict(rs["total_s"] < 120),
            }
        )
        out.append(
            {
                "benchmark": "results",
                "figure": "peak RSS, MB",
                "value": f"{peak:.0f}",
                "goal": "(report)",
                "status": "—",
            }
        )
    return out


def main() -> None:
    found = rows()
    if not found:
        print("no results yet: run the benchmarks (make bench)")
        return
    print(
        table(
            found,
            [
                ("benchmark", "benchmark", 0),
                ("figure", "figure", 0),
                ("value", "value", 0),
                ("goal", "goal", 0),
                ("status", "status", 0),
            ],
        )
    )


if __name__ == "__main__":
    main()
