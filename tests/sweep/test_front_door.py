"""One front door: one preflight list for doctor and the sweep, one run id, the notebook kept by
its papermill path, and values that render themselves (text and escaped HTML)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import paramsfiles
import pytest
from ports import free_port

import specbench_lib as sb
from specbench_lib import cli, notebook_link
from specbench_lib.core.display import Html, Rendered, html_table, link
from specbench_lib.runs.provenance import file_identity
from specbench_lib.sweep.preflight import Preflight, doctor, require
from specbench_lib.sweep.preview import PlanPreview

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny.yaml"


def fake_program(path: Path, output: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nprintf '{output}'\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def engine_files(tmp_path: Path) -> tuple[Path, Path]:
    binary = fake_program(tmp_path / "engine" / "server", "version: 0.0-test\\n")
    model = tmp_path / "models" / "m"
    model.mkdir(parents=True)
    (model / "weights.bin").write_bytes(b"w" * 2048)
    return binary, model


def write_params(tmp_path: Path, **engine: Any) -> Path:
    """tests/data/tiny.yaml with these ``engine`` keys (paths as text)."""
    return paramsfiles.write_params(tmp_path, TINY, engine={k: v if isinstance(v, int) else str(v)
                                                           for k, v in engine.items()})


def problems(checks: list[Any]) -> dict[str, str]:
    return {c.name: c.detail for c in checks if not c.ok}


@pytest.mark.parametrize(("gpus", "visible", "needle"), [
    (None, None, "nvidia-smi not found"),
    (["NVIDIA H200, 143771 MiB"], None, "but 1 is visible"),
    (["NVIDIA H200, 143771 MiB"] * 2, "0", "but 1 is visible"),
])
def test_too_few_gpus_for_tp_is_one_problem_for_doctor_and_the_sweep(
        tmp_path: Path, outputs: Path, monkeypatch: pytest.MonkeyPatch,
        engine_files: tuple[Path, Path], gpus: list[str] | None, visible: str | None,
        needle: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if gpus is not None:
        fake_program(bin_dir / "nvidia-smi", "\\n".join(gpus) + "\\n")
    monkeypatch.setenv("PATH", str(bin_dir))
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    binary, model = engine_files
    plan = sb.load_plan(write_params(tmp_path, kind="sglang", binary=binary, model=model, tp=2,
                                     port=free_port()))

    found = problems(doctor(plan))
    assert list(found) == ["gpus"]
    assert needle in found["gpus"] and "engine.tp is 2" in found["gpus"]
    assert "CUDA_VISIBLE_DEVICES" in found["gpus"]
    with pytest.raises(sb.PreflightError, match="(?s)1 of .* checks failed.*gpus: .*engine.tp is 2") as err:
        require(plan)
    assert err.value.what == "gpus"
    assert not (outputs / "runs").exists()


def test_enough_gpus_pass_and_require_returns_what_the_sweep_needs(
        tmp_path: Path, outputs: Path, monkeypatch: pytest.MonkeyPatch,
        engine_files: tuple[Path, Path]) -> None:
    bin_dir = tmp_path / "bin"
    fake_program(bin_dir / "nvidia-smi", "NVIDIA H200, 143771 MiB\\nNVIDIA H200, 143771 MiB\\n")
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    binary, model = engine_files
    plan = sb.load_plan(write_params(tmp_path, kind="sglang", binary=binary, model=model, tp=2,
                                     port=free_port()))
    assert problems(doctor(plan)) == {}
    ready = require(plan)
    assert isinstance(ready, Preflight)
    assert (ready.binary, ready.model, ready.attached, ready.warnings) == (binary, model, {}, [])
    assert [c.name for c in ready.checks] == ["binary", "model", "draft models", "model fit",
                                              "kv pool", "seeds", "configs", "workload code",
                                              "prompts", "thresholds", "port", "host", "disk", "gpus",
                                              "host load"]
    assert "2 visible" in next(c.detail for c in ready.checks if c.name == "gpus")


def test_a_cpu_engine_has_no_gpu_check(tmp_path: Path, outputs: Path,
                                       engine_files: tuple[Path, Path]) -> None:
    binary, model = engine_files
    (model / "weights.bin").rename(model.parent / "m.gguf")
    plan = sb.load_plan(write_params(tmp_path, binary=binary, model=model.parent / "m.gguf",
                                     port=free_port()))
    names = [c.name for c in doctor(plan)]
    assert "gpus" not in names and names[0] == "binary"
    assert "version: 0.0-test" in str(doctor(plan)[0])


def test_missing_model_is_named_by_both_and_only_the_sweep_restages(
        tmp_path: Path, outputs: Path, engine_files: tuple[Path, Path]) -> None:
    binary, _ = engine_files
    model = tmp_path / "shm" / "model.gguf"
    plan = sb.load_plan(write_params(tmp_path, binary=binary, model=model, port=free_port()))
    assert list(problems(doctor(plan))) == ["model"]
    with pytest.raises(sb.PreflightError, match="model missing or empty: .*model.gguf") as err:
        require(plan)
    assert err.value.what == "model" and err.value.path == str(model)

    cache = tmp_path / "persistent" / "model.gguf"
    cache.parent.mkdir()
    cache.write_bytes(b"g" * 4096)
    plan = sb.load_plan(write_params(tmp_path, binary=binary, model=model, model_cache=cache,
                                     port=free_port()))
    assert "the sweep will restage it" in problems(doctor(plan))["model"]
    assert not model.exists()  # doctor copies nothing
    assert require(plan).model == model and model.read_bytes() == cache.read_bytes()


def test_busy_port_is_named_by_both(tmp_path: Path, outputs: Path,
                                    engine_files: tuple[Path, Path]) -> None:
    binary, model = engine_files
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        plan = sb.load_plan(write_params(tmp_path, binary=binary, model=model / "weights.bin",
                                         port=port))
        assert list(problems(doctor(plan))) == ["port"]
        with pytest.raises(sb.PreflightError, match=f"port {port} on 127.0.0.1 is in use") as err:
            require(plan)
    assert err.value.what == "port"


def test_every_failure_is_in_the_one_error(tmp_path: Path, outputs: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        plan = sb.load_plan(write_params(tmp_path, binary=tmp_path / "nope",
                                         model=tmp_path / "none.gguf", port=port))
        assert list(problems(doctor(plan))) == ["binary", "model", "port"]
        with pytest.raises(sb.PreflightError) as err:
            require(plan)
    message = str(err.value)
    assert err.value.what == "binary" and "3 of" in message
    lines = message.splitlines()[1:]
    assert [line.split(":")[0].strip() for line in lines] == ["binary", "model", "port"]
    assert all(";" in line for line in lines), "each problem names its fix"


def test_a_changed_model_is_a_problem_for_doctor_and_a_warning_for_the_sweep(
        tmp_path: Path, outputs: Path, engine_files: tuple[Path, Path]) -> None:
    binary, model = engine_files
    weights = model / "weights.bin"
    earlier = outputs / "runs" / "r1"
    earlier.mkdir(parents=True)
    (earlier / "manifest.json").write_text(json.dumps({"model": file_identity(weights)}))
    weights.write_bytes(b"w" * 1000)
    plan = sb.load_plan(write_params(tmp_path, binary=binary, model=weights, host="0.0.0.0",
                                     port=free_port()))
    assert "differs from run r1" in problems(doctor(plan))["model"]
    ready = require(plan)
    assert any("differs from run r1" in w for w in ready.warnings)
    assert any("non-loopback" in w for w in ready.warnings)


def test_cli_mints_the_run_id_from_the_params_phase(tmp_path: Path, outputs: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import papermill

    calls: list[dict[str, Any]] = []

    def sweep(source: str, out: str, **kw: Any) -> None:  # the notebook's sweep records a run
        calls.append({"out": out, **kw})
        (Path(out).parent / "manifest.json").write_text("{}")

    monkeypatch.setattr(papermill, "execute_notebook", sweep)
    assert cli.main(["run", "tp1", "--params", str(TINY)]) == 0
    assert cli.main(["run", "tp1", "-p", "params_file", str(TINY)]) == 0
    assert cli.main(["run", "tp1"]) == 0  # the notebook's default: params/embedded.yaml
    phases = []
    for call in calls:
        parameters = call["parameters"]
        run_dir = outputs / "runs" / parameters["run_id"]
        assert run_dir.is_dir()
        assert call["out"] == parameters["PAPERMILL_OUTPUT_PATH"] == str(run_dir / "tp1.ipynb")
        phases.append(parameters["run_id"].split("_")[1])
    assert phases == ["tiny", "tiny", "embedded"]


def test_keep_names_a_notebook_written_into_the_run_dir(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    assert notebook_link.keep(run_dir, str(run_dir / "tp1.ipynb")) == "tp1.ipynb"
    for nothing in (None, "", "-", "s3://bucket/out.ipynb"):
        assert notebook_link.keep(run_dir, nothing) is None
    assert list(run_dir.iterdir()) == []


def test_keep_copies_the_notebook_once_its_papermill_exits(tmp_path: Path) -> None:
    """A process stands in for papermill: its child (the kernel) calls keep, then it writes the
    notebook and exits; the watcher then copies it into the run directory and renders it."""
    run_dir = tmp_path / "outputs" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    out = tmp_path / "elsewhere" / "out.ipynb"
    out.parent.mkdir()
    kernel = (f"from pathlib import Path; from specbench_lib.notebook_link import keep; "
              f"print(keep(Path({str(run_dir)!r}), {str(out)!r}))")
    papermill = (f"import subprocess, sys, time, nbformat\n"
                 f"done = subprocess.run([sys.executable, '-c', {kernel!r}], capture_output=True,\n"
                 f"                      text=True)\n"
                 f"print(done.stdout.strip())\n"
                 f"time.sleep(1.0)\n"
                 f"nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell('kept')])\n"
                 f"nbformat.write(nb, {str(out)!r})\n")
    done = subprocess.run([sys.executable, "-c", papermill], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "out.ipynb"
    copied = run_dir / "out.ipynb"
    index = tmp_path / "outputs" / "index.html"  # written after out.html: wait for both
    deadline = time.monotonic() + 90
    while not (index.exists() and (run_dir / "out.html").exists()) and (
            time.monotonic() < deadline):
        time.sleep(0.2)
    assert "".join(json.loads(copied.read_text())["cells"][0]["source"]) == "kept"
    assert (run_dir / "out.html").exists() and index.exists()


def test_html_tables_escape_every_cell_but_built_html() -> None:
    table = html_table(["a<b>", "c"], [["<script>", None], [link("x?a=1&b=<2>", "<f>"), 3]],
                       row_styles=["color:red", None])
    assert "<script>" not in table and "&lt;script&gt;" in table and "a&lt;b&gt;" in table
    assert '<a href="x?a=1&amp;b=&lt;2&gt;">&lt;f&gt;</a>' in table
    assert '<tr style="color:red">' in table and "<td></td>" in table
    assert isinstance(link("a", "b"), Html)


def test_plan_and_preview_render_themselves_once(tmp_path: Path) -> None:
    params = paramsfiles.write_params(tmp_path, ROOT / "params" / "tp1.yaml", configs=[
        {"name": "auto", "method": "auto", "extra_args": ["--tag=<x>"]}])
    plan = sb.load_plan(params)
    bundle = plan._repr_mimebundle_()
    assert bundle["text/plain"] == repr(plan) and "<td>auto</td>" in bundle["text/html"]
    preview = sb.run_sweep(plan, dry_run=True)
    assert isinstance(preview, PlanPreview) and isinstance(preview, Rendered)
    bundle = preview._repr_mimebundle_()
    assert bundle["text/plain"] == preview.text() and "--tag=&lt;x&gt;" in bundle["text/html"]
    assert "--tag=<x>" not in bundle["text/html"] and "dry run" in bundle["text/html"]
    assert preview.figures() == {} and preview.save_figures(preview.figures()) == []


class _Run:
    """Just what a Comparison reads from a result."""

    def __init__(self, phase: str, rows: list[dict[str, Any]]) -> None:
        import pandas as pd

        self.run_id = f"20260101T000000Z_{phase}_abcdef"
        self.manifest = {"phase": phase}
        self.rows = pd.DataFrame(rows)

    def table(self) -> Any:
        return self.rows.copy()

    def best(self) -> Any:  # as SweepResult.best() shapes it; no interval from one request
        import pandas as pd

        fastest = self.rows.sort_values("output_tok_s").iloc[-1]
        return pd.DataFrame([{"workload": fastest["workload"], "context": fastest["context"],
                              "output_tokens": fastest["output_tokens"],
                              "concurrency": fastest["concurrency"], "load": fastest["load"],
                              "temperature": fastest["temperature"], "turn": 1,
                              "best": fastest["config"],
                              "speedup": fastest["speedup"], "speedup_lo": float("nan"),
                              "speedup_hi": float("nan"), "confidence_set": fastest["config"],
                              "decision": "decided", "epsilon": 0.0, "alpha": 0.05,
                              "equivalence": 0.05, "requests_n": 1,
                              "unstable": False, "statement": "best " + fastest["config"]}])


def test_comparison_is_a_value_and_its_writers_are_functions(tmp_path: Path, outputs: Path) -> None:
    from specbench_lib.report.export import Comparison, write

    base = {"workload": "code", "context": 128, "output_tokens": 64, "concurrency": 1, "load": "",
            "temperature": 0.0, "turn": 1, "series": "ngram", "target_rate_rps": None, "e2e_p50_s": 1.0,
            "speedup_lo": None, "speedup_hi": None}
    rows = [{**base, "config": "auto", "method": "auto", "budget": None, "output_tok_s": 10.0,
             "speedup": 1.0, "acceptance_length": None},
            {**base, "config": "ngram-b8", "method": "ngram", "budget": 8, "output_tok_s": 15.0,
             "speedup": 1.5, "acceptance_length": 2.5}]
    comparison = Comparison([_Run("tp1", rows)])  # type: ignore[list-item]
    bundle = comparison._repr_mimebundle_()
    assert "ngram-b8" in bundle["text/plain"] and "<td>ngram-b8</td>" in bundle["text/html"]
    written = write(comparison, tmp_path / "report")
    assert [p.name for p in written] == ["results.tex", "comparison.json", "results.html", "index.html"]
    best = json.loads((tmp_path / "report" / "comparison.json").read_text())["best"]  # strict JSON
    assert [(b["best"], b["speedup"], b["speedup_lo"]) for b in best] == [("ngram-b8", 1.5, None)]
