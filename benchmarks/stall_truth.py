"""The stall rule against the truth: which requests were really late, and why.

    .venv/bin/python benchmarks/stall_truth.py [--repeats 3] [--tokens 128] [--hog N] [--quick]

specbench's dispatcher (a fresh client per cell, as the sweep runs it) against the reference
SGLang server (benchmarks/sglang_refserver.py, its own process), whose send log says when it
wrote each chunk of each request (CLOCK_MONOTONIC, the clock behind ``perf_counter``: client and
server times compare directly). Modes, 4 tokens a chunk: ``instant`` (every chunk written at
once), ``paced`` (a chunk every 20 ms) and ``together`` (paced, but the first two chunks written
back to back: a first read with two events that no client stall made late); concurrency 1, 2,
4, 8, 16, 32, 64; ``--repeats`` cells each.

For every request the truth: its first token's stamp against the true send of the first chunk
(lateness), truly late when later by more than 10 % of its true TTFT and more than ``--floor``
(1 ms, as the TTFT goal of timing_fidelity.py); the cause, from the log, of a late one:
``client`` (its first read held events the server sent apart: the client read late) or
``delivery`` (one event, stamped late by the kernel). What the rule ``coalesced_reads`` flags
(the requests whose first token it counts late, and the cells it makes invalid) is compared
with it: per concurrency, precision and recall over requests, and the cells it invalidates
against the cells the truly late trip it on (and those whose TTFT p99 error is > 10 % and > ``--floor``). The
rule as it stood before issue 24 (``_before``, frozen here) and the library's are judged on the
same cells. Results: benchmarks/results/stall_truth.json.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import urllib.request
from pathlib import Path
from typing import Any

from _common import load_note, quantile, table, write_results
from sglang_refserver import RefServerProcess, check_shared_clock
from timing_fidelity import _hogs

from specbench_lib.analysis.coalescing import coalesced, late_firsts
from specbench_lib.analysis.latency import deliveries
from specbench_lib.client.dispatch import dispatch_cell
from specbench_lib.model.catalogue import DEFAULT_MAX_COALESCED_FIRST_FRACTION, DEFAULT_MAX_COALESCED_FRACTION
from specbench_lib.model.records import RequestRecord
from specbench_lib.servers.engines.sglang import SGLangAdapter

CONCURRENCY = (1, 2, 4, 8, 16, 32, 64)
MODES = {"instant": (0.0, 1), "paced": (0.005, 1), "together": (0.005, 2)}  # interval, together
CHUNK = 4
LATE_FRACTION = 0.10  # the rule's own bound (coalescing.COALESCED_ERROR)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def _shape(times: list[float]) -> tuple[float, int]:
    """The old rule's median gap between deliveries and median tokens per delivery."""
    found = deliveries(times) or [(0.0, 1)]
    gaps = sorted(b - a for (a, _), (b, _) in zip(found, found[1:], strict=False))
    sizes = sorted(k for _, k in found)
    return (gaps[len(gaps) // 2] if gaps else 0.0), sizes[len(sizes) // 2]


def _before(rec: RequestRecord) -> tuple[int, bool]:
    """The rule as it stood before issue 24: a read inside a stall is late by the time from the
    stall's start to the read (the read's time, not its stamp)."""
    stalls = sorted(rec.stalls or [])
    lost, first_lost = 0, False
    for read_at, tokens, first in rec.multi_reads or []:
        i = bisect.bisect_left(stalls, (read_at, float("inf"))) - 1
        if not (i >= 0 and stalls[i][0] < read_at <= stalls[i][1]):
            continue
        wait = read_at - stalls[i][0]
        gap, size = _shape(rec.token_times)
        if tokens and wait > 0.1 * gap:
            hidden = max(1, int(wait / gap + 1e-9)) if gap > 0 else tokens
            lost += min(tokens, hidden * size)
        if first and rec.ttft is not None and wait > 0.1 * rec.ttft:
            first_lost = True
    return min(lost, len(rec.token_times)), first_lost


def request_truth(rec: RequestRecord, entry: dict[str, Any], origin: float, floor: float,
                  decided: dict[int, str]) -> dict[str, Any]:
    """One request's truth from the send log, and what each rule decided (``decided``: the
    library's first tokens late, by index, from :func:`~specbench_lib.analysis.coalescing.late_firsts`)."""
    sizes, handed = entry["sizes"], entry["handed"]
    sends = [max(a, b) for a, b in zip(entry["sends"], handed, strict=True)]  # kernel took it
    stamp = origin + rec.token_times[0]
    stamps = [rec.token_times[sum(sizes[:c])] for c in range(len(sizes))]  # each chunk's stamp
    together = sum(1 for t in stamps if t == rec.token_times[0])  # events in the first read
    ttft_true = sends[0] - entry["recv"]
    late_by = stamp - sends[0]
    late = late_by > max(LATE_FRACTION * ttft_true, floor)
    spread = sends[together - 1] - sends[0]
    cause = None if not late else ("client" if together > 1 and spread > floor else "delivery")
    gaps = sorted(b - a for a, b in zip(sends, sends[1:], strict=False)) or [0.0]
    gap = gaps[len(gaps) // 2]
    late_tokens = sum(k for c, k in enumerate(sizes)
                      if origin + stamps[c] - sends[c] > max(LATE_FRACTION * gap, floor))
    old, new = _before(rec), coalesced(rec)
    return {"index": rec.index, "ttft_true": ttft_true, "ttft": rec.ttft,
            "request_lag": entry["recv"] - (origin + rec.start), "late_by": late_by,
            "server_queued": handed[0] - entry["sends"][0],
            "first_read_events": together, "first_read_spread": spread, "late": late,
            "cause": cause, "tokens": len(rec.token_times), "late_tokens": late_tokens,
            "flag_before": old[1], "flag_after": decided.get(rec.index), "tokens_before": old[0],
            "tokens_after": new[0], "record": rec.to_dict(), "entry": entry}


def _invalid(reqs: list[dict[str, Any]], side: str) -> bool:
    """Whether the rule's thresholds trip on a side's counts (``truth``: the truly late)."""
    if side == "truth":
        tokens, first = sum(r["tokens"] for r in reqs), sum(r["late"] for r in reqs)
        return (sum(r["late_tokens"] for r in reqs) > DEFAULT_MAX_COALESCED_FRACTION * tokens
                or first > DEFAULT_MAX_COALESCED_FIRST_FRACTION * len(reqs))
    tokens = sum(r["tokens"] for r in reqs)
    lost = sum(r[f"tokens_{side}"] for r in reqs)
    first = sum(bool(r[f"flag_{side}"]) for r in reqs)
    return (lost > DEFAULT_MAX_COALESCED_FRACTION * tokens
            or first > DEFAULT_MAX_COALESCED_FIRST_FRACTION * len(reqs))


def cell_truth(recs: list[RequestRecord], log: dict[str, Any], origin: float,
               floor: float) -> dict[str, Any]:
    """A cell's requests against the log (``origin``: the cell's time 0 on the shared clock)."""
    late = late_firsts(recs)
    reqs = [request_truth(r, log[str(r.index)], origin, floor, late) for r in recs]
    true99 = quantile([r["ttft_true"] for r in reqs], 0.99) or 0.0
    meas99 = quantile([r["ttft"] for r in reqs], 0.99) or 0.0
    err = meas99 - true99
    return {"n": len(reqs), "origin": origin, "requests": reqs,
            "ttft_p99_true": true99, "ttft_p99": meas99, "ttft_p99_err_s": err,
            "ttft_p99_err_pct": 100 * err / true99 if true99 else None,
            "large_error": err > LATE_FRACTION * true99 and err > floor,
            "truly_invalid": _invalid(reqs, "truth"),
            "invalid_before": _invalid(reqs, "before"), "invalid_after": _invalid(reqs, "after")}


def run(modes: list[str], levels: list[int], tokens: int, repeats: int, rounds: int,
        floor: float, server_cpus: set[int] | None) -> list[dict[str, Any]]:
    cells = []
    for mode in modes:
        interval, together = MODES[mode]
        with RefServerProcess(interval=interval, tokens_per_chunk=CHUNK,
                              together=together) as server:
            if server_cpus is not None:
                os.sched_setaffinity(server.pid, server_cpus)
            for conc in levels:
                for rep in range(repeats):
                    _get(f"{server.url}/log")
                    prompts = [[i, 7, 7, 7] for i in range(max(8, rounds * conc))]
                    result = dispatch_cell(SGLangAdapter(), server.url, prompts, warmup=0,
                                           concurrency=conc, max_tokens=tokens, timeout_s=60)
                    recs = [r for r in result.measured if r.error_kind is None and r.token_times]
                    cell = cell_truth(recs, _get(f"{server.url}/log"), result.origin, floor)
                    cells.append({"mode": mode, "concurrency": conc, "repeat": rep + 1,
                                  "load": load_note()["loadavg"],
                                  "failed": len(result.measured) - len(recs),
                                  "stalls": [list(s) for s in result.stalls], **cell})
        print(f"{mode} done, load {load_note()['loadavg']}", flush=True)
    return cells


def rejudge(cells: list[dict[str, Any]], floor: float) -> list[dict[str, Any]]:
    """Stored cells judged again (the library's rule as it is now, the truth at ``floor``)."""
    out = []
    for cell in cells:
        recs = [RequestRecord.from_dict(r["record"]) for r in cell["requests"]]
        log = {str(r["index"]): r["entry"] for r in cell["requests"]}
        out.append({**cell, **cell_truth(recs, log, cell["origin"], floor)})
    return out


def _pr(flagged: int, hits: int, late: int) -> tuple[float | None, float | None]:
    return (hits / flagged if flagged else None), (hits / late if late else None)


def summary(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per mode and concurrency: requests flagged vs truly late, cells invalid vs large error."""
    rows = []
    for key in sorted({(c["mode"], c["concurrency"]) for c in cells},
                      key=lambda k: (list(MODES).index(k[0]), k[1])):
        group = [c for c in cells if (c["mode"], c["concurrency"]) == key]
        reqs = [r for c in group for r in c["requests"]]
        late = sum(r["late"] for r in reqs)
        row: dict[str, Any] = {"mode": key[0], "c": key[1], "cells": len(group),
                               "requests": len(reqs), "late": late,
                               "client": sum(r["cause"] == "client" for r in reqs),
                               "large": sum(c["large_error"] for c in group),
                               "spoiled": sum(c["truly_invalid"] for c in group),
                               "tok_late": sum(r["late_tokens"] for r in reqs),
                               "tok_before": sum(r["tokens_before"] for r in reqs),
                               "tok_after": sum(r["tokens_after"] for r in reqs),
                               "stalls": sum(len(c["stalls"]) for c in group),
                               "err99": max(c["ttft_p99_err_pct"] or 0 for c in group)}
        for side in ("before", "after"):
            flagged = sum(bool(r[f"flag_{side}"]) for r in reqs)
            hits = sum(bool(r[f"flag_{side}"]) and r["late"] for r in reqs)
            row[f"flag_{side}"] = flagged
            row[f"prec_{side}"], row[f"rec_{side}"] = _pr(flagged, hits, late)
            row[f"inv_{side}"] = sum(c[f"invalid_{side}"] for c in group)
            row[f"inv_{side}_ok"] = sum(c[f"invalid_{side}"] == c["truly_invalid"] for c in group)
        rows.append(row)
    return rows


COLUMNS = [
    ("mode", "mode", 0), ("c", "C", 0), ("cells", "cells", 0), ("requests", "reqs", 0),
    ("stalls", "stalls", 0), ("late", "late", 0), ("client", "by client", 0),
    ("flag_before", "flag before", 0), ("prec_before", "prec", 2), ("rec_before", "rec", 2),
    ("flag_after", "flag after", 0), ("prec_after", "prec", 2), ("rec_after", "rec", 2),
    ("tok_late", "tokens late", 0), ("tok_before", "counted before", 0),
    ("tok_after", "after", 0), ("large", "p99 err large", 0), ("err99", "max p99 err%", 1),
    ("spoiled", "truly invalid", 0), ("inv_before", "invalid before", 0), ("inv_before_ok", "agree", 0),
    ("inv_after", "invalid after", 0), ("inv_after_ok", "agree", 0),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2, help="requests = rounds x C (>= 8)")
    parser.add_argument("--floor", type=float, default=0.001,
                        help="seconds of lateness below which a stamp is not late")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--concurrency", type=int, nargs="+", default=list(CONCURRENCY))
    parser.add_argument("--hog", type=int, default=0,
                        help="busy-loop processes pinned to the client's CPU")
    parser.add_argument("--quick", action="store_true", help="one repeat")
    parser.add_argument("--name", default="stall_truth")
    parser.add_argument("--rejudge", metavar="JSON",
                        help="judge the cells of an earlier run's results again, measuring none")
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    print(f"shared clock offset {check_shared_clock() * 1e6:.2f} µs; load {load_note()}")
    if args.rejudge:
        earlier = json.loads(Path(args.rejudge).read_text())
        cells = rejudge(earlier["cells"], args.floor)
        repeats, args.hog, args.tokens = earlier["repeats"], earlier["hogs"], earlier["tokens"]
    elif args.hog:
        with _hogs(args.hog) as cpus:
            cells = run(args.modes, args.concurrency, args.tokens, repeats, args.rounds,
                        args.floor, cpus)
    else:
        cells = run(args.modes, args.concurrency, args.tokens, repeats, args.rounds,
                    args.floor, None)
    rows = summary(cells)
    print(f"late: first token stamped > 10 % of its true TTFT and > {args.floor * 1e3:g} ms "
          f"after its true send; by client: its first read held events sent apart; "
          f"tokens late: stamped > 10 % of the true chunk gap and > {args.floor * 1e3:g} ms after "
          f"their chunk's send; p99 err large: TTFT p99 error > 10 % and > "
          f"{args.floor * 1e3:g} ms; truly invalid: the rule's thresholds (5 % of the tokens, "
          f"1 % of the first tokens) tripped by the truly late; agree: cells whose verdict "
          f"matches that; hogs {args.hog}")
    print(table(rows, COLUMNS))
    write_results(args.name, {"load": load_note(), "tokens": args.tokens, "repeats": repeats,
                              "floor_s": args.floor, "hogs": args.hog, "table": rows,
                              "cells": cells})


if __name__ == "__main__":
    main()
