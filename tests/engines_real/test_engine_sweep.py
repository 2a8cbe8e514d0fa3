"""A real sweep: papermill executes notebooks/tp1.ipynb against the real llama-server (and
plain papermill, on fake servers)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cellfactory import not_ok
from fakeparams import LENIENT_HOST, SMALL_CELLS, fake_argv, fake_engine
from paramsfiles import write_params
from ports import free_port
from procs import pids_with

from specbench_lib.model.records import CellRecord

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny.yaml"
BIN = Path(sys.executable).parent
# for the tests below that judge what a sweep does around its cells (a kill, a hung start,
# Ctrl-C and resume), not what the cells measured: short answers and a short warmup, a
# quarter of tiny.yaml's decode (its 64 tokens a request checked by the CLI test above)
SHORT = {"output_tokens": 16, "warmup_output_tokens": 4}


def only_run_dir(outputs: Path) -> Path:
    runs = list((outputs / "runs").iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def read_cells(run_dir: Path) -> dict[str, CellRecord]:
    return {p.stem: CellRecord.from_dict(json.loads(p.read_text()))
            for p in (run_dir / "cells").glob("*.json")}


@pytest.mark.engine
def test_cli_runs_the_phase_notebook_into_a_run_dir(engine, outputs: Path) -> None:
    done = subprocess.run([str(BIN / "specbench"), "run", "tp1", "--params", str(TINY)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT,
                          env={**os.environ, "SPECBENCH_OUTPUTS": str(outputs)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = only_run_dir(outputs)
    assert f"run directory: {run_dir}" in done.stdout

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["phase"] == "tiny"
    assert manifest["notebook"] == "tp1.ipynb"
    assert manifest["engine"]["kind"] == "llamacpp" and manifest["engine"]["version"]
    assert manifest["model"]["size"] == engine[1].stat().st_size
    assert set(manifest["environment"]["git"]) == {"commit", "dirty"}
    assert manifest["started"] and manifest["ended"] and manifest["elapsed_s"] > 0
    assert set(manifest["servers"]) == {"auto", "ngram-b8", "ngram-b16"}
    ngram_argv = manifest["servers"]["ngram-b16"]["argv"]
    assert ngram_argv[ngram_argv.index("--spec-ngram-mod-n-max") + 1] == "16"
    assert manifest["servers"]["auto"]["context_per_request"] == 2048
    assert manifest["servers"]["auto"]["warmup"]["errors"] == []

    cells = read_cells(run_dir)
    expected = {f"{cfg}__code__ctx{ctx}__c2" for cfg in ("auto", "ngram-b8", "ngram-b16")
                for ctx in (128, 2000)}
    assert set(cells) == expected
    assert manifest["verdict_counts"] == {"ok": 3, "invalid": 3, "crashed": 0, "skipped": 0}
    for cell_id, cell in cells.items():
        if "ctx2000" in cell_id:
            assert cell.status == "invalid"
            assert cell.verdict.reasons[0].startswith("context_overflow: prompt 2000")
            assert cell.metrics is None and not cell.requests
        else:
            assert cell.status == "ok", cell.verdict
            assert cell.metrics["output_tok_s"] > 0
            assert len(cell.measured) == 3 and len(cell.requests) == 4  # and the server's warmup
            for req in cell.measured:
                assert req.final.prompt_tokens == 128
                assert req.final.completion_tokens == 64
            assert len({p.sha for p in cell.prompts}) == 3

    with open(run_dir / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(r["config"] for r in rows) == ["auto", "ngram-b16", "ngram-b8"]
    assert all(float(r["output_tok_s"]) > 0 and r["context"] == "128" for r in rows)
    assert float(next(r for r in rows if r["config"] == "auto")["speedup"]) == 1.0

    assert (run_dir / "plots" / "throughput_vs_budget.png").stat().st_size > 10_000
    assert (run_dir / "logs" / "ngram-b8.log").stat().st_size > 0
    notebook = json.loads((run_dir / "tp1.ipynb").read_text())
    assert notebook["metadata"]["papermill"]["parameters"]["params_file"] == str(TINY)
    errors = [o for c in notebook["cells"] for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert errors == []
    outputs_by_type = [o for c in notebook["cells"] for o in c.get("outputs", [])]
    assert any("verdict" in "".join(o.get("data", {}).get("text/html", "")) for o in outputs_by_type)
    assert any("image/png" in o.get("data", {}) for o in outputs_by_type)
    for name in ("speedup_vs_budget", "acceptance_vs_budget", "ttft_vs_budget", "itl_vs_budget"):
        assert (run_dir / "plots" / f"{name}.png").exists()

    page = (run_dir / "tp1.html").read_text()
    assert page.count("data:image/png;base64") >= 5 and "context_overflow" in page
    assert "import specbench_lib" not in page
    index = (outputs / "index.html").read_text()
    assert run_dir.name in index and "tp1.html" in index

    report = subprocess.run([str(BIN / "papermill"), "notebooks/report.ipynb", str(outputs / "r.ipynb"),
                             "-p", "runs", run_dir.name], capture_output=True, text=True,
                            timeout=300, cwd=ROOT, env={**os.environ, "SPECBENCH_OUTPUTS": str(outputs)})
    assert report.returncode == 0, report.stderr[-3000:]
    tex = (outputs / "report" / "results.tex").read_text()
    assert "\\begin{tabular}" in tex and "ngram-b16" in tex and "tiny" in tex
    best = json.loads((outputs / "report" / "comparison.json").read_text())["best"]
    assert {b["context"] for b in best} == {128}


def test_plain_papermill_with_one_budget(outputs: Path, tmp_path: Path) -> None:
    """The design card's ``papermill tp1.ipynb out.ipynb -p budget 8``, on fake servers (what
    it checks is the notebook's front door, not the engine: the CLI test above runs that)."""
    params = tmp_path / "fake.yaml"
    params.write_text(f"""phase: tiny
{fake_engine(free_port(), fake_argv(interval=0.002))}configs:
  - {{name: auto, method: auto}}
  - {{name: ngram, method: ngram, budgets: [8, 16], argv: {fake_argv(interval=0.002, budget=True)}}}
{SMALL_CELLS}{LENIENT_HOST}""")
    out = tmp_path / "out.ipynb"
    done = subprocess.run([str(BIN / "papermill"), "--inject-paths", "notebooks/tp1.ipynb", str(out),
                           "-p", "params_file", str(params), "-p", "budget", "8"],
                          capture_output=True, text=True, timeout=900, cwd=ROOT,
                          env={**os.environ, "SPECBENCH_OUTPUTS": str(outputs)})
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = only_run_dir(outputs)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["budget"] == 8 and set(manifest["servers"]) == {"auto", "ngram-b8"}
    assert manifest["notebook"] == "out.ipynb"
    assert {c.spec.config for c in read_cells(run_dir).values()} == {"auto", "ngram-b8"}
    copied = run_dir / "out.ipynb"
    deadline = time.monotonic() + 20
    while not copied.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert copied.exists(), "the executed notebook was not copied into the run directory"
    assert json.loads(copied.read_text())["metadata"]["papermill"]["parameters"]["budget"] == 8


