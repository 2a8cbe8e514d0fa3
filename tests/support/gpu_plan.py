"""The GPU emulator's truth for a whole plan (tests and benchmarks only): each config of a plan as
the emulator runs it (from the argv the sweep would launch), each workload as the task whose
acceptance it drafts at, and the best config of every panel of the plan.

    plan = sb.load_plan("emulated-tp1.yaml")      # a plan on the emulator (gpu_params.py)
    answers = plan_truth(plan, truth("published"), hardware("H100", "Qwen3-8B", 1))
    answers[("chat", 3072, 4, 1024, 0.0)].best    # the config label that is truly fastest
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpu_emulator import emulated_config
from gpu_model import Hardware
from gpu_truth import Config, Expected, Panel, Truth, expected

# the corpora's tasks: HumanEval's prompts are all code (gpu_emulator.classify), ShareGPT's
# nearly all chat (1.9 % of its text is a Python function with a docstring)
TASK_OF_SOURCE = {"humaneval": "code", "sharegpt": "chat", "mtbench": "chat", "specbench": "chat"}

PanelKey = tuple[str, int, int, int, float]  # workload, context, concurrency, output, temperature


@dataclass(frozen=True)
class PanelTruth:
    """One panel's truth: the best config's label and every config's expected figures."""

    best: str
    rates: dict[str, Expected]

    def speedup(self, label: str, baseline: str = "auto") -> float:
        return self.rates[label].decode_rate / self.rates[baseline].decode_rate


def plan_configs(plan: Any) -> dict[str, Config]:
    """Each config label of ``plan`` (a loaded :class:`specbench_lib.Plan`) as the emulator runs
    it: the argv the sweep would launch, read by the emulator's own flag parser."""
    from specbench_lib.servers.engines import get_adapter
    from specbench_lib.sweep.lifetimes import launch_argvs

    adapter = get_adapter(plan.params.engine)
    return {label: emulated_config(argv) for label, argv in launch_argvs(plan, adapter).items()}


def plan_truth(plan: Any, tr: Truth, hw: Hardware, *, mem_fraction: float | None = None) -> dict[
        PanelKey, PanelTruth]:
    """The best config of every panel of ``plan`` under truth ``tr`` on ``hw`` (closed form,
    gpu_truth.expected; answers end at EOS where the workload stops there)."""
    params = plan.params
    fraction = mem_fraction or params.engine.mem_fraction or 0.85
    configs = plan_configs(plan)
    out: dict[PanelKey, PanelTruth] = {}
    for w in params.workloads:
        task = TASK_OF_SOURCE.get(str(w.source), "chat")
        contexts = [c for c in params.contexts if w.max_context is None or c <= w.max_context]
        for ctx in contexts:
            for c in params.concurrency:
                for out_tokens in params.output_lengths:
                    for temp in params.temperatures:
                        panel = Panel(task, ctx, c, out_tokens, eos=w.stop == "eos", temperature=temp)
                        rates = {label: expected(cfg, panel, tr, hw, fraction)
                                 for label, cfg in configs.items()}
                        best = max(rates, key=lambda label: rates[label].decode_rate)
                        out[(w.name, ctx, c, out_tokens, temp)] = PanelTruth(best, rates)
    return out
