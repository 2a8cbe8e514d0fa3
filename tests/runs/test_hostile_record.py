"""The run's record against a hostile hand: run ids that would escape ``outputs/runs``, YAML
bombs, racing lock takeovers, cell files of another shape, unwritable outputs, absurd sizes,
secrets in a server's log and a log without end. Each ends in a clear refusal, a set-aside file
or a verdict: never a write outside ``outputs/``, a hang, a double lock or a traceback."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cellfactory import make_cell
from fakeparams import fake_argv
from fuzzing import FUZZ
from hypothesis import given, settings
from hypothesis import strategies as st
from paramsfiles import fake_plan, write_params
from ports import free_port
from test_cli import no_kernel  # noqa: F401  (no_kernel: a fixture)
from test_record_integrity import dead_pid, recorded_run, small_plan

import specbench_lib as sb
from specbench_lib import cli
from specbench_lib.model.hostfacts import HostLoad, HostProcess
from specbench_lib.model.records import CellFacts
from specbench_lib.report import export as report
from specbench_lib.runs.run import Run, RunDir, list_runs
from specbench_lib.servers import log as serverlog
from specbench_lib.servers.process import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = ROOT / "params" / "embedded.yaml"
ESCAPES = ["../../escaped", "../x", "/tmp/escaped-abs", "a/b", ".", "..", ".hidden", "", "x" * 129]


def everything_under(folder: Path) -> set[Path]:
    return set(folder.rglob("*")) if folder.exists() else set()


# --- 1. run ids are names ---------------------------------------------------------------------

@pytest.mark.parametrize("bad", ESCAPES)
def test_a_run_id_that_is_not_a_name_is_refused_by_the_library(tmp_path: Path, bad: str) -> None:
    plan = small_plan(tmp_path)
    before = everything_under(tmp_path)
    for kw in ({"run_id": bad}, {"resume": bad}):
        if not bad:  # an empty run_id mints a new id; an empty resume is no resume
            continue
        with pytest.raises(sb.ParamsError) as err:
            Run.start(plan, {c.cell_id: "fp" for c in plan.cells}, outputs=tmp_path / "out", **kw)
        assert err.value.key == next(iter(kw)) and err.value.value == bad
        assert "not a run id" in str(err.value) and "no '/'" in str(err.value)
    with pytest.raises(sb.ParamsError, match="not a run id"):
        RunDir.at(bad, root=tmp_path / "out")
    assert everything_under(tmp_path) == before  # nothing created, inside outputs or out


def test_run_sweep_refuses_an_escaping_run_id_and_resume(tmp_path: Path) -> None:
    params = write_params(tmp_path, fake_plan(free_port(), argv=fake_argv(), phase="esc",
                                              output_tokens=4))
    plan = sb.load_plan(params)
    outputs = tmp_path / "deep" / "er" / "out"
    for kw in ({"run_id": "../../escaped"}, {"resume": "../../escaped"}, {"run_id": str(tmp_path)}):
        with pytest.raises(sb.ParamsError, match="not a run id"):
            sb.run_sweep(plan, outputs=outputs, progress=False, **kw)
    assert not (tmp_path / "deep" / "escaped").exists() and not (tmp_path / "escaped").exists()
    assert not (outputs / "runs").exists()


def test_good_run_ids_still_work(tmp_path: Path) -> None:
    plan = small_plan(tmp_path)
    for good in ("r1", "20250101T000000Z_tp1_abc123", "my.run-2", "_x"):
        run = Run.start(plan, {c.cell_id: "fp" for c in plan.cells}, run_id=good,
                        outputs=tmp_path / "out")
        run.finish("complete", elapsed_s=0.0, counts={})
        assert run.dir.path == tmp_path / "out" / "runs" / good


@pytest.mark.parametrize("bad", ["../../escaped", "/tmp/escaped-abs", ".."])
def test_the_cli_refuses_an_escaping_run_id_with_one_line(
        outputs: Path, no_kernel: list[dict[str, Any]], capsys: pytest.CaptureFixture[str],  # noqa: F811
        tmp_path: Path, bad: str) -> None:
    before = everything_under(tmp_path)
    for args in (["-p", "run_id", bad], ["--resume", bad]):
        assert cli.main(["run", "tp1", *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("specbench: ") and "Traceback" not in err
        assert repr(bad) in err and "not a run id" in err
        assert ("--resume" if args[0] == "--resume" else "-p run_id") in err
    assert cli.main(["report", bad]) == 2 and "not a run id" in capsys.readouterr().err
    assert cli.main(["compare", "r1", bad]) == 2 and "not a run id" in capsys.readouterr().err
    assert no_kernel == [] and everything_under(tmp_path) == before


# --- 3. the lock: one winner ------------------------------------------------------------------

def stale_run(root: Path) -> RunDir:
    run = RunDir.at("r1", root=root)
    run.path.mkdir(parents=True)
    run.update_manifest(phase="p", status="running")
    (run.path / ".lock").write_text(str(dead_pid()))
    return run


TRIALS = 100


def _take_over(base: Path, barrier: Any, results: Any) -> None:
    """One racer: at each trial, with the others at once, take over that trial's stale lock."""
    for trial in range(TRIALS):
        barrier.wait()
        try:
            run: RunDir | None = RunDir.open("r1", root=base / f"t{trial}")
        except sb.StoreError as exc:
            run = None
            assert "being written by process" in str(exc)
        results.put((trial, run is not None))
        barrier.wait()  # every racer has tried before the winner lets go
        if run is not None:
            run.release()


