"""A disk that fills mid-sweep (issue 32): the run ends ``interrupted`` with a one-line error,
the cells of the config whose write failed are ``crashed`` with the reason (``write_failed``)
as far as the disk takes them, ``results.csv`` is whole or absent (never empty), no temporary
file is left, the data already measured is safe, and a resume completes the run.

The disk is the store's own ``open`` (every atomic write of a cell, the manifest or the answer
goes through it): from a chosen write on, writing raises ``ENOSPC`` as a full disk does, for
that one write (space freed by another process at once) or for good.
"""

from __future__ import annotations

import builtins
import errno
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fakeparams import fake_argv
from paramsfiles import argv_of, fake_plan, write_params
from ports import free_port

import specbench_lib as sb
from specbench_lib.core import store
from specbench_lib.runs.run import list_runs

FULL = OSError(errno.ENOSPC, "No space left on device")


class _Refusing:
    """A file whose writes fail as on a full disk."""

    def __init__(self, fh: Any) -> None:
        self.fh = fh

    def write(self, data: Any) -> int:
        raise OSError(FULL.errno, FULL.strerror)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fh, name)

    def __enter__(self) -> _Refusing:
        return self

    def __exit__(self, *exc: object) -> None:
        self.fh.close()


class Disk:
    """Fills at the first write of a file whose name has ``at`` in it; ``stays_full``: every
    write after it fails too."""

    def __init__(self, at: str, *, stays_full: bool) -> None:
        self.at, self.stays_full, self.full, self.refused = at, stays_full, False, 0

    def open(self, path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        fh = builtins.open(path, mode, *args, **kwargs)
        if "w" not in mode:
            return fh
        if (self.full and self.stays_full) or (not self.full and self.at in Path(path).name):
            self.full = True
            self.refused += 1
            return _Refusing(fh)
        return fh


def _plan(tmp: Path) -> sb.Plan:
    path = write_params(tmp, fake_plan(
        free_port(), argv=fake_argv(interval=0.002), phase="diskfull",
        configs=[{"name": "auto", "method": "auto"},
                 {"name": "ngram", "method": "ngram", "budgets": [4, 8],
                  "argv": argv_of(interval=0.002, budget=True)}],
        contexts=[32, 64], warmup_requests=1, cell_order="fixed"), name="disk.yaml")
    return sb.load_plan(path)


def _temporaries(run_dir: Path) -> list[Path]:
    return [p for p in run_dir.rglob("*.tmp")]


def test_a_disk_full_for_a_moment_ends_interrupted_with_the_configs_cells_crashed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan(tmp_path)
    disk = Disk("ngram-b4__code__ctx32", stays_full=False)
    monkeypatch.setattr(store, "open", disk.open, raising=False)
    with pytest.raises(sb.StoreError) as err:
        sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    message = str(err.value)
    assert "No space left on device" in message and "\n" not in message
    assert "resume" in message and disk.refused == 1
    [run_dir] = (tmp_path / "out" / "runs").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    result = sb.SweepResult(run_dir)
    cells = {c.cell_id: c for c in result.cells}
    assert {cells[f"auto__code__ctx{n}__c1"].status for n in (32, 64)} == {"ok"}  # safe
    for n in (32, 64):  # the config whose write failed: crashed with the reason, not missing
        cell = cells[f"ngram-b4__code__ctx{n}__c1"]
        assert cell.status == "crashed" and cell.verdict.reasons[0].code == "write_failed"
        assert "No space left on device" in cell.verdict.reasons[0].detail
    assert not any(c.startswith("ngram-b8") for c in cells)  # the sweep stopped there
    csv = run_dir / "results.csv"
    assert csv.stat().st_size > 0 and set(pd.read_csv(csv)["config"]) == {"auto"}
    assert _temporaries(run_dir) == []

    monkeypatch.undo()  # space freed: a resume measures the rest
    again = sb.run_sweep(plan, resume=run_dir.name, outputs=tmp_path / "out", progress=False)
    assert again.counts()["ok"] == len(plan.cells)


def test_a_disk_that_stays_full_leaves_no_empty_or_temporary_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan(tmp_path)
    disk = Disk("ngram-b4__code__ctx32", stays_full=True)
    monkeypatch.setattr(store, "open", disk.open, raising=False)
    real_to_csv = pd.DataFrame.to_csv

    def full_csv(frame: pd.DataFrame, path: Any = None, **kwargs: Any) -> Any:
        if disk.full and path is not None:
            Path(path).write_text("")  # created, then nothing fits: what pandas leaves
            raise OSError(FULL.errno, FULL.strerror)
        return real_to_csv(frame, path, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_csv", full_csv)
    with pytest.raises(sb.StoreError, match="No space left on device"):
        sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    [run_dir] = (tmp_path / "out" / "runs").iterdir()
    assert not (run_dir / "results.csv").exists()  # absent, never empty
    assert _temporaries(run_dir) == []
    monkeypatch.undo()
    result = sb.SweepResult(run_dir)  # what was measured before is intact
    assert {c.cell_id for c in result.cells if c.status == "ok"} == {
        "auto__code__ctx32__c1", "auto__code__ctx64__c1"}
    [listed] = list_runs(tmp_path / "out")
    assert listed["status"] == "died"  # the manifest could not say more: resume it
    again = sb.run_sweep(plan, resume=run_dir.name, outputs=tmp_path / "out", progress=False)
    assert again.counts()["ok"] == len(plan.cells)
