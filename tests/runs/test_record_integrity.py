"""The run's record stays whole: redaction hides secrets only (the stored params reproduce the
plan), damaged files are named, set aside and measured again, the lock is always released, and
readers skip what they cannot read with a warning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cellfactory import make_cell
from paramsfiles import write_params

import specbench_lib as sb
from specbench_lib import cli
from specbench_lib.core.store import REDACTED, is_secret_name, redact
from specbench_lib.model.cellspec import CellSpec
from specbench_lib.model.layering import load_params
from specbench_lib.model.plan import build_plan
from specbench_lib.model.records import CellFacts, CellRecord, JudgeInputs
from specbench_lib.model.verdict import Reason, Verdict
from specbench_lib.report import export as report
from specbench_lib.runs.run import Run, RunDir, list_runs

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = ROOT / "params" / "embedded.yaml"


# --- redaction: secrets only ----------------------------------------------------------------

SECRET_NAMES = ["api_key", "--api-key", "apikey", "apiKey", "OPENAI_API_KEY", "hf_token",
                "--hf-token", "HF_TOKEN", "token", "--token", "auth_token", "access_token",
                "password", "passwd", "--ssl-keyfile-password", "secret", "client_secret",
                "Authorization", "authorization", "credentials", "bearer", "secret_key"]
KEPT_NAMES = ["output_tokens", "warmup_output_tokens", "first_token_s", "between_tokens_s",
              "max_new_tokens", "tokenizer", "tokenizer_path", "--speculative-num-draft-tokens",
              "--draft-tokens", "num_tokens", "api_key_env", "--api-key-file", "token_budget",
              "keyfile", "--port", "secretary", "passwords_are_long_words_here"]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_known_secret_names_are_hidden(name: str) -> None:
    assert is_secret_name(name)
    assert redact({name: "s3cr3t-value"}) == {name: REDACTED}
    flag = name if name.startswith("-") else f"--{name.replace('_', '-')}"
    assert redact(["srv", flag, "s3cr3t-value", "--port", "8"]) == ["srv", flag, REDACTED, "--port", "8"]
    assert redact([f"{flag}=s3cr3t-value"]) == [f"{flag}={REDACTED}"]


@pytest.mark.parametrize("name", KEPT_NAMES)
def test_a_secret_word_inside_another_name_is_kept(name: str) -> None:
    assert not is_secret_name(name)
    assert redact({name: 128}) == {name: 128}
    flag = name if name.startswith("-") else f"--{name}"
    assert redact([flag, "9", f"{flag}=12"]) == [flag, "9", f"{flag}=12"]


def test_ddtree_argv_and_server_info_keep_their_budgets() -> None:
    argv = ["python", "-m", "sglang.launch_server", "--speculative-algorithm", "DDTREE",
            "--speculative-num-draft-tokens", "9", "--speculative-num-steps", "8",
            "--max-running-requests", "2", "--api-key", "sk-live-123"]
    redacted = redact(argv)
    assert redacted[:-1] == argv[:-1] and redacted[-1] == REDACTED
    b8, b12 = (redact([*argv[:6], str(n)]) for n in (9, 13))
    assert b8 != b12, "budgets 8 and 12 must stay apart in the record"
    info = {"speculative_num_draft_tokens": 9, "max_total_num_tokens": 4096, "api_key": "k",
            "tokenizer_path": "/m", "hf_token": None}
    assert redact(info) == {**info, "api_key": REDACTED}


def test_headers_and_bearer_credentials_are_hidden_and_extra_names_are_whole_names() -> None:
    argv = ["-H", "Authorization: Bearer sk-abcdefgh123", "-H", "Content-Type: text/plain",
            "--note", "uses Bearer tok_12345678 inline", "--license-key", "LIC-1", "--licensed", "y"]
    assert redact(argv, extra=("license_key",)) == [
        "-H", f"Authorization: {REDACTED}", "-H", "Content-Type: text/plain",
        "--note", f"uses Bearer {REDACTED} inline", "--license-key", REDACTED, "--licensed", "y"]
    assert redact({"license.key": "x", "license_keys": "y"}, extra=["--license-key"]) == {
        "license.key": REDACTED, "license_keys": "y"}
    # a boolean secret-looking flag does not swallow the next flag
    assert redact(["--use-auth-token", "--port", "80"]) == ["--use-auth-token", "--port", "80"]


def secret_params(tmp_path: Path) -> Path:
    return write_params(
        tmp_path, EMBEDDED, phase="secrets",
        engine={"extra_args": ["--api-key", "sk-SECRET-1", "--hf-token=hf_SECRET_2",
                               "--license-key", "LIC-3", "--threads-http", "2"],
                "tokenizer": "server",
                "spec_templates": {"tree": ["--speculative-num-draft-tokens", "{budget+1}",
                                            "--speculative-eagle-topk", "8"]}},
        configs=[{"name": "auto", "method": "auto"},
                 {"name": "ngram", "method": "ngram", "budgets": [4, 8]},
                 {"name": "tree", "method": "tree", "budgets": [8, 12],
                  "extra_args": ["--token", "tok-SECRET-4"]},
                 {"name": "remote", "method": "auto",
                  "attach": {"url": "http://127.0.0.1:30000", "api_key_env": "REMOTE_KEY"}}],
        output_tokens=96, warmup_output_tokens=8,
        timeouts={"first_token_s": 45, "between_tokens_s": 12}, redact=["license_key"])


def test_stored_params_hide_secrets_and_reproduce_the_plan(tmp_path: Path) -> None:
    plan = sb.load_plan(secret_params(tmp_path))
    run = Run.start(plan, {c.cell_id: "fp" for c in plan.cells}, run_id="r1", outputs=tmp_path / "out")
    run.finish("complete", elapsed_s=0.0, counts={})
    stored = run.dir.params_path.read_text()
    for secret in ("sk-SECRET-1", "hf_SECRET_2", "LIC-3", "tok-SECRET-4"):
        assert secret not in stored and secret not in run.dir.manifest_path.read_text()

    loaded = load_params(run.dir.params_path)  # the run's own params.yaml loads
    again = build_plan(loaded, source=run.dir.params_path)
    assert again.cells == plan.cells and again.servers != () and [
        s.label for s in again.servers] == [s.label for s in plan.servers]
    expected = plan.params.model_dump(mode="json")
    expected["engine"]["extra_args"] = ["--api-key", REDACTED, f"--hf-token={REDACTED}",
                                        "--license-key", REDACTED, "--threads-http", "2"]
    expected["configs"][2]["extra_args"] = ["--token", REDACTED]
    assert loaded.model_dump(mode="json") == expected  # the same params but the secrets
    assert loaded.output_tokens == 96 and loaded.warmup_output_tokens == 8
    assert loaded.timeouts.first_token_s == 45 and loaded.engine.tokenizer == "server"
    assert loaded.engine.spec_templates["tree"][:2] == ("--speculative-num-draft-tokens", "{budget+1}")
    assert loaded.configs[3].attach is not None and loaded.configs[3].attach.api_key_env == "REMOTE_KEY"
    assert run.dir.manifest()["params"] == json.loads(json.dumps(expected))


def test_redact_names_are_validated(tmp_path: Path) -> None:
    path = write_params(tmp_path, EMBEDDED, redact=["--ok-name", "not a name"])
    with pytest.raises(sb.ParamsError) as err:
        load_params(path)
    assert err.value.key == "redact" and "not a name" in str(err.value)


# --- damaged files --------------------------------------------------------------------------

def small_plan(tmp_path: Path) -> sb.Plan:
    return sb.load_plan(write_params(
        tmp_path, EMBEDDED, name="small.yaml", phase="small",
        configs=[{"name": "auto", "method": "auto"}],
        workloads=[{"name": "code", "source": "humaneval"}], contexts=[128, 256], concurrency=[1]))


def recorded_run(tmp_path: Path) -> tuple[sb.Plan, dict[str, str], RunDir]:
    """A finished run of two ok cells, written as the sweep writes them."""
    plan = small_plan(tmp_path)
    fingerprints = {c.cell_id: f"fp-{c.context}" for c in plan.cells}
    run = Run.start(plan, fingerprints, run_id="r1", outputs=tmp_path / "out")
    for spec in plan.cells:
        run.write_cell(make_cell("auto", "auto", None, context=spec.context,
                                 fingerprint=fingerprints[spec.cell_id], run_id="r1"))
    run.finish("complete", elapsed_s=1.0, counts={"ok": 2})
    return plan, fingerprints, run.dir


def test_resume_sets_a_damaged_cell_aside_and_measures_it_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan, fingerprints, run_dir = recorded_run(tmp_path)
    torn = run_dir.cell_path("auto__code__ctx128__c1")
    torn_text = torn.read_text()[:70]
    torn.write_text(torn_text)
    (run_dir.cells_dir / "notes.json").write_text("[1, 2")  # any unreadable file in cells/

    run = Run.start(plan, fingerprints, resume="r1", outputs=tmp_path / "out")
    out = capsys.readouterr().out
    assert "auto__code__ctx128__c1.json" in out and "notes.json" in out and "damaged" in out
    assert run.kept == {"auto__code__ctx256__c1"}  # the damaged cell is missing: measured again
    kept_aside = run_dir.cells_dir / "damaged" / "auto__code__ctx128__c1.json"
    assert kept_aside.read_text() == torn_text  # kept, never deleted
    assert not torn.exists() and (run_dir.cells_dir / "damaged" / "notes.json").read_text() == "[1, 2"
    run.finish("interrupted", elapsed_s=0.0, counts={})
    result = sb.SweepResult(run_dir.path)
    assert result.damaged == [] and result.missing == ["auto__code__ctx128__c1"]


def test_resume_of_a_damaged_manifest_names_it_and_the_way_out_and_releases_the_lock(
        tmp_path: Path) -> None:
    plan, fingerprints, run_dir = recorded_run(tmp_path)
    run_dir.manifest_path.write_text('{"phase": "small", "attem')
    with pytest.raises(sb.StoreError) as err:
        Run.start(plan, fingerprints, resume="r1", outputs=tmp_path / "out")
    assert err.value.path == str(run_dir.manifest_path)
    assert "manifest cannot be read" in str(err.value) and "reuse" in str(err.value)
    assert not (run_dir.path / ".lock").exists()
    assert run_dir.manifest_path.read_text() == '{"phase": "small", "attem'  # left to restore
    # the way out works: a new run copies the intact ok cells
    new = Run.start(plan, fingerprints, reuse=True, outputs=tmp_path / "out")
    assert new.kept == set(fingerprints) and new.attempt["reused_from"] == dict.fromkeys(
        fingerprints, "r1")
    new.finish("complete", elapsed_s=0.0, counts={})


def test_a_failed_start_releases_the_lock_and_leaves_no_empty_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = small_plan(tmp_path)

    def broken() -> dict[str, Any]:
        raise OSError("no space left on device")

    monkeypatch.setattr("specbench_lib.runs.run.environment_info", broken)
    with pytest.raises(OSError, match="no space"):
        Run.start(plan, {c.cell_id: "fp" for c in plan.cells}, run_id="r9", outputs=tmp_path / "out")
    assert not (tmp_path / "out" / "runs" / "r9").exists()


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True)
    return int(done.stdout)


def test_a_killed_run_is_listed_as_died_without_rewriting_its_manifest(tmp_path: Path) -> None:
    root = tmp_path / "out"
    for run_id, lock in (("a_dead_lock", str(dead_pid())), ("b_no_lock", None),
                         ("c_unheld_live_pid", str(os.getpid()))):
        run = RunDir.at(run_id, root=root)
        run.path.mkdir(parents=True)
        run.update_manifest(phase="p", status="running")
        if lock is not None:  # a lock file no process holds: its writer was killed
            (run.path / ".lock").write_text(lock)
    alive = RunDir.at("d_alive", root=root)
    alive.path.mkdir(parents=True)
    alive.update_manifest(phase="p", status="running")
    alive.acquire()  # held by a living writer (this process)
    before = {p: p.read_bytes() for p in root.rglob("manifest.json")}
    assert {r["run_id"]: r["status"] for r in list_runs(root)} == {
        "a_dead_lock": "died", "b_no_lock": "died", "c_unheld_live_pid": "died",
        "d_alive": "running"}
    assert {p: p.read_bytes() for p in root.rglob("manifest.json")} == before
    alive.release()


def comparable_run(root: Path, run_id: str, *, phase: str = "tp1", damaged_cell: bool = False) -> RunDir:
    run = RunDir.at(run_id, root=root)
    cells = [make_cell("auto", "auto", None, tok_s=10.0, fingerprint="fa", run_id=run_id),
             make_cell("ngram-b8", "ngram", 8, tok_s=15.0, fingerprint="fb", run_id=run_id)]
    run.update_manifest(phase=phase, status="complete",
                        plan_fingerprints={c.cell_id: c.fingerprint for c in cells})
    for cell in cells:
        run.write_cell(cell)
    if damaged_cell:
        (run.cells_dir / "torn.json").write_text('{"schema_version": 2, "ru')
    return run


def test_report_and_runs_skip_an_unreadable_run_with_a_warning(
        tmp_path: Path, outputs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = outputs
    comparable_run(root, "20260101T000000Z_tp1_aaaaaa", damaged_cell=True)
    broken = comparable_run(root, "20260102T000000Z_tp1_bbbbbb")
    broken.manifest_path.write_text("{not json")  # the newest tp1 run: unreadable

    comparison = report.compare(root=root)
    assert [r.run_id for r in comparison.runs] == ["20260101T000000Z_tp1_aaaaaa"]
    err = capsys.readouterr().err
    assert "skipping run 20260102T000000Z_tp1_bbbbbb" in err and "manifest.json" in err
    assert "torn.json" in err  # the unreadable cell of the run read is named too
    assert len(comparison.skipped) == 2 and "warning: skipping" in comparison.text()
    assert set(comparison.table()["config"]) == {"auto", "ngram-b8"}

    named = report.compare("20260101T000000Z_tp1_aaaaaa,20260102T000000Z_tp1_bbbbbb", root=root)
    assert [r.run_id for r in named.runs] == ["20260101T000000Z_tp1_aaaaaa"]
    capsys.readouterr()

    assert cli.main(["report"]) == 0
    captured = capsys.readouterr()
    assert "skipping run 20260102T000000Z_tp1_bbbbbb" in captured.err
    assert (outputs / "report" / "results.tex").is_file() and "results.tex" in captured.out

    assert cli.main(["runs"]) == 0
    captured = capsys.readouterr()
    assert "20260101T000000Z_tp1_aaaaaa" in captured.out and "complete" in captured.out
    assert "20260102T000000Z_tp1_bbbbbb" not in captured.out
    assert "skipping run 20260102T000000Z_tp1_bbbbbb" in captured.err
    assert "index.html" in str(report.build_index(outputs))  # the index still builds


def test_report_with_only_unreadable_runs_says_why(tmp_path: Path, outputs: Path) -> None:
    comparable_run(outputs, "20260102T000000Z_tp1_bbbbbb").manifest_path.write_text("")
    with pytest.raises(sb.ValidationFailed, match="no runs to compare.*skipping run"):
        report.compare(root=outputs)


def failed_cell(config: str, method: str, budget: int | None, status: str, reason: Reason, *,
                run_id: str, context: int = 256) -> Any:
    """A cell whose verdict the measurement decided (a crash, a known-bad skip, a config fault)."""
    spec = CellSpec(config=config, series=config.split("-")[0], method=method, budget=budget,
                    workload="code", context=context, concurrency=1)
    verdict = Verdict(status, (reason,))  # type: ignore[arg-type]
    return CellRecord(run_id, spec, f"f-{config}-{context}", config, (), verdict,
                      JudgeInputs(planned=1, speculative=method != "auto"),
                      CellFacts(decided=verdict))


def test_report_files_mark_failed_cells_and_never_give_them_a_number(tmp_path: Path) -> None:
    """results.tex and comparison.json list every failed cell with its verdict and reasons,
    ``--`` for its values; a phase whose every cell failed still gets its table."""
    root = tmp_path / "out"
    tp1, tp4 = "20260101T000000Z_tp1_aaaaaa", "20260102T000000Z_tp4_bbbbbb"
    cells = {
        tp1: [make_cell("auto", "auto", None, tok_s=10.0, fingerprint="a", run_id=tp1),
              failed_cell("ngram-b8", "ngram", 8, "crashed",
                          Reason("server_died", "the server exited with -9"), run_id=tp1),
              failed_cell("tree-b4", "tree", 4, "skipped",
                          Reason("known_bad", "CUDA error: an illegal instruction (SM120)"),
                          run_id=tp1)],
        tp4: [failed_cell("auto", "auto", None, "invalid",
                          Reason("missing_endpoint", "no /tokenize: set engine.tokenizer"),
                          run_id=tp4, context=512)],
    }
    for run_id, records in cells.items():
        run = RunDir.at(run_id, root=root)
        run.update_manifest(phase=run_id.split("_")[1], status="complete",
                            plan_fingerprints={c.cell_id: c.fingerprint for c in records})
        for cell in records:
            run.write_cell(cell)
    comparison = report.compare([tp1, tp4], root=root)
    out = tmp_path / "report"
    out.mkdir()
    tex = report.write_latex(comparison, out / "results.tex").read_text()
    summary = json.loads(report.write_summary(comparison, out / "comparison.json").read_text())

    assert [(f["phase"], f["run_id"], f["cell"], f["verdict"]) for f in summary["failures"]] == [
        ("tp1", tp1, "ngram-b8__code__ctx256__c1", "crashed"),
        ("tp1", tp1, "tree-b4__code__ctx256__c1", "skipped"),
        ("tp4", tp4, "auto__code__ctx512__c1", "invalid")]
    assert summary["failures"][0]["reasons"] == ["server_died: the server exited with -9"]
    assert [b["best"] for b in summary["best"]] == ["auto"]  # failures are never ranked
    tp1_table, tp4_table = tex.split("\\caption{tp4")
    rows = {line.split(" & ")[1]: line for line in tp1_table.splitlines()
            if line.startswith("1 & ")}
    assert len(rows) == 3
    # one request is one unit: the speedup has no interval, and none is printed
    assert rows["auto"].startswith("1 & auto & 10.0 & 1.00 & 1 & ")
    assert rows["auto"].endswith(" & 1.00 & ok \\\\")
    assert rows["ngram-b8"] == "1 & ngram-b8 & -- & -- & -- & -- & -- & crashed: server\\_died \\\\"
    assert rows["tree-b4"] == "1 & tree-b4 & -- & -- & -- & -- & -- & skipped: known\\_bad \\\\"
    assert "1 & auto & -- & -- & -- & -- & -- & invalid: missing\\_endpoint \\\\" in tp4_table
    assert tex.count("\\begin{longtable}") == 2 and "tok/s" in tex
    assert "output_tok_s" not in tex  # headers escaped too: the file compiles
