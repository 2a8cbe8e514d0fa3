"""``unplanned_reasoning``: a cell whose answers open a reasoning block (``<think>``), or close
one its prompt opened (``</think>``: DeepSeek-R1's template opens the block in the generation
prompt), that its plan did not ask for. Qwen3's chat template reasons first unless
``enable_thinking`` is false, and a drafter trained on answers without reasoning (z-lab's
Qwen3-8B-DFlash-b16) then drafts a workload nobody published; the answers also end inside the
reasoning at the token cap."""

from __future__ import annotations

from ...model.catalogue import C
from ...model.verdict import Reason, Verdict
from ..rule import Judged, Rule


class UnplannedReasoning(Rule):
    code = "unplanned_reasoning"
    protects = ("answers that open a reasoning block (<think>), or close one the prompt opened "
                "(</think>: DeepSeek-R1), that the plan did not ask for: a model "
                "whose chat template reasons by default (Qwen3) measured on reasoning traces, "
                "which a drafter trained without them (DFlash) was not made for; set the "
                "workload's chat_template_kwargs {enable_thinking: false}, or true to measure "
                "reasoning on purpose")
    order = 65

    def judge(self, verdict: Verdict, cell: Judged) -> Verdict:
        if cell.inputs.reasoning or verdict.status not in ("ok", "invalid"):
            return verdict
        looked = [r for r in cell.measured if r.reasoning is not None]
        opened = sum(bool(r.reasoning) for r in looked)
        if not opened:
            return verdict
        reason = Reason(C.unplanned_reasoning, (
            f"{opened} of {len(looked)} answers opened a reasoning block (<think>, or a "
            f"</think> closing the one the prompt opened) that the workload did not ask for: "
            f"set its chat_template_kwargs {{enable_thinking: false}} "
            f"(Qwen3), or {{enable_thinking: true}} to measure reasoning as a workload of its own"))
        return Verdict("invalid", (*verdict.reasons, reason), verdict.failed)
