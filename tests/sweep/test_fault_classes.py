"""Issue 12's fault classes, each driven through the real sweep as a server process.

Two sweeps, each through the argv-template engine (``run_sweep`` → preflight → process groups →
readiness → server info → warmup → prompts → dispatch → validation → storage → results):

- llama.cpp protocol (tests/support/fake_server.py): malformed *streams*, which end as reasons on their
  requests (``error_in_stream``, ``connection_error``, ``empty_output``, ``incomplete_stream``);
- SGLang protocol (tests/support/protocol_servers.py): malformed streams and malformed or missing
  *control* answers (server info, ``/tokenize``), which end as a config-level ``invalid``
  (``missing_endpoint`` for a 404, ``control_timeout`` for a trickle, named by its limit,
  ``bad_answer`` otherwise).

In both, one config per fault comes first and a healthy ``auto`` config last: the sweep must go on
to it and measure it ``ok``. No failure may reach ``results.csv`` or the report as a number, and no
server process may be left running. The report's marking of failed cells is checked here too.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from paramsfiles import DROP, fake_plan, write_params

import specbench_lib as sb
from specbench_lib.analysis.validate import request_problems
from specbench_lib.report import export as report
from specbench_lib.sweep import preflight

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "support" / "fake_server.py"
PROTOCOL = ROOT / "tests" / "support" / "protocol_servers.py"
STREAM_PORT = 8201
SGLANG_PORT = 8202
CONTEXTS = (16, 32)

# config → (fake_server mode, verdict, first reason code, words in that reason's detail)
STREAM_FAULTS = {
    "utf8": ("bad_utf8", "invalid", "error_in_stream", "not UTF-8"),
    "length": ("bad_length", "invalid", "connection_error", "bad Content-Length"),
    "chunk": ("bad_chunk", "invalid", "connection_error", "bad chunk size"),
    "doneonly": ("done_only", "invalid", "empty_output", "0 completion tokens"),
    "noevents": ("no_events", "invalid", "empty_output", "0 completion tokens"),
    "nofinal": ("no_final", "invalid", "incomplete_stream", "without final statistics"),
    # a quarter of the tokens streamed, all claimed: the tokens received are the truth
    "overclaim": ("overclaim", "invalid", "token_count_mismatch", "server reported"),
    "warmcrash": ("warmup_crash", "crashed", "server_died", "during its warmup"),
}
# config → (protocol_servers sglang mode, verdict, first reason code, words in its detail)
SGLANG_FAULTS = {
    "metastr": ("meta_string", "invalid", "error_in_stream", "meta_info"),
    "utf8": ("bad_utf8", "invalid", "error_in_stream", "not UTF-8"),
    "doneonly": ("done_only", "invalid", "empty_output", "0 completion tokens"),
    "htmlinfo": ("html_info", "invalid", "bad_answer", "/server_info"),
    "trickleinfo": ("trickle_info", "invalid", "control_timeout",
                    "within 1 s (engine.control_timeout_s)"),
    "trickletok": ("trickle_tokenize", "invalid", "control_timeout",
                   "within 1 s (engine.control_timeout_s)"),
    "notokenize": ("no_tokenize", "invalid", "missing_endpoint", "engine.tokenizer"),
    "noinfo": ("no_info", "invalid", "missing_endpoint", "/server_info"),
    # half the tokens streamed, twice as many claimed: the ids that arrived are the truth
    "overclaim": ("overclaim", "invalid", "token_count_mismatch", "server reported"),
}
# decided for the config, no request kept
CONFIG_LEVEL = {"bad_answer", "control_timeout", "missing_endpoint"}


def _params(tmp: Path, *, name: str, api: str, port: int, program: list[str],
            faults: dict[str, tuple[str, str, str, str]], engine: Mapping[str, Any] = {}) -> Path:
    def argv(mode: str, budget: bool = True) -> str:
        return json.dumps(["{binary}", *program, "--port", "{port}", "--mode", mode,
                           *(["--budget", "{budget}"] if budget else [])])

    configs = [{"name": config, "method": "ngram", "budgets": [4 + i], "argv": json.loads(argv(mode))}
               for i, (config, (mode, *_)) in enumerate(faults.items())]
    plan = fake_plan(port, argv=argv("ok", budget=False), phase=name,
                     engine={"ready_timeout_s": 5, "api": api, "model": program[0],
                             "control_timeout_s": 1, **engine},
                     configs=[*configs, {"name": "auto", "method": "auto"}], contexts=list(CONTEXTS),
                     warmup_requests=1,
                     timeouts={"first_token_s": 3, "between_tokens_s": 2, "request_s": 6},
                     max_coalesced_fraction=DROP, max_coalesced_first_fraction=DROP, host=DROP)
    return write_params(tmp, plan, name=f"{name}.yaml")


def _left_running(result: sb.SweepResult) -> dict[str, int]:
    """The servers this run started (each its own process group, named in the manifest) of which
    any process is still there. Only this run's: other sessions may sweep on the same port."""
    left = {}
    for label, record in result.manifest["servers"].items():
        try:
            os.killpg(record["pid"], 0)
        except ProcessLookupError:
            continue
        left[label] = record["pid"]
    return left