@pytest.mark.engine
def test_missing_model_is_a_clear_error_and_measures_nothing(engine, outputs: Path,
                                                            tmp_path: Path) -> None:
    params = write_params(tmp_path, engine={"model": str(tmp_path / "shm" / "model.gguf")})
    import specbench_lib as sb

    with pytest.raises(sb.PreflightError) as err:
        sb.run_sweep(sb.load_plan(params))
    assert err.value.what == "model" and "model.gguf" in str(err.value)
    assert not (outputs / "runs").exists()


@pytest.mark.engine
def test_server_killed_mid_sweep_crashes_its_cells_only(engine, outputs: Path,
                                                        tmp_path: Path) -> None:
    import os
    import signal
    import threading

    import specbench_lib as sb

    params = write_params(tmp_path, contexts=[128, 256], concurrency=[1], **SHORT)
    plan = sb.load_plan(params, budget=8)
    box: dict = {}
    sweep = threading.Thread(target=lambda: box.setdefault("r", sb.run_sweep(plan, progress=False)))
    sweep.start()
    killed = None
    deadline = time.monotonic() + 300
    while killed is None and time.monotonic() < deadline and sweep.is_alive():
        manifests = list((outputs / "runs").glob("*/manifest.json"))
        servers = json.loads(manifests[0].read_text()).get("servers", {}) if manifests else {}
        if "warmup" in servers.get("ngram-b8", {}):
            killed = servers["ngram-b8"]["pid"]
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.05)
    sweep.join(timeout=300)
    assert killed is not None, "the ngram server never became ready"
    result = box["r"]
    cells = {c.cell_id: c for c in result.cells}
    assert [cells[f"auto__code__ctx{c}__c1"].status for c in (128, 256)] == ["ok", "ok"]
    for ctx in (128, 256):
        cell = cells[f"ngram-b8__code__ctx{ctx}__c1"]
        assert cell.status == "crashed", cell.verdict
        assert cell.metrics is None
        assert cell.facts.returncode == -9
        assert "# argv:" in cell.facts.log_excerpt and "llama-server" in cell.facts.log_excerpt
    assert result.manifest["status"] == "complete"
    assert sorted(result.table()["config"]) == ["auto", "auto"]
    with pytest.raises(ProcessLookupError):
        os.kill(killed, 0)
    assert server_processes(8191) == []


