"""The phase notebook's first figure is the answer's own quantity (issue 47, item 4): the
claim's quantity relative to auto against the budget, with the claim's own intervals (the one
computation best() states), the claim's best ringed, on an axis about 1, not from 0."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pytest
from cellfactory import spread_cell

matplotlib.use("Agg")

import specbench_lib as sb  # noqa: E402
from specbench_lib.report import plots  # noqa: E402
from specbench_lib.runs.run import RunDir  # noqa: E402


def decode_run(folder: Path, means: dict[str, float], *, blocks: int, requests: int,
               noise: float = 0.04) -> Path:
    """A run claimed on the decode rate, ``blocks`` blocks of the same prompts to every config."""
    run = RunDir(folder)
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase="t", model={"path": "/m/x.gguf"}, engine={"kind": "llamacpp"},
                        params={"equivalence": 0.05, "claim_quantity": "decode_rate"})
    rng = np.random.default_rng(1)
    for block in range(blocks):
        shared = np.exp(0.2 * rng.standard_normal(requests))
        for config, mean in means.items():
            budget = None if config == "auto" else int(config.split("-b")[1])
            draws = np.exp(noise * rng.standard_normal(requests))
            run.write_cell(spread_cell(config, "auto" if budget is None else "ngram", budget,
                                       list(mean * shared * draws), repeat=block,
                                       repeats=blocks))
    return run.path


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> sb.SweepResult:
    root = tmp_path_factory.mktemp("claimfig")
    return sb.SweepResult(decode_run(root / "run", {"auto": 30.0, "ngram-b4": 36.0,
                                                     "ngram-b8": 33.0}, blocks=3, requests=6))


def test_the_first_figure_is_the_claims_quantity_with_its_intervals_and_ring(
        result: sb.SweepResult) -> None:
    figures = plots.standard(result)
    assert next(iter(figures)) == "claim_vs_budget"  # first under the answer
    ax = figures["claim_vs_budget"].axes[0]
    assert ax.get_ylabel() == "decode rate vs auto (×)"
    best = result.best().iloc[0]  # the run's own claim: on the decode rate
    assert best["quantity"] == "decode_rate" and best["best"] == "ngram-b4"
    (container,) = ax.containers
    line = container.lines[0]
    points = dict(zip(line.get_xdata(), line.get_ydata(), strict=True))
    assert points[4] == pytest.approx(best["speedup"])  # the claim's figure, not end to end
    # the error bar spans the claim's simultaneous interval
    segments = container.lines[2][0].get_segments()
    at4 = next(s for s in segments if s[0][0] == pytest.approx(4))
    assert sorted(p[1] for p in at4) == pytest.approx([best["speedup_lo"], best["speedup_hi"]])
    assert best["speedup_lo"] > 1  # an interval that can be read on this axis
    low, high = ax.get_ylim()
    assert low > 0.5 and high < 2  # about 1: not an axis from 0
    rings = [ln for ln in ax.get_lines() if ln.get_label() in
             ("best", "fastest, undecided (the claim's leader)")]
    assert [(r.get_xdata()[0], r.get_ydata()[0]) for r in rings] == [
        (4, pytest.approx(best["speedup"]))]


def test_the_speedup_figure_is_read_about_1_too(result: sb.SweepResult) -> None:
    ax = plots.speedup_vs_budget(result).axes[0]
    assert ax.get_ylim()[0] > 0.5  # end to end speedups are about 1: not drawn from 0


def test_an_interval_far_past_the_points_does_not_set_the_axis(tmp_path: Path) -> None:
    """Two blocks: t with 1 degree of freedom, intervals far past the speedups; the axis stays
    about the points (the intervals' ends run off it)."""
    result = sb.SweepResult(decode_run(tmp_path / "run", {"auto": 30.0, "ngram-b4": 36.0,
                                                          "ngram-b8": 33.0}, blocks=2,
                                       requests=3, noise=0.3))
    best = result.best()
    assert best["speedup_hi"].iloc[0] > 2.5 * best["speedup"].iloc[0]  # it reaches far
    ax = plots.claim_vs_budget(result).axes[0]
    points = [y for y in ax.containers[0].lines[0].get_ydata() if y == y]
    assert ax.get_ylim()[1] == pytest.approx(max(points) * 1.25)
