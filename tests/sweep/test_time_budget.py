"""A sweep with a time budget (issue 22): rounds, elimination, stopping, the answer.

The known-speedup sweep runs on ``tests/support/fake_server.py`` with a token interval per budget
(b4 1.05, b8 1.35, b16 1.15, b32 0.95 over auto): one seed here, with the issue's 40 s budget
(it decides in about 15 s: the fake servers start in well under a second); three seeds in
``benchmarks/budgeted_known_speedup.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from budgetparams import budget_params
from fakeparams import fake_argv
from simcells import ConfigTruth, Truth, simulate_panel
from timemodels import slow_model

import specbench_lib as sb
from specbench_lib.analysis.answer import SHOWN, answer_lines, panel_words
from specbench_lib.analysis.claim import look_alpha, spent
from specbench_lib.analysis.rounds import Contention
from specbench_lib.cli import main
from specbench_lib.core.durations import parse_duration
from specbench_lib.core.errors import ParamsError
from specbench_lib.core.readback import from_doc
from specbench_lib.model.answerfile import AnswerDoc, PanelAnswer
from specbench_lib.sweep.budget import Budget


def _answer(result: sb.SweepResult) -> dict:
    return json.loads((result.run_dir / "answer.json").read_text())


@pytest.fixture(scope="module")
def known(tmp_path_factory: pytest.TempPathFactory) -> tuple[sb.SweepResult, dict, float]:
    folder = tmp_path_factory.mktemp("known")
    import time

    began = time.monotonic()
    # noisy tokens around the known means (log-normal, sigma 0.3): without noise the interval
    # is far narrower than the client's own ~1 ms a request, which shifts every ratio a little
    result = sb.run_sweep(sb.load_plan(budget_params(folder, seed=0, budget="40s", jitter=0.3)),
                          outputs=folder / "out", progress=False)
    return result, _answer(result), time.monotonic() - began


def test_the_known_best_is_decided_alone_within_the_budget(known) -> None:
    result, answer, wall = known
    assert wall <= 40 * 1.1 and answer["seconds"] <= 40
    (panel,) = answer["panels"]
    assert panel["decided"] and panel["decision"] == "decided"
    assert panel["best"] == "ngram-b8" and panel["confidence_set"] == ["ngram-b8"]
    assert panel["speedup_lo"] <= 1.35 <= panel["speedup_hi"]
    assert answer["stopped"] == "decided" and answer["rounds"] < 8  # it stopped early


def test_answer_json_has_the_documented_shape(known) -> None:
    _, answer, _ = known
    assert {"seconds", "panels", "budget_s", "rounds", "stopped"} <= set(answer)
    (panel,) = answer["panels"]
    assert set(panel["panel"]) == {"workload", "context", "output_tokens", "concurrency", "load",
                                   "temperature", "turn"}
    assert isinstance(panel["decided"], bool) and isinstance(panel["best"], str)
    assert all(isinstance(c, str) for c in panel["confidence_set"])
    for key in ("speedup", "speedup_lo", "speedup_hi"):
        assert isinstance(panel[key], float)
    assert all(isinstance(n, int) and n >= 3 for n in panel["requests"].values())
    assert set(panel["eliminated"]) == {"auto", "ngram-b4", "ngram-b16", "ngram-b32"}
    assert all(isinstance(r, int) and r >= 2 for r in panel["eliminated"].values())
    words = panel_words(from_doc(PanelAnswer, panel))
    line = words.line()
    assert line.startswith("chat/ctx32/c1: ngram-b8 best: every other config shown slower (95 %); "
                           "1.") and "decided in" in line
    assert panel["epsilon"] == 0 and 0 < panel["alpha"] <= panel["alpha_spent"] <= 0.05
    assert len(words.clauses) > SHOWN and line.count("; ") == SHOWN  # the rest one click away
    assert any(c.startswith("out: ") and "(round " in c for c in words.rest())
    assert answer_lines(AnswerDoc.from_dict(answer))[0].startswith("answer: 1/1 panels decided")


def test_unneeded_rounds_are_skipped_by_design(known) -> None:
    result, answer, _ = known
    rounds = answer["rounds"]
    later = [c for c in result.cells if c.spec.repeat >= rounds]
    assert later and all(c.status == "skipped" and c.verdict.by_design for c in later)
    assert {r.code for c in later for r in c.verdict.reasons} <= {"eliminated", "decided"}
    assert result.manifest["answer"]["rounds"] == rounds
    assert sb.answer_of(result).text().startswith("answer: 1/1")


def test_an_eliminated_config_is_not_started_again(tmp_path: Path) -> None:
    path = budget_params(tmp_path, seed=1, budget="90s", max_rounds=4,
                         speedups={4: 1.30, 8: 1.35, 32: 0.3}, jitter=0.3,
                         equivalence=0.001)  # b4, b8: still open
    result = sb.run_sweep(sb.load_plan(path), outputs=tmp_path / "out", progress=False)
    (panel,) = _answer(result)["panels"]
    gone = panel["eliminated"]["ngram-b32"]  # the round it left after
    servers = result.manifest["servers"]
    # each config's server is started once and kept up across the rounds (blocks.py): b32's
    # measured its cells of the rounds before it left, and none after
    assert servers["ngram-b32"]["starts"] == 1 and not any(".r" in k for k in servers)
    measured = {c.spec.repeat for c in result.cells
                if c.spec.config == "ngram-b32" and c.status != "skipped"}
    assert measured == set(range(gone))
    if gone < 4:
        assert any(c.spec.config == "ngram-b8" and c.spec.repeat == gone
                   and c.status != "skipped" for c in result.cells)  # the rest went on
        cell = next(c for c in result.cells if c.spec.config == "ngram-b32"
                    and c.spec.repeat == gone)
        assert cell.status == "skipped" and cell.verdict.reasons[0].code == "eliminated"


def test_a_crashed_config_is_out_with_its_reason_not_eliminated(tmp_path: Path) -> None:
    crash = fake_argv("--mode", "startup_crash", budget=True)
    path = budget_params(tmp_path, seed=3, budget="60s", max_rounds=3, speedups={8: 1.35},
                         extra=f"  - {{name: broken, method: draft, budgets: [4], argv: {crash}}}\n")
    result = sb.run_sweep(sb.load_plan(path), outputs=tmp_path / "out", progress=False)
    (panel,) = _answer(result)["panels"]
    assert "broken-b4" in panel["out"] and "broken-b4" not in panel["eliminated"]
    assert "server_failed" in panel["out"]["broken-b4"]
    assert "broken-b4" not in panel["confidence_set"]
    first = next(c for c in result.cells if c.spec.config == "broken-b4" and c.spec.repeat == 0)
    assert first.status == "crashed"
    later = [c for c in result.cells if c.spec.config == "broken-b4" and c.spec.repeat > 0]
    assert later and all(c.verdict.reasons[0].code == "config_out" for c in later)
    assert not any(k.startswith("broken-b4.r") for k in result.manifest["servers"])
    assert "broken-b4 (server_failed" in said(panel)


def test_a_spent_budget_stops_after_the_round_that_spent_it(tmp_path: Path) -> None:
    # near-ties with noisy tokens: one round's 3 requests a config cannot decide them, so the
    # round that spends the budget ends the sweep undecided (its last look spends all of α;
    # the clear b8 would be decided by that look, as it should be)
    path = budget_params(tmp_path, seed=2, budget="4s", speedups={4: 1.0, 8: 1.01, 16: 1.02},
                         jitter=0.3, equivalence=0.001)
    result = sb.run_sweep(sb.load_plan(path), outputs=tmp_path / "out", progress=False)
    answer = _answer(result)  # one round on a loaded machine, two on a quiet one
    assert answer["stopped"] == "budget" and 1 <= answer["rounds"] <= 2
    (panel,) = answer["panels"]
    assert not panel["decided"] and "undecided" in said(panel)
    skipped = [c for c in result.cells if c.status == "skipped"]
    assert skipped and all(c.verdict.by_design for c in skipped)
    assert any(r.code == "time_budget" for c in skipped for r in c.verdict.reasons)


def test_the_budget_predicts_slices_and_bounds_the_overshoot() -> None:
    now = [0.0]
    budget = Budget(60, slow_model(), clock=lambda: now[0])
    budget.learn("a", 10, 2, fixed=4)  # 4 s of start-up, 3 s a cell
    assert budget.estimate("a", 3) == pytest.approx(13)
    # a config not yet timed: the time model's start (5 s) and cell (22 s)
    assert budget.estimate("auto", 1) == pytest.approx(27)
    now[0] = 50
    assert budget.round_fits({"a": 2}) and not budget.spent  # 50 + 10 <= 60
    assert not budget.round_fits({"a": 2, "b": 1})  # 50 + 17 > 60
    now[0] = 56
    assert budget.slice_fits("a", 2)  # ends at 66: within 60 + 10 %
    assert not budget.slice_fits("a", 3)  # would end at 69
    now[0] = 60
    assert not budget.slice_fits("new", 0) and budget.spent  # the budget is spent


def test_looks_share_the_error_and_slow_configs_leave() -> None:
    # Pocock-type spending at the information seen; the last look spends what is left
    assert look_alpha(1, 4, 0.0, last=False) == pytest.approx(spent(0.25))
    assert look_alpha(2, 4, spent(0.25), last=True) == pytest.approx(0.05 - spent(0.25))
    with pytest.raises(ParamsError):
        look_alpha(0, 4, 0.0, last=False)
    truth = Truth(configs=(ConfigTruth("auto", gain_sigma=0.05),
                           ConfigTruth("ngram-b8", "ngram", 8, gain=1.6, gain_sigma=0.1),
                           ConfigTruth("ngram-b32", "ngram", 32, gain=0.5, gain_sigma=0.1)),
                  token_sd=0.02, drift_sd=0.01)
    cells = simulate_panel(truth, 1, 6, 6, np.random.default_rng(3))
    contest = Contention([c.spec for c in cells], rounds=6)
    (state,) = contest.panels.values()
    assert state.baseline == "auto" and state.members == ["auto", "ngram-b8", "ngram-b32"]
    for number in range(6):
        contest.observe([c for c in cells if c.spec.repeat <= number], number, float(number))
        if contest.done:
            break
    assert state.decision == "decided" and state.members == ["ngram-b8"]
    assert set(state.eliminated) == {"auto", "ngram-b32"} and contest.done
    assert contest.wanted([c.spec for c in cells], 5) == []  # nothing left to measure


def test_null_keeps_the_fixed_full_plan(tmp_path: Path) -> None:
    path = budget_params(tmp_path, seed=0, budget="40s")
    assert len(sb.load_plan(path).cells) == 5 * 8  # max_rounds rounds at most
    fixed = sb.load_plan(path, time_budget=None)
    assert fixed.params.time_budget_s is None and fixed.params.repeats == 1
    assert len(fixed.cells) == 5
    assert sb.load_plan(path, time_budget="10m").params.time_budget_s == 600
    assert "time budget" in repr(sb.load_plan(path)) and "time budget" not in repr(fixed)


@pytest.mark.parametrize(("text", "seconds"), [("10m", 600), ("90s", 90), ("1h30m", 5400),
                                                ("480", 480), (45, 45), ("none", None)])
def test_durations_parse(text: object, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


def test_cli_time_budget_parses_and_a_bad_one_names_the_flag(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = budget_params(tmp_path, seed=0, budget="40s")
    assert main(["run", "tp1", "-f", str(path), "--time-budget", "10m", "--dry-run"]) == 0
    assert "within a 600 s time budget" in capsys.readouterr().out
    assert main(["run", "tp1", "-f", str(path), "--time-budget", "none", "--dry-run"]) == 0
    assert "time budget" not in capsys.readouterr().out
    assert main(["run", "tp1", "-f", str(path), "--time-budget", "ten", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "--time-budget 'ten' is not a time budget" in err and "10m" in err


def test_a_bad_time_budget_in_params_names_the_key(tmp_path: Path) -> None:
    path = budget_params(tmp_path, seed=0, budget="soon")
    with pytest.raises(ParamsError, match="time_budget_s"):
        sb.load_plan(path)


def test_each_round_line_says_what_is_still_in_and_the_time_left() -> None:
    from specbench_lib.sweep.adaptive import round_line

    truth = Truth(configs=(ConfigTruth("auto", gain_sigma=0.05),
                           ConfigTruth("ngram-b8", "ngram", 8, gain=1.6, gain_sigma=0.1)))
    cells = simulate_panel(truth, 1, 3, 4, np.random.default_rng(5))
    contest = Contention([c.spec for c in cells], rounds=4)
    now = [30.0]
    budget = Budget(100, slow_model(), clock=lambda: now[0], began=0.0)
    contest.observe([c for c in cells if c.spec.repeat == 0], 0, 30.0)
    line = round_line(contest, 0, budget)
    assert line.startswith("round 1/4 · 30 s of 1 m 40 s, 1 m 10 s left")
    assert "code/ctx256/c1: in auto, ngram-b8" in line
    now[0] = 120.0
    contest.observe(cells, 3, 120.0)
    line = round_line(contest, 3, budget)
    assert "20 s over" in line and "code/ctx256/c1: decided ngram-b8" in line


def said(panel: dict[str, Any]) -> str:
    """A panel of answer.json in words: its line and the clauses one click away."""
    words = panel_words(from_doc(PanelAnswer, panel))
    return "; ".join([words.line(), *words.rest()])