@pytest.mark.engine
def test_port_in_use_is_a_clear_error_before_anything_starts(engine, outputs: Path) -> None:
    import socket

    import specbench_lib as sb

    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAIT of earlier tests
        squatter.bind(("127.0.0.1", 8191))
        squatter.listen()
        with pytest.raises(sb.PreflightError, match="port 8191 on 127.0.0.1 is in use") as err:
            sb.run_sweep(sb.load_plan(TINY), progress=False)
    assert err.value.what == "port"
    assert not (outputs / "runs").exists()
    assert server_processes(8191) == []


@pytest.mark.engine
def test_server_never_ready_crashes_its_cells_and_the_next_config_runs(engine, outputs: Path,
                                                                       tmp_path: Path) -> None:
    import specbench_lib as sb

    params = write_params(tmp_path, engine={"ready_timeout_s": 4}, contexts=[128], concurrency=[1],
                          **SHORT,
                          configs=[{"name": "auto", "method": "auto", "argv": ["sleep", "30"]},
                                   {"name": "ngram", "method": "ngram", "budgets": [8]}])
    started = time.monotonic()
    result = sb.run_sweep(sb.load_plan(params), progress=False)
    assert time.monotonic() - started < 40
    cells = {c.spec.config: c for c in result.cells}
    hung = cells["auto"]
    assert hung.status == "crashed"
    assert hung.verdict.reasons[0] == "server_failed: server auto not ready within 4 s"
    assert hung.facts.returncode is None and "# argv: sleep 30" in hung.facts.log_excerpt
    assert cells["ngram-b8"].status == "ok", cells["ngram-b8"].verdict
    sleeper = result.manifest["servers"]["auto"]["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(sleeper, 0)
    assert server_processes(8191) == []


def server_processes(port: int) -> list[int]:
    return pids_with("--port\0" + str(port) + "\0")


@pytest.mark.engine
def test_sigint_then_resume_gives_the_planned_cells_once(engine, outputs: Path,
                                                         tmp_path: Path) -> None:
    import signal

    import specbench_lib as sb

    params = write_params(tmp_path, contexts=[128, 256], concurrency=[1], **SHORT, known_bad=[
        {"config": "ngram", "budgets": [16], "reason": "crashes at start-up on SM120"}])
    # Ctrl-C's KeyboardInterrupt even where this suite runs with SIGINT ignored (a background
    # job; CI), which the child would inherit; SIGUSR1: every thread's stack, if it hangs
    script = ("import faulthandler, signal\n"
              "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
              "faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
              "import specbench_lib as sb\n"
              f"sb.run_sweep(sb.load_plan({str(params)!r}), run_id='r1', progress=False)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             env={**os.environ, "SPECBENCH_OUTPUTS": str(outputs)})
    try:
        first = outputs / "runs" / "r1" / "cells" / "auto__code__ctx128__c1.json"
        deadline = time.monotonic() + 120
        while not first.exists() and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert first.exists(), child.communicate()[0]
        child.send_signal(signal.SIGINT)
        try:
            output = child.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGUSR1)
            time.sleep(2)
            child.kill()
            pytest.fail("the sweep ignored SIGINT for 60 s; its threads:\n" + child.communicate()[0])
    finally:  # a failure here must not leave a server on the port for the next test
        if child.poll() is None:
            child.kill()
            child.wait()
        for pid in server_processes(8191):
            os.kill(pid, signal.SIGKILL)
    assert child.returncode != 0 and "KeyboardInterrupt" in output
    run_dir = outputs / "runs" / "r1"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert not (run_dir / ".lock").exists()
    assert server_processes(8191) == []
    before = {p.name: p.read_bytes() for p in (run_dir / "cells").glob("*.json")}
    assert "auto__code__ctx128__c1.json" in before
    assert all(json.loads(b)["verdict"]["status"] == "ok" for b in before.values())

    result = sb.run_sweep(sb.load_plan(params), resume="r1", progress=False)
    plan = sb.load_plan(params)
    after = {p.name: p.read_bytes() for p in (run_dir / "cells").glob("*.json")}
    assert set(after) == {f"{c.cell_id}.json" for c in plan.cells}
    for name, content in before.items():
        assert after[name] == content, f"{name} was measured again"
    assert not (run_dir / "cells" / "history").exists()
    skipped = [c for c in result.cells if c.spec.config == "ngram-b16"]
    assert [c.status for c in skipped] == ["skipped", "skipped"]
    assert list(skipped[0].verdict.reasons) == ["known_bad: crashes at start-up on SM120"]
    assert not (run_dir / "logs" / "ngram-b16.log").exists()
    assert result.counts() == {"ok": 4, "invalid": 0, "crashed": 0, "skipped": 2}, not_ok(result)
    manifest = result.manifest
    assert manifest["status"] == "complete"
    assert [a["status"] for a in manifest["attempts"]] == ["interrupted", "complete"]
    assert set(manifest["attempts"][1]["kept_cells"]) == {n[:-5] for n in before}
    assert server_processes(8191) == []

    again = sb.run_sweep(sb.load_plan(params), reuse=True, progress=False)
    assert again.run_dir != run_dir
    assert again.counts() == {"ok": 4, "invalid": 0, "crashed": 0, "skipped": 2}, not_ok(again)
    assert again.manifest["servers"] == {}
    reused = again.manifest["attempts"][0]["reused_from"]
    assert reused == {c.cell_id: "r1" for c in result.cells if c.status == "ok"}
    assert all(c.provenance.reused_from == "r1" for c in again.cells if c.status == "ok")


@pytest.mark.engine
def test_overflow_past_a_bypassed_guard_is_http_400_with_the_server_message(
        engine, outputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import specbench_lib as sb
    from specbench_lib.model import plan as plan_module
    from specbench_lib.prompts import promptbook
    from specbench_lib.sweep import cellmeasure

    monkeypatch.setattr(cellmeasure, "context_guard", lambda **_: None)
    monkeypatch.setattr(plan_module, "_require_context_room", lambda *_: None)  # both guards
    monkeypatch.setattr(promptbook, "refused_everywhere", lambda *_: False)  # and its prompts
    params = write_params(tmp_path, contexts=[2048], concurrency=[1], warmup_requests=0)
    result = sb.run_sweep(sb.load_plan(params, budget=8), progress=False)
    assert result.counts()["invalid"] == 2
    for cell in result.cells:
        reasons = cell.verdict.reasons
        assert reasons[0].startswith("http_400") and "exceed_context_size_error" in reasons[0]
        assert cell.metrics is None
    assert len(result.table()) == 0


@pytest.mark.engine
def test_llama_server_prefix_cache_is_off_unless_allowed_and_a_hit_is_caught(
        engine, tmp_path: Path) -> None:
    from specbench_lib.analysis.validate import judge_cell
    from specbench_lib.client.dispatch import dispatch_cell
    from specbench_lib.model.sections import EngineParams
    from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter
    from specbench_lib.servers.process import ServerProcess

    binary, model = engine
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", "1024",
            "-t", "2"]
    prompts = [list(range(100, 140))] * 3  # the same prompt three times, one slot
    with ServerProcess(name="cache", argv=argv, base_url=url, health_path="/health",
                       log_path=tmp_path / "server.log") as proc:
        proc.wait_ready(60)
        cached = {}
        for allowed in (False, True):
            result = dispatch_cell(LlamaCppAdapter(EngineParams(prefix_cache=allowed)), url,
                                   prompts, warmup=0, concurrency=1, max_tokens=4, timeout_s=60)
            cached[allowed] = result
            assert [r.final.prompt_tokens for r in result.records] == [40, 40, 40]
    # 4-token requests on a 2-core host: a client stall is a large share of them; the stall
    # rule is not what this test is about (tests/analysis/test_coalesced_reads.py)
    lenient = {"max_coalesced_fraction": 1.0, "max_coalesced_first_fraction": 1.0}
    assert [r.final.cached_tokens for r in cached[False].records] == [0, 0, 0]
    assert judge_cell(cached[False].records, server_alive=True, **lenient).status == "ok"
    hits = [r.final.cached_tokens for r in cached[True].records]
    assert all(n >= 39 for n in hits[1:]), hits  # the server reused the repeated prompt
    assert judge_cell(cached[True].records, server_alive=True, prefix_cache=True,
                      **lenient).status == "ok"
    verdict = judge_cell(cached[True].records, server_alive=True, **lenient)
    assert verdict.status == "invalid" and verdict.reasons[0].startswith("prefix_cache_hit: the "
                                                                         "server took 39")