def test_a_hundred_racing_takeovers_of_a_stale_lock_have_one_winner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("specbench_lib.runs.lock.LOCK_WAIT_S", 0.0)  # a loser gives up at once
    for trial in range(TRIALS):
        stale_run(tmp_path / f"t{trial}")
    ctx = multiprocessing.get_context("fork")  # the racers inherit LOCK_WAIT_S
    barrier, results = ctx.Barrier(4), ctx.Queue()
    racers = [ctx.Process(target=_take_over, args=(tmp_path, barrier, results)) for _ in range(4)]
    for racer in racers:
        racer.start()
    winners = dict.fromkeys(range(TRIALS), 0)
    for _ in range(4 * TRIALS):
        trial, won = results.get(timeout=60)
        winners[trial] += won
    for racer in racers:
        racer.join(timeout=60)
    assert [r.exitcode for r in racers] == [0] * 4
    assert {t: n for t, n in winners.items() if n != 1} == {}  # one winner in every trial


def test_racing_processes_have_one_winner_and_a_killed_winner_frees_the_lock(
        tmp_path: Path) -> None:
    run = stale_run(tmp_path)
    script = ("import sys, time\nfrom pathlib import Path\nfrom specbench_lib.runs.run import RunDir\n"
              "from specbench_lib.core.errors import StoreError\n"
              "while not Path(sys.argv[2]).exists(): time.sleep(0.001)\n"
              "try:\n    RunDir.open('r1', root=Path(sys.argv[1]))\nexcept StoreError:\n"
              "    print('refused', flush=True); sys.exit(3)\n"
              "print('won', flush=True)\ntime.sleep(60)\n")
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), str(go)],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT) for _ in range(4)]
    go.touch()
    lines = [p.stdout.readline().strip() for p in procs if p.stdout is not None]
    try:
        assert sorted(lines) == ["refused"] * 3 + ["won"]
        assert [r["status"] for r in list_runs(tmp_path)] == ["running"]  # held: not died
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert [r["status"] for r in list_runs(tmp_path)] == ["died"]  # the kernel freed it
    again = RunDir.open("r1", root=tmp_path)
    assert run.lock_owner() is None or again.lock_held()
    again.release()
    assert not (run.path / ".lock").exists()


