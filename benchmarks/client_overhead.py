"""Client overhead: specbench's dispatcher vs a serving-benchmark-style aiohttp client.

    .venv/bin/python benchmarks/client_overhead.py [--requests 1500] [--repeats 3] [--quick]

Both clients run (one after the other, in this process) against the same reference SGLang
server (benchmarks/sglang_refserver.py, its own process) answering instantly with 4 tokens, one
per chunk. specbench runs as a sweep runs it: a host sampler (``hostload.HostSampler``, 0.5 s)
around each ``dispatch_cell``, whose stall watch ticks and whose wire sets ``TCP_QUICKACK``.
Per concurrency (1, 8, 32, 64): the highest request rate each sustains (closed loop: requests /
measurement window), the client's CPU time per request and per token (``time.process_time``
over the cell, its set-up and the sampler included; the server's figures are read, and the
other client's garbage collected, outside it), the server's CPU share (to show whether the
server is the bottleneck), and the ratio specbench / aiohttp. The aiohttp client is written
like SGLang's and vLLM's serving benchmarks: a new ``ClientSession`` (so a new connection) per
request, the SSE stream parsed line by line with ``json.loads``. Then open loop
(``request_rate``): target vs achieved send rate and the ``rate_not_reached`` flag per cell.
Last, the host sampler alone: its CPU over 10 s at its default interval, as a share of a core.
Goals: >= 2x the aiohttp rate at concurrency 8-64; <= 0.1 ms client CPU per request at
concurrency 32; the host sampler under 1 % of a core.
Needs the ``bench`` extra (aiohttp). Results: benchmarks/results/client_overhead.json.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import time
import urllib.request
from typing import Any

from _common import load_note, spread, table, write_results
from sglang_refserver import RefServerProcess

from specbench_lib.analysis.metrics import cell_metrics
from specbench_lib.client.dispatch import dispatch_cell
from specbench_lib.host.load import HostSampler
from specbench_lib.model.sections import RequestRateParams
from specbench_lib.servers.engines.sglang import SGLangAdapter

TOKENS = 4
CONCURRENCY = (1, 8, 32, 64)
CPU_GOAL_MS = 0.1  # client CPU per request at concurrency 32 (issue 24)
SAMPLER_GOAL = 0.01  # the host sampler's CPU, in cores, at its default interval


def _server_cpu(url: str) -> float:
    with urllib.request.urlopen(f"{url}/stats", timeout=30) as resp:
        return float(json.loads(resp.read())["cpu_s"])


def run_specbench(url: str, n: int, concurrency: int, server_pid: int) -> dict[str, Any]:
    prompts = [[i, 7, 7, 7] for i in range(n)]
    gc.collect()  # the other client's garbage is not this one's cost
    srv0 = _server_cpu(url)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with HostSampler(server=(server_pid,)) as host:  # as serversweep measures a cell
        result = dispatch_cell(
            SGLangAdapter(), url, prompts, warmup=0, concurrency=concurrency, max_tokens=TOKENS, timeout_s=30
        )
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    assert host.load is not None
    m = cell_metrics(result)
    ok = sum(1 for r in result.records if r.error is None and len(r.token_times) == TOKENS)
    window = result.window_end - result.window_start
    return {
        "ok": ok,
        "n": n,
        "rate": n / window,
        "cpu_ms_per_req": 1e3 * cpu / n,
        "cpu_us_per_tok": 1e6 * cpu / (n * TOKENS),
        "server_cpu": (_server_cpu(url) - srv0) / wall,
        "wall_s": wall,
        "tok_s": m["output_tok_s"],
        "sampler_cpu_s": host.load.sampler_cpu_s,
    }


async def _aiohttp_run(url: str, n: int, concurrency: int) -> tuple[int, float]:
    import aiohttp

    semaphore = asyncio.Semaphore(concurrency)
    timeout = aiohttp.ClientTimeout(total=30)

    async def one(i: int) -> bool:
        payload = {
            "input_ids": [i, 7, 7, 7],
            "stream": True,
            "sampling_params": {"max_new_tokens": TOKENS, "temperature": 0.0, "ignore_eos": True},
        }
        async with semaphore, aiohttp.ClientSession(timeout=timeout) as session:
            async with session.post(f"{url}/generate", json=payload) as response:
                tokens, done = 0, False
                async for chunk_bytes in response.content:
                    chunk = chunk_bytes.strip()
                    if not chunk:
                        continue
                    chunk = chunk.decode().removeprefix("data: ")
                    if chunk == "[DONE]":
                        done = True
                        continue
                    data = json.loads(chunk)
                    tokens = data["meta_info"]["completion_tokens"]
                    _ = time.perf_counter()  # a benchmark's per-chunk timestamp
                return done and tokens == TOKENS

    start = time.perf_counter()
    results = await asyncio.gather(*(one(i) for i in range(n)))
    return sum(results), time.perf_counter() - start


def run_aiohttp(url: str, n: int, concurrency: int) -> dict[str, Any]:
    gc.collect()
    srv0 = _server_cpu(url)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    ok, window = asyncio.run(_aiohttp_run(url, n, concurrency))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {
        "ok": ok,
        "n": n,
        "rate": n / window,
        "cpu_ms_per_req": 1e3 * cpu / n,
        "cpu_us_per_tok": 1e6 * cpu / (n * TOKENS),
        "server_cpu": (_server_cpu(url) - srv0) / wall,
        "wall_s": wall,
    }


def run_open_loop(url: str, rates: list[float], concurrency: int, seconds: float) -> list[dict[str, Any]]:
    rows = []
    for per_s in rates:
        n = max(20, int(per_s * seconds))
        result = dispatch_cell(
            SGLangAdapter(),
            url,
            [[i, 7, 7, 7] for i in range(n)],
            warmup=0,
            concurrency=concurrency,
            max_tokens=TOKENS,
            timeout_s=30,
            request_rate=RequestRateParams(per_s=per_s, arrival="poisson"),
            seed=1,
        )
        m = cell_metrics(result)
        rows.append(
            {
                "target": per_s,
                "scheduled": m["scheduled_rate_rps"],
                "achieved": m["achieved_rate_rps"],
                "max_lag_ms": 1e3 * m["max_send_lag_s"],
                "flag": m["rate_not_reached"],
                "note": m["rate_note"],
                "n": n,
                "conc": concurrency,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one repeat, fewer requests")
    args = parser.parse_args()
    repeats, n = (1, 500) if args.quick else (args.repeats, args.requests)
    print(f"load {load_note()['loadavg']}")
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    with RefServerProcess(interval=0.0, tokens_per_chunk=1) as server:
        run_specbench(server.url, 50, 8, server.pid)  # imports and first-use costs out of the figures
        asyncio.run(_aiohttp_run(server.url, 50, 8))
        for rep in range(repeats):
            for conc in CONCURRENCY:
                count = n if conc > 1 else n // 3
                ours = run_specbench(server.url, count, conc, server.pid)
                runs.setdefault(("specbench", conc), []).append(ours)
                runs.setdefault(("aiohttp", conc), []).append(run_aiohttp(server.url, count, conc))
            print(f"repeat {rep + 1}/{repeats} done, load {load_note()['loadavg']}", flush=True)
        open_rows = run_open_loop(server.url, [50, 200, 800, 3000], 64, 2.0)
        sampler = run_sampler(server.pid, 3.0 if args.quick else 10.0)
    rows = []
    for conc in CONCURRENCY:
        ours, theirs = runs[("specbench", conc)], runs[("aiohttp", conc)]
        ratios = [a["rate"] / b["rate"] for a, b in zip(ours, theirs, strict=True)]
        rate, base = spread([r["rate"] for r in ours]), spread([r["rate"] for r in theirs])
        cpu = spread([r["cpu_ms_per_req"] for r in ours])
        rows.append(
            {
                "conc": conc,
                "n": ours[0]["n"],
                "ok": all(r["ok"] == r["n"] for r in ours + theirs),
                "rate": rate["median"],
                "rate_min": rate["min"],
                "rate_max": rate["max"],
                "cpu_ms": cpu["median"],
                "cpu_ms_max": cpu["max"],
                "cpu_us_tok": spread([r["cpu_us_per_tok"] for r in ours])["median"],
                "srv_cpu": spread([r["server_cpu"] for r in ours])["median"],
                "aio_rate": base["median"],
                "aio_cpu_ms": spread([r["cpu_ms_per_req"] for r in theirs])["median"],
                "aio_srv_cpu": spread([r["server_cpu"] for r in theirs])["median"],
                "ratio": spread(ratios)["median"],
                "ratio_min": spread(ratios)["min"],
            }
        )
    print(
        f"closed loop, {TOKENS}-token instant answers; medians of {repeats} (rates in requests/s, "
        f"CPU in ms per request / µs per token, server CPU in cores)"
    )
    print(
        table(
            rows,
            [
                ("conc", "conc", 0),
                ("n", "n", 0),
                ("ok", "all ok", 0),
                ("rate", "specbench", 0),
                ("rate_min", "min", 0),
                ("rate_max", "max", 0),
                ("cpu_ms", "cpu ms/req", 3),
                ("cpu_ms_max", "max", 3),
                ("cpu_us_tok", "µs/tok", 0),
                ("srv_cpu", "srv cpu", 2),
                ("aio_rate", "aiohttp", 0),
                ("aio_cpu_ms", "cpu ms/req", 3),
                ("aio_srv_cpu", "srv cpu", 2),
                ("ratio", "ratio", 2),
                ("ratio_min", "min", 2),
            ],
        )
    )
    print("open loop (Poisson, concurrency cap 64): target vs achieved send rate")
    print(
        table(
            open_rows,
            [
                ("target", "target/s", 0),
                ("scheduled", "scheduled/s", 1),
                ("achieved", "achieved/s", 1),
                ("max_lag_ms", "max lag ms", 1),
                ("flag", "rate_not_reached", 0),
                ("n", "n", 0),
            ],
        )
    )
    ratio_ok = all(r["ratio"] >= 2 for r in rows if r["conc"] >= 8)
    at32 = next(r for r in rows if r["conc"] == 32)
    cpu_ok = at32["cpu_ms"] <= CPU_GOAL_MS
    sampler_ok = sampler["cores"] < SAMPLER_GOAL
    print(
        f"host sampler alone, {sampler['interval_s']} s interval, {sampler['seconds']:.0f} s, "
        f"{sampler['processes']} processes: {sampler['cpu_s'] * 1e3:.1f} ms CPU in {sampler['samples']} "
        f"samples = {100 * sampler['cores']:.2f} % of a core ({sampler['ms_per_sample']:.2f} ms a sample)"
    )
    print(
        f"goal >= 2x aiohttp at concurrency 8-64: {'met' if ratio_ok else 'NOT met'}; "
        f"goal <= {CPU_GOAL_MS} ms CPU per request at concurrency 32: {at32['cpu_ms']:.3f} ms "
        f"(max {at32['cpu_ms_max']:.3f}, {at32['cpu_us_tok']:.0f} µs per token), "
        f"{'met' if cpu_ok else 'NOT met'}; goal host sampler < {100 * SAMPLER_GOAL:.0f} % of a core: "
        f"{'met' if sampler_ok else 'NOT met'}"
    )
    write_results(
        "client_overhead",
        {
            "load": load_note(),
            "repeats": repeats,
            "tokens": TOKENS,
            "rows": rows,
            "open_loop": open_rows,
            "sampler": sampler,
            "runs": {f"{k[0]}@{k[1]}": v for k, v in runs.items()},
            "goals": {
                "ratio_ge_2_at_c8_64": ratio_ok,
                "cpu_le_0.1ms_per_request_at_c32": cpu_ok,
                "sampler_lt_1pct_core": sampler_ok,
            },
        },
    )


def run_sampler(server_pid: int, seconds: float) -> dict[str, Any]:
    """The host sampler on its own at its default interval: its CPU as a share of one core (the
    benchmark's garbage collected first: a collection its thread triggers is charged to it)."""
    gc.collect()
    with HostSampler(server=(server_pid,)) as host:
        time.sleep(seconds)
    load = host.load
    assert load is not None and load.sampler_cpu_s is not None
    samples = load.samples or 1
    return {
        "interval_s": load.interval_s,
        "seconds": load.window_s,
        "samples": load.samples,
        "processes": sum(1 for name in os.listdir("/proc") if name.isdigit()),
        "cpu_s": load.sampler_cpu_s,
        "ms_per_sample": 1e3 * load.sampler_cpu_s / samples,
        "cores": load.sampler_cpu_s / load.window_s,
    }


if __name__ == "__main__":
    main()
