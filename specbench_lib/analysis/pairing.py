"""Whether a panel's configs share their requests' randomness (issue 38).

Every config of a panel sends a prompt with the same seed
(:meth:`~specbench_lib.model.sampling.Sampling.for_prompt`), so at a temperature above 0 two
configs' answers are paired draws only
where the engine decides a request's draws by its seed. SGLang does so only when started with
``--enable-deterministic-inference`` (sampling/sampling_batch_info.py:128,157-172); without it a
sampled cell's ``judge.seeds_paired`` is False. The claim (``claim.py``) still pairs by prompt:
the same prompt's difficulty cancels whether or not the draws are shared, and draws that are not
shared are independent noise, which the blocks' spread holds (the comparison stays valid, only
wider). The statement and the answer say which applied, from :func:`pairing_note`.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..model.records import CellRecord


def seeds_paired(cell: CellRecord) -> bool:
    """Whether ``cell``'s requests drew by their seeds (greedy cells always; cells written
    before issue 38 read as paired, what was assumed when they were measured)."""
    return cell.spec.temperature == 0 or cell.judge.seeds_paired


def panel_paired(cells: Iterable[CellRecord]) -> bool:
    """Whether a panel's cells can be compared request by request: every one drew by its
    seed (one unpaired cell makes the whole comparison unpaired)."""
    return all(seeds_paired(c) for c in cells)


def pairing_note(cells: Iterable[CellRecord]) -> str | None:
    """The sentence an answer carries for sampled cells that were not paired (None when every
    cell was): which configs, and why."""
    unpaired = sorted({c.spec.config for c in cells if not seeds_paired(c)})
    if not unpaired:
        return None
    return (f"draws unpaired: the sampled cells of {', '.join(unpaired)} ran on a server that "
            f"ignores a request's seed (SGLang without --enable-deterministic-inference), so no "
            f"two configs shared their draws; the prompts stay paired, the draws' noise is in "
            f"the interval")