def _sweep(params: Path, outputs: Path) -> sb.SweepResult:
    """The sweep, retried while another specbench run holds the fixed port."""
    for attempt in range(20):
        try:
            result = sb.run_sweep(sb.load_plan(params), outputs=outputs, progress=False)
        except sb.PreflightError as exc:
            if "port" not in str(exc) or attempt == 19:
                raise
            time.sleep(3)
            continue
        assert isinstance(result, sb.SweepResult)
        return result
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def streams(tmp_path_factory: pytest.TempPathFactory) -> sb.SweepResult:
    tmp = tmp_path_factory.mktemp("stream_faults")
    params = _params(tmp, name="streamfaults", api="llamacpp", port=STREAM_PORT,
                     program=[str(FAKE)], faults=STREAM_FAULTS)
    return _sweep(params, tmp / "outputs")


@pytest.fixture(scope="module")
def sglang(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sb.SweepResult]:
    tmp = tmp_path_factory.mktemp("sglang_faults")
    params = _params(tmp, name="sglangfaults", api="sglang", port=SGLANG_PORT,
                     program=[str(PROTOCOL), "sglang"], faults=SGLANG_FAULTS,
                     engine={"tokenizer": "server"})
    with pytest.MonkeyPatch.context() as patch:  # SGLang is a GPU engine; these servers need none
        patch.setattr(preflight, "gpus_check", lambda tp: f"{tp} visible (test stand-in)")
        yield _sweep(params, tmp / "outputs")


def _check_verdicts(result: sb.SweepResult, faults: dict[str, tuple[str, str, str, str]]) -> None:
    cells = {c.cell_id: c for c in result.cells}
    assert len(cells) == len(CONTEXTS) * (len(faults) + 1)
    for i, (config, (mode, status, code, words)) in enumerate(faults.items()):
        for ctx in CONTEXTS:
            cell = cells[f"{config}-b{4 + i}__code__ctx{ctx}__c1"]
            assert cell.status == status, (mode, cell.verdict)
            first = cell.verdict.reasons[0]
            assert first.code == code, (mode, cell.verdict.reasons)
            assert words in first.detail, (mode, first)
            assert cell.metrics is None
            if status == "crashed":  # what a crash keeps: test_a_crash_during_warmup_…
                continue
            if code in CONFIG_LEVEL:  # the config's verdict, with nothing measured under it
                assert cell.verdict.codes == {code} and not cell.requests, (mode, cell.verdict)
                error = result.manifest["servers"][cell.spec.config]["error"]
                # the manifest keeps the server's words, the reason adds what to do
                assert first.detail.startswith(error.split(": ", 1)[1]), (mode, error)
                continue
            if code == "empty_output":  # nor did the (speculative) server count any drafts
                assert cell.verdict.codes == {"empty_output", "missing_spec_stats"}, mode
            # the fault is on the requests themselves: the warmup's and the cell's, each kept
            # with its reason as the first (a transport error as the only one)
            assert first.detail.startswith("in the server's warmup"), first
            assert len(cell.measured) == 2 and any(r.warmup for r in cell.requests)
            for rec in cell.requests:
                problems = request_problems(rec)
                assert problems and problems[0].code == code, (mode, problems)
                if rec.error_kind is not None:
                    assert rec.error_kind == code and len(problems) == 1, (mode, problems)
            assert any(r.code == code and not r.detail.startswith("in the server's warmup")
                       for r in cell.verdict.reasons), (mode, cell.verdict.reasons)
    for ctx in CONTEXTS:  # the healthy config after every fault: measured, ok
        auto = cells[f"auto__code__ctx{ctx}__c1"]
        assert auto.status == "ok", auto.verdict
        assert auto.metrics is not None and auto.metrics["output_tok_s"] > 0