def test_a_second_open_in_one_process_is_refused_and_release_is_its_own(tmp_path: Path) -> None:
    first = RunDir.create("r1", root=tmp_path)
    first.update_manifest(phase="p")
    with pytest.raises(sb.StoreError, match="being written by process"):
        RunDir.open("r1", root=tmp_path)
    other = RunDir.at("r1", root=tmp_path)
    other.release()  # it holds nothing: the writer's lock stays
    assert (first.path / ".lock").exists() and other.lock_held()
    first.release()
    first.release()  # twice is nothing
    assert not other.lock_held() and not (first.path / ".lock").exists()


# --- 2. YAML bombs ----------------------------------------------------------------------------

LAUGHS = "".join(f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n"
                 for a, b in zip("abcdefgh", "bcdefghi", strict=True))
BILLION_LAUGHS = 'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + LAUGHS


@pytest.mark.parametrize(("text", "problem"), [
    (BILLION_LAUGHS, "more than 100000 nodes (an alias bomb?)"),
    ("phase: x\nconfigs: &c [*c]\n", "alias *c names a node that contains it"),
    ("phase: x\ndescription: " + "[" * 500 + "]" * 500 + "\n", "nested more than 100 deep"),
])
def test_a_yaml_bomb_is_refused_naming_the_file(tmp_path: Path, text: str, problem: str) -> None:
    assert len(BILLION_LAUGHS) < 1400  # the 1.3 kB file that hung a sweep
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(text)
    with pytest.raises(sb.ParamsError) as err:
        sb.load_params(bomb)
    assert err.value.file == str(bomb) and problem in str(err.value)
    assert "\n" not in str(err.value) and ", column " in str(err.value)
    phase = tmp_path / "phase.yaml"
    phase.write_text(f"extends: {bomb.name}\nphase: y\n")
    with pytest.raises(sb.ParamsError, match="alias|nested") as err:
        sb.load_params(phase)  # as an extends: base
    assert err.value.file == str(bomb)


def test_a_params_file_over_a_mebibyte_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(f"extends: {EMBEDDED}\ndescription: '{'x' * (1 << 20)}'\n")
    with pytest.raises(sb.ParamsError, match="over 1048576 bytes") as err:
        sb.load_params(big)
    assert err.value.file == str(big) and err.value.key == "params_file"
    fits = tmp_path / "fits.yaml"
    fits.write_text(f"extends: {EMBEDDED}\ndescription: '{'x' * 1000}'\n")
    assert sb.load_params(fits).description == "x" * 1000


def test_plain_aliases_and_merge_keys_still_load(tmp_path: Path) -> None:
    path = tmp_path / "aliases.yaml"
    path.write_text(f"extends: {EMBEDDED}\nphase: al\ncontexts: &ctx [128, 256]\n"
                    f"timeouts: &t {{first_token_s: 30}}\n"
                    f"configs: [{{name: auto, method: auto}}, {{<<: {{method: ngram}}, name: ng, "
                    f"budgets: *ctx}}]\n")
    params = sb.load_params(path)
    assert params.contexts == (128, 256) and params.configs[1].budgets == (128, 256)
    assert params.configs[1].method == "ngram" and params.timeouts.first_token_s == 30


def test_a_bomb_as_a_cli_value_is_one_line_and_exit_2(
        outputs: Path, no_kernel: list[dict[str, Any]],  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "tp1", "-p", "budget", BILLION_LAUGHS.replace("\n", ", ")
                     .join("{}")]) == 2
    err = capsys.readouterr().err
    assert "-p budget" in err and "alias bomb" in err and err.count("\n") == 1
    assert no_kernel == []


# --- 4. cell files of another shape -----------------------------------------------------------

def a_cell_dict() -> dict[str, Any]:
    """A valid cell's JSON, with facts of every kind filled (host, decided-free, counters)."""
    cell = make_cell("ngram-b8", "ngram", 8, tok_s=12.0, fingerprint="fp", run_id="r1")
    host = HostLoad(cpus=2, window_s=1.0, samples=3, loadavg=(0.5, 0.4, 0.3),
                    top=(HostProcess(7, "python", 0.1),), gpu={"0": {"util": 3}})
    facts = CellFacts(spec_counters={"accepted": 3}, host=host, log_excerpt="ok")
    return json.loads(json.dumps(replace(cell, facts=facts).to_dict()))


