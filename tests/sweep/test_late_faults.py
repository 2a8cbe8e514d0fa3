"""Faults that still passed as numbers (issue 32), each driven through the real sweep on a
stand-in SGLang server process (tests/support/protocol_servers.py):

- a server that crashes after its config's last cell (``shutdown_crash``: every request served
  well, then its crash lines when it is stopped) leaves its cells ``ok``, but the run reports
  the config crashed (``crashed_after_cells``, from the manifest's ``late_crash``), with the
  ``known_bad`` entry that would skip it, which parses as one;
- a server that claims twice the tokens it streamed (``overclaim``) is ``invalid`` with
  ``token_count_mismatch``, never a speedup.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from paramsfiles import fake_plan, write_params
from ports import free_port

import specbench_lib as sb
from specbench_lib.model.params import KnownBad
from specbench_lib.runs.results import RunResult
from specbench_lib.sweep import preflight

PROTOCOL = Path(__file__).resolve().parents[1] / "support" / "protocol_servers.py"


def _params(tmp: Path, mode: str) -> Path:
    def argv(mode: str, budget: bool = True) -> str:
        return json.dumps(["{binary}", str(PROTOCOL), "sglang", "--port", "{port}",
                           "--mode", mode, *(["--budget", "{budget}", "--speculative-algorithm",
                                              "DFLASH"] if budget else [])])

    lying = {"name": "lying", "method": "ngram", "budgets": [4], "argv": json.loads(argv(mode))}
    plan = fake_plan(free_port(), argv=argv("ok", budget=False), phase=f"late{mode.replace('_', '')}",
                     engine={"ready_timeout_s": 10, "api": "sglang", "model": str(PROTOCOL),
                             "tokenizer": "server"},
                     configs=[lying, {"name": "auto", "method": "auto"}], contexts=[32],
                     warmup_requests=1)
    return write_params(tmp, plan, name=f"{mode}.yaml")


@pytest.fixture
def gpu_free(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "gpus_check", lambda tp: f"{tp} visible (test stand-in)")


def test_a_crash_after_the_last_cell_is_the_configs_with_its_known_bad_entry(
        tmp_path: Path, gpu_free: None) -> None:
    result = sb.run_sweep(sb.load_plan(_params(tmp_path, "shutdown_crash")),
                          outputs=tmp_path / "outputs", progress=False)
    assert isinstance(result, sb.SweepResult)
    # its requests had all ended well
    assert {c.status for c in result.cells} == {"ok"}, [c.verdict for c in result.cells]
    entry = result.manifest["servers"]["lying-b4"]
    assert "CUDA error" in entry["late_crash"]["line"]
    assert "late_crash" not in result.manifest["servers"]["auto"]
    read = RunResult(result.run_dir)  # as any later reader sees it
    (fault,) = read.config_faults
    assert (fault.config, fault.budget, fault.reason.code) == ("lying", 4, "crashed_after_cells")
    assert "CUDA error: an illegal instruction" in fault.reason.detail
    kb = KnownBad.model_validate(yaml.safe_load(fault.known_bad))
    assert (kb.config, kb.budgets, kb.engine_version) == ("lying", (4,), "0.5.23")
    assert "crashed_after_cells" in read.text() and "known_bad" in read.text()
    assert "crashed_after_cells" in read.html()
    from specbench_lib.report import export as report

    page = report.write_page(report.compare(result.run_id, root=tmp_path / "outputs"),
                             tmp_path / "results.html", [])
    assert "crashed_after_cells" in page.read_text()  # the report says it, at config level


def test_a_server_that_claims_more_tokens_than_it_streamed_is_invalid(
        tmp_path: Path, gpu_free: None) -> None:
    result = sb.run_sweep(sb.load_plan(_params(tmp_path, "overclaim")),
                          outputs=tmp_path / "outputs", progress=False)
    assert isinstance(result, sb.SweepResult)
    cells = {c.spec.series: c for c in result.cells}
    assert cells["auto"].status == "ok"
    lying = cells["lying"]
    assert lying.status == "invalid" and lying.metrics is None
    assert "token_count_mismatch" in lying.verdict.codes, lying.verdict.reasons
    assert "4 tokens streamed, server reported 8" in " ".join(lying.verdict.reasons)
    assert set(result.table()["config"]) == {"auto"}  # never a speedup
