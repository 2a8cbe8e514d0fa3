"""The measurement code's hash (issue 31, part 3): a hash of what measures, by content, not by
path. Moving or renaming a file, or editing how results render, leaves stored cells current;
editing the code that builds, sends, times or records requests makes them stale."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from specbench_lib.runs import codehash

PACKAGE = Path(codehash.__file__).resolve().parent.parent


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    target = tmp_path / "specbench_lib"
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def changed(copy: Path, module: str, text: str) -> str:
    path = copy / module
    path.write_text(path.read_text() + text)
    return codehash.content_hash(copy)


def test_the_copy_hashes_as_the_package(copy: Path) -> None:
    assert codehash.content_hash(copy) == codehash.content_hash(PACKAGE)


@pytest.mark.parametrize("module", [
    "analysis/analyse.py", "analysis/validate.py", "analysis/metrics.py", "analysis/coalescing.py",
    "model/catalogue.py", "runs/results.py", "runs/run.py", "report/export.py", "core/display.py",
    "core/tables.py", "report/pages.py", "report/plots.py"])
def test_the_analysis_and_how_results_render_are_not_measuring_code(copy: Path, module: str) -> None:
    base = codehash.content_hash(copy)
    assert module not in codehash.measuring_modules(copy)
    assert changed(copy, module, "\n\n_ANALYSIS_ONLY = 1\n") == base


@pytest.mark.parametrize("module", [
    "client/dispatch.py", "client/warmclient.py", "client/http1.py", "client/wire.py", "host/stalls.py",
    "client/streamread.py", "prompts/workload.py", "servers/engines/llamacpp.py",
    "model/records.py", "model/verdict.py", "model/cellspec.py", "model/workloadparams.py",
    "sweep/loadprofile.py", "host/load.py", "prompts/promptbook.py",
    "sweep/serversweep.py", "sweep/serverstart.py", "sweep/cellmeasure.py", "sweep/serverstop.py",
    "sweep/serverstate.py", "sweep/driver.py"])
def test_code_that_sends_times_or_records_requests_is_measuring_code(copy: Path, module: str) -> None:
    base = codehash.content_hash(copy)
    assert module in codehash.measuring_modules(copy)
    assert changed(copy, module, "\n# a comment, and a docstring below: not what it does\n") == base
    assert changed(copy, module, "\n\n_HOW_REQUESTS_ARE_SENT = 2\n") != base


def test_moving_and_renaming_a_measuring_module_leaves_the_hash(copy: Path) -> None:
    base = codehash.content_hash(copy)
    (copy / "client" / "wire.py").rename(copy / "host" / "framing.py")  # another folder, name
    http1 = copy / "client" / "http1.py"
    before = http1.read_text()
    assert "from .wire import " in before
    http1.write_text(before.replace("from .wire import ", "from ..host.framing import "))
    assert "host/framing.py" in codehash.measuring_modules(copy)
    assert "client/wire.py" not in codehash.measuring_modules(copy)
    assert codehash.content_hash(copy) == base


def test_a_module_the_measuring_path_starts_to_import_joins_the_hash(copy: Path) -> None:
    assert "analysis/latency.py" not in codehash.measuring_modules(copy)
    changed(copy, "host/stalls.py", "\n\ndef _later() -> None:\n"
            "    from ..analysis.latency import deliveries  # noqa: F401\n")
    assert "analysis/latency.py" in codehash.measuring_modules(copy)  # a function-level import


def test_cells_record_the_content_hash_itself(copy: Path) -> None:
    # the flat layout's alias table (RECORDED_AS) could match no code after the move: gone
    own = codehash.content_hash(copy)
    assert codehash.measurement_code_hash.__wrapped__(copy) == own
    assert not hasattr(codehash, "RECORDED_AS")
    changed(copy, "client/dispatch.py", "\n\n_SENT_OTHERWISE = 3\n")
    assert codehash.measurement_code_hash.__wrapped__(copy) == codehash.content_hash(copy) != own


def test_the_kept_hash_is_the_computed_one_and_a_changed_source_is_a_new_key(
        copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    kept = codehash._stored_content_hash
    assert kept(copy) == codehash.content_hash(copy)
    (stored,) = (tmp_path / "cache" / "codehash").iterdir()
    stored.write_text("not a hash\n")  # a damaged entry is computed again, never returned
    assert kept(copy) == codehash.content_hash(copy)
    base = kept(copy)
    assert changed(copy, "client/dispatch.py", "\n\n_SENT_OTHERWISE = 1\n") != base
    assert kept(copy) == codehash.content_hash(copy) != base  # not the old entry's hash
    assert len(list((tmp_path / "cache" / "codehash").iterdir())) == 2
