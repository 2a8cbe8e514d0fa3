"""How faithfully the GPU emulator keeps its timing when its time scale compresses it (issue 47
item 2): the decode rate a real HTTP client measures (tokens after the first over the time after
the first token, summed over requests, times the scale back in GPU seconds) against the rate of
the emulator's own schedule in emulated time (tests/support/gpu_sched.simulated_rate: no host
in it) and the closed form (gpu_truth.expected), per time scale, config and concurrency.

The host is the limit: a request's decode must last well above the host's jitter (about a
millisecond on 2 shared cores) in real time, so the scale that keeps every ratio is about the
fastest request's decode in GPU seconds / 0.05 s. Writes ``benchmarks/results/emulator_fidelity.json``.

    python benchmarks/emulator_fidelity.py [--scales 5 20 60] [--concurrency 1 4] [--output 1024]
        [--no-eos]
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

import httpx  # noqa: E402
from _common import load_note, table, write_results  # noqa: E402
from gpu_emulator import EMULATOR_FILE, encode, wait_ready  # noqa: E402
from gpu_model import hardware  # noqa: E402
from gpu_profiles import truth  # noqa: E402
from gpu_sched import simulated_rate  # noqa: E402
from gpu_truth import Config, Panel, expected  # noqa: E402
from ports import free_port  # noqa: E402

CONFIGS = {"auto": ([], Config("auto", "auto")),
           "dflash-b16": (["--speculative-algorithm", "DFLASH", "--speculative-num-draft-tokens", "16"],
                          Config("dflash-b16", "linear", 16, 16)),
           "ddtree-b16": (["--speculative-algorithm", "DDTREE", "--speculative-num-draft-tokens", "16",
                           "--speculative-ddtree-budget", "16"], Config("ddtree-b16", "tree", 16, 16))}


def _one(client: httpx.Client, ids: list[int], output: int, eos: bool) -> tuple[int, float]:
    """One streamed request: (tokens after the first, seconds after the first token)."""
    times: list[float] = []
    seen = 0
    body = {"input_ids": ids, "stream": True,
            "sampling_params": {"max_new_tokens": output, "temperature": 0, "ignore_eos": not eos}}
    with client.stream("POST", "/generate", json=body) as reply:
        for line in reply.iter_lines():
            if line.startswith("data:") and "[DONE]" not in line:
                now, count = time.perf_counter(), len(json.loads(line[5:])["output_ids"])
                times += [now] * (count - seen)
                seen = count
    return len(times) - 1, times[-1] - times[0]


def measure(url: str, ids: list[int], *, output: int, concurrency: int, requests: int,
            eos: bool) -> float:
    """A closed loop of ``concurrency`` clients: tokens over seconds after the first token,
    summed over every request after each client's first."""
    spans: list[tuple[int, float]] = []
    # each request its own prompt (the ids rotated): the emulator draws a prompt's answer from
    # its tokens, so one prompt resent would measure that prompt alone, not the task's mean
    prompts = itertools.count()

    def client() -> None:
        with httpx.Client(base_url=url, timeout=120) as c:
            for i in range(requests // concurrency + 1):
                k = next(prompts) % len(ids)
                got = _one(c, ids[k:] + ids[:k], output, eos)
                if i:
                    spans.append(got)
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(n for n, _ in spans) / sum(s for _, s in spans)


def run(name: str, scale: float, concurrency: int, args: argparse.Namespace) -> dict[str, Any]:
    flags, config = CONFIGS[name]
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(EMULATOR_FILE), "--model-path", "/m/Qwen3-8B",
                             "--port", str(port), "--emu-time-scale", f"{scale:g}", "--emu-start-s", "0",
                             "--emu-seed", "1", *flags], stdout=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, 30)
        ids = encode("def f(x):\n    '''Return x.'''\n    return x\n" * (args.context // 4))[:args.context]
        got = measure(url, ids, output=args.output, concurrency=concurrency, requests=args.requests,
                      eos=not args.no_eos)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    tr, hw = truth(), hardware()
    eos = not args.no_eos
    sim = simulated_rate(config, tr, hw, task="code", prompt=args.context, max_new=args.output,
                         eos=eos, concurrency=concurrency, requests=args.requests)
    closed = expected(config, Panel("code", args.context, concurrency, args.output, eos=eos), tr, hw)
    return {"scale": scale, "config": name, "c": concurrency, "measured": got / scale,
            "simulated": sim, "closed": closed.decode_rate,
            "err_pct": 100 * (got / scale / sim - 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", nargs="+", type=float, default=[5.0, 20.0, 60.0])
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 4])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS))
    parser.add_argument("--context", type=int, default=3072)
    parser.add_argument("--output", type=int, default=1024)
    parser.add_argument("--no-eos", action="store_true", help="answers run to the cap (ignore_eos)")
    parser.add_argument("--requests", type=int, default=12)
    args = parser.parse_args()
    before = load_note()
    rows = [run(name, scale, c, args) for scale in args.scales for name in args.configs
            for c in args.concurrency]
    print(table(rows, [("scale", "scale", 0), ("config", "config", 0), ("c", "c", 0),
                       ("measured", "measured tok/s", 1), ("simulated", "own schedule", 1),
                       ("closed", "closed form", 1), ("err_pct", "measured/own %", 1)]))
    print(f"load before {before['loadavg']}, after {load_note()['loadavg']}")
    write_results("emulator_fidelity", {"load_before": before, "load_after": load_note(),
                                         "args": vars(args), "rows": rows})


if __name__ == "__main__":
    main()