def reading_the_run_names_or_reads(run_dir: Path, name: str) -> str:
    """Read the run as every reader does: the file is either a cell (analysed, tabled, shown)
    or damaged, named by its path; never a traceback."""
    result = sb.SweepResult(run_dir)
    if result.damaged:
        [error] = result.damaged
        assert isinstance(error, sb.StoreError) and error.path.endswith(name)
        return "damaged"
    result.table()
    result.verdicts()
    result.text()
    return "read"


OTHER_SHAPES: list[tuple[str, Any]] = [
    ("a list", [1, 2, 3]),
    ("a string", "a cell"),
    ("no spec", "del spec"),
    ("facts a string", ("facts", "broken")),
    ("requests a number", ("requests", 5)),
    ("a request a string", ("requests", ["r"])),
    ("token times a string", ("requests.0.token_times", "abc")),
    ("a token time a string", ("requests.0.token_times.0", "x")),
    ("verdict status unknown", ("verdict.status", "great")),
    ("spec context a string", ("spec.context", "big")),
    ("host a list", ("facts.host", [1])),
    ("host top a string", ("facts.host.top", "x")),
    ("judge planned a string", ("judge.planned", "eight")),
    ("a reason a number", ("verdict.reasons", [3])),
    ("final a list", ("requests.0.final", [1])),
    ("timing a list", ("timing", [1, 2])),
]


def mutated(base: Any, change: Any) -> Any:
    if not (isinstance(change, tuple) or change == "del spec"):
        return change
    data = json.loads(json.dumps(base))
    if change == "del spec":
        del data["spec"]
        return data
    path, value = change
    *parents, last = path.split(".")
    node = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[int(last) if isinstance(node, list) else last] = value
    return data


@pytest.mark.parametrize(("what", "change"), OTHER_SHAPES, ids=[w for w, _ in OTHER_SHAPES])
def test_a_cell_file_of_another_shape_is_named_and_set_aside_by_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str, change: Any) -> None:
    plan, fingerprints, run_dir = recorded_run(tmp_path)
    bad = run_dir.cell_path("auto__code__ctx128__c1")
    good = {**json.loads(bad.read_text()), "facts": BASE["facts"]}  # with a host
    bad.write_text(json.dumps(mutated(good, change)))
    assert reading_the_run_names_or_reads(run_dir.path, bad.name) == "damaged", what
    assert bad.exists()  # readers name it and leave it; resume sets it aside
    assert any(bad.name in note for note in report.compare("r1", root=tmp_path / "out").skipped)
    assert bad.name in capsys.readouterr().err  # the report's warning
    run = Run.start(plan, fingerprints, resume="r1", outputs=tmp_path / "out")
    assert f"{bad.name}" in capsys.readouterr().out and not bad.exists()
    assert (run_dir.cells_dir / "damaged" / bad.name).is_file()
    assert run.kept == {"auto__code__ctx256__c1"}
    run.finish("interrupted", elapsed_s=0.0, counts={})


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=5)


