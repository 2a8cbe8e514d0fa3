"""Issue 12's fault classes, each driven through the real sweep as a server process.

Two sweeps, each through the argv-template engine (``run_sweep`` → preflight → process groups →
readiness → server info → warmup → prompts → dispatch → validation → storage → results):

- llama.cpp protocol (tests/fake_server.py): malformed *streams*, which end as reasons on their
  requests (``error_in_stream``, ``connection_error``, ``empty_output``, ``incomplete_stream``);
- SGLang protocol (tests/protocol_servers.py): malformed streams and malformed or missing
  *control* answers (server info, ``/tokenize``), which end as a config-level ``invalid``
  (``missing_endpoint`` for a 404, ``bad_answer`` otherwise, a trickle named by its limit).

In both, one config per fault comes first and a healthy ``auto`` config last: the sweep must go on
to it and measure it ``ok``. No failure may reach ``results.csv`` or the report as a number, and no
server process may be left running. The report's marking of failed cells is checked here too.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import specbench_lib as sb
from specbench_lib import preflight, report

ROOT = Path(__file__).resolve().parent.parent
FAKE = ROOT / "tests" / "fake_server.py"
PROTOCOL = ROOT / "tests" / "protocol_servers.py"
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
}
# config → (protocol_servers sglang mode, verdict, first reason code, words in its detail)
SGLANG_FAULTS = {
    "metastr": ("meta_string", "invalid", "error_in_stream", "meta_info"),
    "utf8": ("bad_utf8", "invalid", "error_in_stream", "not UTF-8"),
    "doneonly": ("done_only", "invalid", "empty_output", "0 completion tokens"),
    "htmlinfo": ("html_info", "invalid", "bad_answer", "/server_info"),
    "trickleinfo": ("trickle_info", "invalid", "bad_answer",
                    "within 1 s (engine.control_timeout_s)"),
    "trickletok": ("trickle_tokenize", "invalid", "bad_answer",
                   "within 1 s (engine.control_timeout_s)"),
    "notokenize": ("no_tokenize", "invalid", "missing_endpoint", "engine.tokenizer"),
    "noinfo": ("no_info", "invalid", "missing_endpoint", "/server_info"),
}
CONFIG_LEVEL = {"bad_answer", "missing_endpoint"}  # decided for the config, no request kept


def _params(tmp: Path, *, name: str, api: str, port: int, program: list[str],
            faults: dict[str, tuple[str, str, str, str]], extra: str = "") -> Path:
    def argv(mode: str, budget: bool = True) -> str:
        return json.dumps(["{binary}", *program, "--port", "{port}", "--mode", mode,
                           *(["--budget", "{budget}"] if budget else [])])

    configs = "\n".join(f"  - {{name: {config}, method: ngram, budgets: [{4 + i}], "
                        f"argv: {argv(mode)}}}"
                        for i, (config, (mode, *_)) in enumerate(faults.items()))
    path = tmp / f"{name}.yaml"
    path.write_text(f"""phase: {name}
engine:
  kind: template
  api: {api}
  binary: {sys.executable}
  model: {program[0]}
  port: {port}
  context: 2048
  ready_timeout_s: 5
  control_timeout_s: 1
{extra}  argv_template: {argv('ok', budget=False)}
configs:
{configs}
  - {{name: auto, method: auto}}
workloads:
  - {{name: code, source: humaneval}}
contexts: [{', '.join(map(str, CONTEXTS))}]
concurrency: [1]
output_tokens: 8
requests_per_cell: 2
warmup_requests: 1
timeouts: {{first_token_s: 3, between_tokens_s: 2, request_s: 6}}
""")
    return path


def _servers(script: str, port: int) -> list[int]:
    """Pids of test servers from ``script`` on ``port`` still running."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if proc.name.isdigit() and any(script.encode() in part for part in cmdline) \
                and str(port).encode() in cmdline:
            found.append(int(proc.name))
    return found


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
                     extra="  tokenizer: server\n")
    with pytest.MonkeyPatch.context() as patch:  # SGLang is a GPU engine; these servers need none
        patch.setattr(preflight, "_gpus", lambda tp: f"{tp} visible (test stand-in)")
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
            if code in CONFIG_LEVEL:  # the config's verdict, with nothing measured under it
                assert cell.verdict.codes == {code} and not cell.requests, (mode, cell.verdict)
            else:  # the fault is on the requests themselves: each one kept with its reason
                assert cell.requests and all(
                    r.error_kind == code or (r.error_kind is None and code in (
                        "empty_output", "incomplete_stream")) for r in cell.requests), mode
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
    assert sglang.manifest["attempts"][-1]["elapsed_s"] < 40


@pytest.mark.parametrize("which", ["streams", "sglang"])
def test_no_failure_is_a_number_and_nothing_is_left_running(
        which: str, request: pytest.FixtureRequest) -> None:
    result: sb.SweepResult = request.getfixturevalue(which)
    _check_no_number(result)
    script, port = (("fake_server.py", STREAM_PORT) if which == "streams"
                    else ("protocol_servers.py", SGLANG_PORT))
    assert _servers(script, port) == []


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
    assert {b["config"] for b in summary["best"]} == {"auto"}  # only ok cells are ranked
    # LaTeX: every failed config has its rows, marked with the verdict and first reason's code
    lines = [line for line in tex.splitlines() if line.rstrip().endswith("\\\\")]
    for run, cell in failed:
        code = cell.verdict.reasons[0].code.replace("_", "\\_")
        rows = [line for line in lines if f" {cell.spec.config} &" in line
                and f"& {cell.spec.context} &" in line]
        assert rows, cell.cell_id
        assert any(f"{cell.status}: {code}" in line for line in rows), (cell.cell_id, rows)
        for line in rows:  # no number where a failed cell's value would be
            values = [v.strip() for v in line.rstrip("\\ ").split("&")][4:7]
            assert values == ["--", "--", "--"], line
    assert tex.count("\\begin{tabular}") == 2  # one table per phase
