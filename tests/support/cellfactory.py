"""Cell records for tests: requests whose stored timings give a chosen output tok/s.

Analysis computes every metric from the stored requests, so a synthetic cell carries requests,
never precomputed metrics: ``ok`` cells have ``n`` requests of ``tokens`` tokens sent at t=0 whose
last token arrives at ``tokens * n / tok_s``, analysed as the sweep writes them; other statuses
are verdicts the measurement decided.
"""

from __future__ import annotations

from dataclasses import replace

from specbench_lib.analysis.analyse import analyse
from specbench_lib.model.cellspec import CellSpec
from specbench_lib.model.records import CellFacts, CellRecord, FinalStats, JudgeInputs, RequestRecord
from specbench_lib.model.served import PromptRecord
from specbench_lib.model.verdict import Reason, Verdict


def request(index: int, *, tokens: int, last: float, outputs: list[int] | None = None,
            prompt: int = 4) -> RequestRecord:
    times = [last * (k + 1) / tokens for k in range(tokens)]
    rec = RequestRecord(index=index, warmup=False, prompt_tokens_planned=prompt, max_tokens=tokens,
                        status=200, start=0.0, end=last, token_times=times,
                        chunk_sizes=[1] * tokens, output_ids=list(outputs or []),
                        text_sha=str(outputs))
    rec.final = FinalStats(prompt_tokens=prompt, completion_tokens=tokens, verify_steps=tokens)
    return rec


def make_cell(config: str, method: str, budget: int | None, status: str = "ok",
              tok_s: float | None = 10.0, *, context: int = 256, concurrency: int = 1,
              workload: str = "code", repeat: int = 0, repeats: int = 1,
              fingerprint: str = "fp", run_id: str = "r", tokens: int = 16,
              outputs: list[list[int]] | None = None, prompt_shas: list[str] | None = None,
              series: str | None = None) -> CellRecord:
    spec = CellSpec(config=config, series=series or config.split("-")[0], method=method,
                    budget=budget, workload=workload, context=context, concurrency=concurrency,
                    repeat=repeat, repeats=repeats, output_tokens=tokens)
    judge = JudgeInputs(planned=len(outputs) if outputs else 1, speculative=method != "auto")
    if status != "ok":
        verdict = Verdict(status, (Reason("server_failed", "decided by the test"),))  # type: ignore[arg-type]
        return CellRecord(run_id, spec, fingerprint, config, (), verdict, judge,
                          CellFacts(decided=verdict))
    assert tok_s is not None
    outs = outputs or [[]]
    last = tokens * len(outs) / tok_s
    requests = tuple(request(i, tokens=tokens, last=last, outputs=o) for i, o in enumerate(outs))
    shas = prompt_shas or [f"p{repeat}-{i}" for i in range(len(outs))]
    prompts = tuple(PromptRecord(sha, 4) for sha in shas)
    return analyse(CellRecord(run_id, spec, fingerprint, config, (), Verdict("ok"), judge,
                              requests=requests, prompts=prompts))


def spread_cell(config: str, method: str, budget: int | None, rates: list[float], *,
                repeat: int = 0, repeats: int = 1) -> CellRecord:
    """One cell whose requests run one after another, request i at ``rates[i]`` tok/s."""
    base = make_cell(config, method, budget, repeat=repeat, repeats=repeats)
    requests, t = [], 0.0
    for i, rate in enumerate(rates):
        rec = request(i, tokens=16, last=16 / rate)
        rec.start += t
        rec.end += t
        rec.token_times = [x + t for x in rec.token_times]
        requests.append(rec)
        t = rec.end
    judge = replace(base.judge, planned=len(rates))
    cell = replace(base, requests=tuple(requests), judge=judge,
                   prompts=tuple(PromptRecord(f"p{i}", 4) for i in range(len(rates))))
    return analyse(cell)


def not_ok(result: object) -> dict[str, list[str]]:
    """Each cell of a sweep result that is not ok, with its reasons: an assertion's message, so
    a count that differs says which rule judged which cell."""
    return {c.cell_id: list(c.verdict.reasons) for c in result.cells  # type: ignore[attr-defined]
            if c.status != "ok"}


def blocked_cells(config: str, method: str, budget: int | None, rates: list[float]
                  ) -> list[CellRecord]:
    """One cell a request, request i in repeat (block) i at ``rates[i]`` tok/s: every prompt its
    own block, so a claim over them is the prompts' paired t (the statistic of one block with
    the prompts as the sample) and still a claim of many blocks, which may decide."""
    return [spread_cell(config, method, budget, [rate], repeat=i, repeats=len(rates))
            for i, rate in enumerate(rates)]
