"""Measured per-token ITL and TPOT against a server whose token timing is known exactly.

    .venv/bin/python benchmarks/itl_truth.py [--interval 0.02] [--tokens 64]

For 1 and 4 tokens per chunk at concurrency 1 and 16, prints the true mean per-token ITL (a
chunk's gap / its tokens), the measured mean ITL, TPOT and their relative errors against their
own truths (the issue's bound: 2 %), the per-step ITL a chunk-counting client would report, and
the tokens-per-chunk distribution.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from reference_server import (  # noqa: E402
    ReferenceServer,
    expected_itl_mean,
    expected_tpot_mean,
)

from specbench_lib.analysis.metrics import cell_metrics  # noqa: E402
from specbench_lib.client.dispatch import dispatch_cell  # noqa: E402
from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter  # noqa: E402


def measure(interval: float, chunk: int, concurrency: int, tokens: int, requests: int) -> dict:
    with ReferenceServer(interval=interval, tokens_per_chunk=chunk) as server:
        result = dispatch_cell(LlamaCppAdapter(), server.url, [[1, 2, 3]] * (requests + 1),
                               warmup=1, concurrency=concurrency, max_tokens=tokens, timeout_s=30)
    m = cell_metrics(result)
    truth = expected_itl_mean(tokens, interval, chunk)
    return {"truth": truth, "tpot_truth": expected_tpot_mean(tokens, interval, chunk),
            "itl": m["itl_mean_s"], "tpot": m["tpot_mean_s"],
            "per_step": chunk * interval, "chunks": m["chunk_size_counts"], "n": m["n_requests"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--interval", type=float, default=0.02)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    print(f"interval {args.interval * 1000:.1f} ms, {args.tokens} tokens per request")
    print(f"{'chunk':>5} {'conc':>4} {'n':>3} {'truth ms':>9} {'ITL ms':>8} {'err %':>6} "
          f"{'TPOT ms':>8} {'err %':>6} {'per-step ms':>11}  chunks")
    for chunk in (1, 4):
        for conc in (1, 16):
            r = measure(args.interval, chunk, conc, args.tokens, requests=max(4, conc))
            err = 100 * (r["itl"] / r["truth"] - 1)
            tpot_err = 100 * (r["tpot"] / r["tpot_truth"] - 1)
            print(f"{chunk:>5} {conc:>4} {r['n']:>3} {r['truth'] * 1e3:>9.3f} {r['itl'] * 1e3:>8.3f} "
                  f"{err:>6.2f} {r['tpot'] * 1e3:>8.3f} {tpot_err:>6.2f} {r['per_step'] * 1e3:>11.1f}  "
                  f"{r['chunks']}")


if __name__ == "__main__":
    main()