def _check_no_number(result: sb.SweepResult) -> None:
    with open(result.run_dir / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(r["config"] for r in rows) == ["auto"] * len(CONTEXTS)
    assert all(float(r["output_tok_s"]) > 0 for r in rows)
    assert set(result.table()["config"]) == {"auto"}
    assert result.manifest["status"] == "complete"
    assert not (result.run_dir / ".lock").exists()


def test_malformed_streams_end_as_reasons_on_their_requests(streams: sb.SweepResult) -> None:
    _check_verdicts(streams, STREAM_FAULTS)


def test_a_crash_during_warmup_is_crashed_with_its_line_and_phase(streams: sb.SweepResult) -> None:
    """Not ``server_failed: Connection refused``: the dead server, the log line and its phase."""
    budget = 4 + list(STREAM_FAULTS).index("warmcrash")
    for ctx in CONTEXTS:
        cell = streams.cell(f"warmcrash-b{budget}__code__ctx{ctx}__c1")
        reasons = cell.verdict.reasons
        assert [r.code for r in reasons[:2]] == ["server_died", "log"], reasons
        assert reasons[1].detail == ("Scheduler hit an exception: CUDA error: an illegal "
                                     "instruction was encountered (in the server log during "
                                     "warmup)")
        assert cell.facts.returncode == 134 and cell.facts.server_alive is False
        assert "CUDA error" in cell.facts.log_excerpt
        [warm] = cell.requests  # the warmup request, kept; no cell request was sent
        assert warm.warmup and warm.error_kind == "connection_error"


def test_sglang_malformed_and_missing_answers_end_as_verdicts(sglang: sb.SweepResult) -> None:
    _check_verdicts(sglang, SGLANG_FAULTS)


def test_a_missing_tokenize_names_the_fix(sglang: sb.SweepResult) -> None:
    cell = sglang.cell("notokenize-b10__code__ctx16__c1")
    detail = cell.verdict.reasons[0].detail
    assert "/tokenize" in detail and "status 404" in detail and "pip install tokenizers" in detail


def test_trickling_control_calls_end_at_their_limit(sglang: sb.SweepResult) -> None:
    """Each trickling config took about its 1 s limit, not the server's 120 s trickle."""
    servers = sglang.manifest["servers"]
    for config in ("trickleinfo", "trickletok"):
        label = next(k for k in servers if k.startswith(config))
        record = servers[label]
        assert "within 1 s (engine.control_timeout_s)" in record["error"], record
    attempt = sglang.manifest["attempts"][-1]
    took = dt.datetime.fromisoformat(attempt["ended"]) - dt.datetime.fromisoformat(attempt["started"])
    assert took.total_seconds() < 40, attempt


@pytest.mark.parametrize("which", ["streams", "sglang"])
def test_no_failure_is_a_number_and_nothing_is_left_running(
        which: str, request: pytest.FixtureRequest) -> None:
    result: sb.SweepResult = request.getfixturevalue(which)
    _check_no_number(result)
    assert len(result.manifest["servers"]) == len(
        STREAM_FAULTS if which == "streams" else SGLANG_FAULTS) + 1
    assert _left_running(result) == {}


# --- the report marks failed cells instead of leaving them out --------------------------------

def test_report_files_mark_every_failed_cell(sglang: sb.SweepResult, streams: sb.SweepResult,
                                             tmp_path: Path) -> None:
    comparison = report.Comparison([streams, sglang])
    tex = report.write_latex(comparison, tmp_path / "results.tex").read_text()
    summary = json.loads(report.write_summary(comparison, tmp_path / "c.json").read_text())
    failed = [(r, c) for r in (streams, sglang) for c in r.cells if c.status != "ok"]
    assert len(failed) == len(CONTEXTS) * (len(STREAM_FAULTS) + len(SGLANG_FAULTS))
    assert len(summary["failures"]) == len(failed)
    by_cell = {(f["run_id"], f["cell"]): f for f in summary["failures"]}
    for run, cell in failed:
        entry = by_cell[(run.run_id, cell.cell_id)]
        assert entry["phase"] == run.phase and entry["verdict"] == cell.status
        assert entry["reasons"] == list(cell.verdict.reasons) and entry["reasons"]
    assert {b["best"] for b in summary["best"]} == {"auto"}  # only ok cells are ranked
    # LaTeX: a table per phase, where each failed cell is a row marked with its verdict and
    # first reason, with -- for every value
    tables: dict[str, str] = {}  # a table per phase x workload x context
    for part in tex.split("\\begin{longtable}")[1:]:
        phase = part.split("\\caption{")[1].split(",")[0]
        tables[phase] = tables.get(phase, "") + part
    assert set(tables) == {streams.phase, sglang.phase}
    assert tex.count("\\begin{longtable}") == 2 * len(CONTEXTS)
    for run, cell in failed:
        code = cell.verdict.reasons[0].code.replace("_", "\\_")
        spec = cell.spec
        table = [t for t in tables[run.phase].split("\\end{longtable}")
                 if f", context {spec.context}:" in t]
        rows = [line for line in table[0].splitlines()
                if line.startswith(f"{spec.concurrency} & {spec.config} &")]
        assert len(rows) == 1, (cell.cell_id, rows)
        values = [v.strip() for v in rows[0].removesuffix("\\\\").split("&")]
        assert values[2:] == ["--"] * 5 + [f"{cell.status}: {code}"], rows[0]
    for run in (streams, sglang):  # the ok cells keep their numbers, marked ok
        auto = [line for line in tables[run.phase].splitlines() if " & auto & " in line]
        assert len(auto) == len(CONTEXTS) and all(line.rstrip().endswith("& ok \\\\")
                                                  for line in auto), auto
        assert all(float(line.split("&")[2]) > 0 for line in auto), auto
