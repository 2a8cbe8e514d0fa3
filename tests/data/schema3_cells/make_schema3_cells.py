"""How cells.json was made: random cells written and judged by specbench 1d4f366 (schema 3,
each judge threshold a field of its own), before the cell rules became objects (issue 31).

    git archive 1d4f366 specbench_lib tests/cellfactory.py | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base:/tmp/base/tests python make_schema3_cells.py 4000 /tmp/cells

cells.json keeps, of 4000 such cells, the smallest that together carry every (status, code,
tolerated) the 4000 had, with the verdict 1d4f366 gave each; tests/analysis/test_rule_objects.py reads
them with today's code and requires the same verdicts. Kept as it ran, not run by the tests.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from cellfactory import make_cell  # 1d4f366's

from specbench_lib.analysis.analyse import verdict_of
from specbench_lib.model.hostfacts import HostLoad, HostProcess
from specbench_lib.model.records import CellFacts, CellRecord, JudgeInputs, RequestRecord
from specbench_lib.model.served import PromptRecord, ServedBefore

GPU = {"gpus": [{"index": 0, "util_mean": 50.0}], "cuda_visible": "0",
       "processes": [{"pid": 9, "name": "x", "gpu": 0, "used_mib": 500.0, "kind": "other"}]}


def _request(rnd: random.Random, r: RequestRecord, odds: float) -> RequestRecord:
    assert r.final is not None
    r = replace(r, final=replace(r.final), token_times=list(r.token_times))
    assert r.final is not None
    k = rnd.random() * odds
    if k < 0.06:
        r = replace(r, final=None, token_times=[], error_kind="timeout", error="boom")
    elif k < 0.10:
        r = replace(r, final=None)
    elif k < 0.14:
        r.final.completion_tokens, r.token_times = r.max_tokens - 3, r.token_times[:-3]
    elif k < 0.17:
        r.final.prompt_tokens = 99
    elif k < 0.20:
        r.final.cached_tokens = 3
    elif k < 0.23:
        r.final.verify_steps = None
    if rnd.random() < 0.1:
        r = replace(r, coalesced_tokens=rnd.choice([1, 4, 16]))
    if rnd.random() < 0.05:
        r = replace(r, first_token_coalesced=True)
    return r


def _host(rnd: random.Random) -> HostLoad | None:
    if rnd.random() >= 0.4:
        return None
    return HostLoad(cpus=2, window_s=rnd.choice([0.2, 3.0]), samples=7,
                    other_cpu_cores=rnd.choice([0.1, 0.6, 1.5]),
                    steal_fraction=rnd.choice([None, 0.3]),
                    server_cpu_cores=rnd.choice([0.5, 1.95]), own_cpu_cores=0.3,
                    top=(HostProcess(42, "cc1", 1.1),), gpu=rnd.choice([None, GPU]))


def cell(seed: int) -> CellRecord:
    rnd = random.Random(seed)
    n = rnd.choice([1, 2, 4, 10])
    made = make_cell("ngram-b8", "ngram", 8, outputs=[[i] for i in range(n)],
                     tok_s=rnd.choice([8.0, 40.0]))
    reqs = list(made.requests)
    if rnd.random() < 0.3:  # a warmup request
        assert reqs[0].final is not None
        reqs.insert(0, replace(reqs[0], index=-1, warmup=True, final=replace(reqs[0].final)))
    reqs = [_request(rnd, r, 1 if seed % 2 else 4) for r in reqs]
    if rnd.random() < 0.15:
        reqs = reqs[:-1]
    if rnd.random() < 0.4:  # open loop: scheduled every 0.5 s, sent on time or slower
        slow = rnd.choice([1.0, 1.0, 1.5, 3.0])
        reqs = [replace(r, scheduled=0.5 * i, start=0.5 * i * slow) if not r.warmup else r
                for i, r in enumerate(reqs)]
    host = _host(rnd)
    served = (ServedBefore(("c0",), 2, (rnd.choice(["p0-0", "zz"]),), ("doc1",))
              if rnd.random() < 0.3 else None)
    prompts = tuple(PromptRecord(p.sha, 4, rnd.choice([(), ("doc1",), ("copyedit:doc1",)]))
                    for p in made.prompts)
    counters = rnd.choice([{}, {"drafts": 3}, {"drafts": 0}, {"error": "no /metrics"}])
    judge: Any = JudgeInputs(  # 1d4f366's fields
        planned=n + rnd.choice([0, 0, 1]), speculative=rnd.random() < 0.8,
        spec_stats=rnd.choice(["per_request", "counters"]),
        max_failed_fraction=rnd.choice([0.0, 0.1, 0.25, 0.5]), prefix_cache=rnd.random() < 0.2,
        max_coalesced_fraction=rnd.choice([0.0, 0.05, 0.5]),
        max_coalesced_first_fraction=rnd.choice([0.01, 0.3]),
        max_other_cpu_cores=rnd.choice([None, 0.5, 2.0]),
        max_other_gpu_mib=rnd.choice([None, 0.0, 1000.0]), prompt_reuse=rnd.random() < 0.2)
    facts = CellFacts(server_alive=rnd.random() > 0.05,
                      crash_line=rnd.choice([None] * 19 + ["CUDA error"]), host=host,
                      served_before=served, spec_counters=counters)
    return replace(made, requests=tuple(reqs), judge=judge, facts=facts, prompts=prompts,
                   target_rate=rnd.choice([None, None, 2.0, 50.0]))


def main() -> None:
    count, out = int(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for seed in range(count):
        made = cell(seed)
        data = made.to_dict()
        data["verdict"] = verdict_of(made).to_dict()
        (out / f"{seed}.json").write_text(json.dumps(data))


if __name__ == "__main__":
    main()