def paths_of(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(data, dict):
        return found + [p for k, v in data.items() for p in paths_of(v, (*prefix, k))]
    if isinstance(data, list):
        return found + [p for i, v in enumerate(data[:3]) for p in paths_of(v, (*prefix, i))]
    return found


BASE = a_cell_dict()
PATHS = paths_of(BASE)


def with_picks(base: Any, picks: list[tuple[tuple[Any, ...], bool, Any]]) -> Any:
    """A copy of ``base`` with each pick applied: (path, delete, value); an empty path replaces
    the whole document; a pick whose path an earlier one changed away is passed over."""
    data = json.loads(json.dumps(base))
    for path, delete, value in picks:
        if not path:
            return value
        node = data
        try:
            for part in path[:-1]:
                node = node[part]
            if delete and isinstance(node, dict):
                node.pop(path[-1], None)
            else:
                node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier pick changed the path away
    return data


@settings(FUZZ, max_examples=200)
@given(picks=st.lists(st.tuples(st.sampled_from(PATHS), st.booleans(), JSON), min_size=1,
                      max_size=3))
def test_fuzz_a_mutated_cell_file_is_read_or_named_never_a_traceback(
        tmp_path_factory: pytest.TempPathFactory, picks: list[tuple[Any, bool, Any]]) -> None:
    data = with_picks(BASE, picks)
    run_dir = tmp_path_factory.mktemp("fuzz")
    cell = run_dir / "cells" / "c.json"
    cell.parent.mkdir()
    cell.write_text(json.dumps(data))
    reading_the_run_names_or_reads(run_dir, "c.json")


# --- 6. absurd sizes --------------------------------------------------------------------------

@pytest.mark.parametrize(("line", "key", "bound"), [
    ("requests_per_cell: 1000000000000", "requests_per_cell", "100000"),
    ("warmup_requests: 1000000000", "warmup_requests", "10000"),
    ("repeats: 1000000000", "repeats", "1000"),
    ("output_tokens: 1000000000000", "output_tokens", "1000000"),
    ("output_tokens: [64, 10000000]", "output_tokens", "1000000"),
    ("warmup_output_tokens: 1000000000", "warmup_output_tokens", "1000000"),
    ("contexts: [128, 100000000000]", "contexts", "10000000"),
    ("concurrency: [1, 1000000000]", "concurrency", "100000"),
])
def test_an_absurd_size_is_refused_at_load_naming_key_value_and_bound(
        tmp_path: Path, line: str, key: str, bound: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(f"extends: {EMBEDDED}\n{line}\n")
    with pytest.raises(sb.ParamsError) as err:
        sb.load_params(path)
    value = line.split(": ", 1)[1]
    assert err.value.key == key and err.value.file == str(path)
    assert bound in str(err.value) and value.strip("[]").split(", ")[-1] in str(err.value)
    at_bound = tmp_path / "ok.yaml"
    listed = f"[{bound}]" if line.endswith("]") else bound
    at_bound.write_text(f"extends: {EMBEDDED}\n{key}: {listed}\n")
    if key not in ("output_tokens", "contexts"):  # these the context guard judges too
        assert sb.load_params(at_bound) is not None


def test_a_plan_of_too_many_cells_is_refused_before_it_is_built(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    levels = list(range(1, 301))
    path.write_text(f"extends: {EMBEDDED}\nconcurrency: {levels}\nrepeats: 1000\n")
    with pytest.raises(sb.ParamsError, match="more than 100000") as err:
        sb.load_plan(path)
    assert err.value.file == str(path) and "repeats" in str(err.value)


@pytest.mark.parametrize("extra", [
    "", "repeats: 3", "output_tokens: [32, 64]\nconcurrency: [1, 2, 4]",
    "request_rate: {per_s: [1.0, 2.0]}\nconcurrency: [1, 2]",
    "request_rate: {profile: 3}\nconcurrency: [1, 4]\nrepeats: 2"])
def test_the_cell_count_is_the_plans(tmp_path: Path, extra: str) -> None:
    from specbench_lib.model.plan import _cell_count

    path = tmp_path / "p.yaml"
    path.write_text(f"extends: {EMBEDDED}\n{extra}\n")
    plan = sb.load_plan(path)
    assert _cell_count(plan.params, len(plan.servers)) == len(plan.cells) > 0


# --- 5. unwritable outputs --------------------------------------------------------------------

@pytest.fixture(params=["outputs a file", "parent a file"])
def unwritable(request: pytest.FixtureRequest, tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """An outputs folder that cannot be made (root writes through chmod): it, or its parent,
    is a regular file. Returns the outputs path and the file in the way."""
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    out = blocker if request.param == "outputs a file" else blocker / "outputs"
    monkeypatch.setenv("SPECBENCH_OUTPUTS", str(out))
    return out, blocker


@pytest.mark.parametrize("args", [["run", "tp1"], ["run", "tp1", "-p", "run_id", "r1"],
                                  ["run", "report"]])
def test_unwritable_outputs_are_one_line_and_exit_2(
        unwritable: tuple[Path, Path], no_kernel: list[dict[str, Any]],  # noqa: F811
        capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    out, blocker = unwritable
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("specbench: ") and "Traceback" not in err
    assert f"{blocker} is a file, not a folder" in err and "SPECBENCH_OUTPUTS" in err
    assert no_kernel == [] and blocker.read_text() == "not a folder"


def test_unwritable_outputs_stop_the_library_before_anything(
        tmp_path: Path, unwritable: tuple[Path, Path]) -> None:
    out, blocker = unwritable
    plan = small_plan(tmp_path)
    with pytest.raises(sb.StoreError, match="is a file, not a folder") as err:
        Run.start(plan, {c.cell_id: "fp" for c in plan.cells}, run_id="r1", outputs=out)
    assert err.value.path.startswith(str(blocker))
    from specbench_lib.sweep.preflightchecks import disk_check

    with pytest.raises(sb.PreflightError, match="cannot be written") as perr:
        disk_check(out)  # run_sweep's preflight names it before any server starts
    assert perr.value.path == str(out)
    assert disk_check(tmp_path / "fresh" / "outputs").endswith(f"free under {tmp_path}")


# --- 7. secrets in server logs; 8. server logs capped -----------------------------------------

SECRET = "sk-SECRET-7f3a9"


def secret_server_argv(mode: str) -> list[str]:
    """The fake server behind a launcher that echoes its argv (with ``--api-key``) and a Bearer
    header line to its log, as servers print their settings."""
    script = (f"import sys\nsys.path.insert(0, {str(ROOT / 'tests' / 'support')!r})\nimport fake_server\n"
              f"print('launched with', sys.argv, flush=True)\n"
              f"print('auth: Bearer abcdefgh12345678', flush=True)\n"
              f"sys.argv = ['fake_server', '--port', sys.argv[1], '--mode', {mode!r}]\n"
              f"fake_server.main()\n")
    return ["{binary}", "-c", script, "{port}", "--api-key", SECRET]


def fake_sweep(tmp_path: Path, argv: list[str]) -> sb.SweepResult:
    path = write_params(tmp_path, fake_plan(
        free_port(), argv=argv, phase="hostile", engine={"ready_timeout_s": 10}, contexts=[16, 32],
        output_tokens=4, warmup_requests=1,
        timeouts={"first_token_s": 3, "between_tokens_s": 2, "request_s": 6}))
    result = sb.run_sweep(sb.load_plan(path), outputs=tmp_path / "out", progress=False)
    assert isinstance(result, sb.SweepResult)
    return result


def test_secrets_in_the_servers_argv_never_reach_its_log_or_a_crashed_cell(tmp_path: Path) -> None:
    result = fake_sweep(tmp_path, secret_server_argv("cuda_crash"))
    log = (result.run_dir / "logs" / "auto.log").read_text()
    assert "launched with" in log and "CUDA error" in log  # the log is kept, and scanned
    assert SECRET not in log and "abcdefgh12345678" not in log and "***redacted***" in log
    crashed = [c for c in result.cells if c.status == "crashed"]
    assert crashed and all(SECRET not in c.facts.log_excerpt for c in crashed)
    assert "launched with" in crashed[0].facts.log_excerpt
    for path in result.run_dir.rglob("*"):
        assert not path.is_file() or SECRET not in path.read_text(errors="replace"), path


def test_a_log_write_failure_ends_the_config_with_a_verdict_and_closes_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = open

    class FullDisk:
        """The server's log file on a disk that fills after its first 40 bytes."""

        def __init__(self, path: Path) -> None:
            self._fh, self._room = real_open(path, "ab", buffering=0), 40

        def write(self, data: bytes) -> int:
            if len(data) > self._room:
                raise OSError(28, "No space left on device")
            self._room -= len(data)
            return self._fh.write(data)

        def close(self) -> None:
            self._fh.close()

    def opened(path: Path, mode: str = "r", *args: Any, **kw: Any) -> Any:
        return FullDisk(path) if mode == "ab" else real_open(path, mode, *args, **kw)

    monkeypatch.setattr(serverlog, "open", opened, raising=False)  # the pump's appends only
    result = fake_sweep(tmp_path, secret_server_argv("ok"))
    assert [c.status for c in result.cells] == ["crashed", "crashed"]
    for cell in result.cells:
        reason = cell.verdict.reasons[0]
        assert reason.code == "server_failed"
        assert "cannot write the server's log (No space left on device)" in reason.detail
    assert result.manifest["status"] != "running" and result.manifest["ended"]
    assert not (result.run_dir / ".lock").exists()


def test_a_server_writing_without_end_is_capped_and_its_crash_line_still_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serverlog, "LOG_CAP_BYTES", 1 << 20)
    script = ("import sys\nline = 'x' * 99 + '\\n'\n"
              "for _ in range(60000): sys.stdout.write(line)\n"  # 6 MB
              "print('CUDA error: an illegal memory access was encountered', flush=True)\n"
              "for _ in range(20000): sys.stdout.write(line)\n"
              "print('the very last line', flush=True)\n")
    log = tmp_path / "logs" / "spew.log"
    proc = ServerProcess(name="spew", argv=[sys.executable, "-c", script],
                         base_url="http://127.0.0.1:1", health_path="/health", log_path=log)
    proc.start()
    try:
        assert proc.exit_status(wait_s=120) == 0  # it wrote all it had (a hang guard)
        assert proc.crash_signature() == "CUDA error: an illegal memory access was encountered"
    finally:
        proc.stop()
    text = log.read_text()
    assert log.stat().st_size < (1 << 20) + 64 * 1024  # the cap, a note and the last lines
    assert "log capped at 1048576 bytes" in text and "bytes left out past the cap" in text
    assert text.rstrip().endswith("the very last line") and text.startswith("# argv: ")


def test_an_attached_servers_journal_copy_is_redacted_and_capped() -> None:
    crash = re.compile("CUDA error")
    body = b"".join(b"line %d uses %s\n" % (i, SECRET.encode()) for i in range(2000))
    data = body + b"CUDA error: boom\n" + body + b"the end\n"
    kept = serverlog.bounded_log(data, secrets=(SECRET,), signatures=(crash,), cap_bytes=4096)
    assert SECRET.encode() not in kept and b"***redacted***" in kept
    assert len(kept) < 4096 + 8192 and b"log capped at 4096 bytes" in kept
    assert b"CUDA error: boom\n" in kept and kept.endswith(b"the end\n")
    small = b"Authorization-free line\nsent Bearer abcdefghijkl\n"
    assert serverlog.bounded_log(small) == b"Authorization-free line\nsent Bearer ***redacted***\n"
    assert serverlog.argv_secrets(["srv", "--api-key", "k1", "--hf-token=t2", "--port", "8"]) == (
        "k1", "t2")


def test_past_the_cap_a_small_write_goes_to_the_tail_not_the_log(tmp_path: Path) -> None:
    read, write = os.pipe()
    log = tmp_path / "x.log"
    pump = serverlog.LogPump(log, read, cap_bytes=1000)
    for line in (b"y" * 99, b"z" * 1199):  # the second line crosses the cap
        os.write(write, line + b"\n")
        pump.settle(timeout_s=30)
    assert pump.dropped == 1200
    os.write(write, b"small\n")  # fits under the cap by size, but the log is capped now
    os.close(write)
    pump.join(timeout_s=30)
    text = log.read_text()
    assert text.startswith("y" * 99 + "\n# specbench: log capped at 1000 bytes")
    assert text.index("small") > text.index("bytes left out past the cap")
    assert text.endswith("z" * 1199 + "\nsmall\n") and pump.error is None


@pytest.mark.parametrize("change", [{"plan_fingerprints": ["a"]}, {"params": "x"},
                                    {"attempts": {"n": 1}}, {"environment": {"git": "x"}}])
def test_a_manifest_of_another_shape_is_named_by_every_reader(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any]) -> None:
    plan, fingerprints, run_dir = recorded_run(tmp_path)
    run_dir.manifest_path.write_text(json.dumps({**run_dir.manifest(), **change}))
    [listed] = list_runs(tmp_path / "out")
    if "environment" in change:  # a section of the right type, odd inside: read around
        assert listed["error"] is None and listed["commit"] == ""
        sb.SweepResult(run_dir.path).text()
        return
    assert "manifest is not of its shape" in listed["error"] and listed["status"] == "unreadable"
    with pytest.raises(sb.StoreError, match="manifest is not of its shape") as err:
        sb.SweepResult(run_dir.path)
    assert err.value.path == str(run_dir.manifest_path)
    with pytest.raises(sb.StoreError, match="cannot resume run r1"):
        Run.start(plan, fingerprints, resume="r1", outputs=tmp_path / "out")
    assert not (run_dir.path / ".lock").exists()


def test_a_hand_edited_decided_ok_with_no_requests_is_not_ok() -> None:
    """Issue 42: ``facts.decided: ok`` counted as ok whatever the requests; nothing decides a
    cell ok before its requests, so such a record is judged by them (none: invalid)."""
    from specbench_lib.analysis.validate import judge, judge_inputs
    from specbench_lib.model.records import CellFacts
    from specbench_lib.model.verdict import Verdict

    verdict = judge([], CellFacts(decided=Verdict("ok")), judge_inputs(2))
    assert verdict.status == "invalid" and "too_few_completed" in verdict.codes, verdict
    skipped = Verdict("skipped", ())
    assert judge([], CellFacts(decided=skipped), judge_inputs(2)) is skipped  # as decided


def test_a_cell_file_copied_under_another_cells_name_is_not_counted_twice(
        tmp_path: Path) -> None:
    """Issue 42: a cell file copied under another cell's name was read as a second record of
    its cell (counted twice); it is a damaged file, named, that a resume sets aside."""
    import shutil

    from cellfactory import make_cell

    from specbench_lib.runs.run import RunDir

    run = RunDir(tmp_path / "run")
    run.cells_dir.mkdir(parents=True)
    cell = make_cell("auto", "auto", None)
    run.write_cell(cell)
    shutil.copy(run.cell_path(cell.cell_id), run.cells_dir / "other__code__ctx16__c1.json")
    cells, damaged = run.read_cells()
    assert [c.cell_id for c in cells] == [cell.cell_id]
    (error,) = damaged
    assert f"holds cell {cell.cell_id}" in str(error) and "other__code__ctx16__c1.json" in str(error)


def test_a_run_folder_killed_before_its_manifest_is_listed_unrecorded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 42: a SIGKILL before the sweep wrote its manifest left a folder (its executed
    notebook) that ``specbench runs`` never listed."""
    from specbench_lib.cli import main

    folder = tmp_path / "runs" / "20261204T000000Z_tp1_aaaaaa"
    folder.mkdir(parents=True)
    (folder / "tp1.ipynb").write_text("{}")
    assert [(r["run_id"], r["status"]) for r in list_runs(tmp_path)] == [
        ("20261204T000000Z_tp1_aaaaaa", "unrecorded")]
    monkeypatch.setenv("SPECBENCH_OUTPUTS", str(tmp_path))
    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    assert "20261204T000000Z_tp1_aaaaaa" in out and "unrecorded" in out
    assert "nothing to resume: remove the folder" in out
