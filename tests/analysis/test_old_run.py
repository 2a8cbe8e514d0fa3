"""A run directory written before stored stalls and the catalogue (schema 2, tests/data/old_run,
made by its make_old_run.py on the fake server) loads with this specbench: its cells migrate on
read, their verdicts and metrics are derived again, coalescing is decided from stored reads where
a cell has them and from the counts decided while measuring where it has not, and a resume does
not measure them again because the schema moved on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specbench_lib import SweepResult
from specbench_lib.analysis.coalescing import coalesced
from specbench_lib.analysis.metrics import CellMetrics
from specbench_lib.analysis.metricset import columns
from specbench_lib.model.records import SCHEMA_VERSION, CellRecord
from specbench_lib.runs.run import RunDir, _matching_ok

OLD = next((Path(__file__).resolve().parents[1] / "data" / "old_run").glob("2*_old_*"))
OK = "auto__code__ctx16__c2__q30"
LATE = "auto__code__ctx16__c2__q2000"  # scheduled at 2000/s: the client could not keep up


@pytest.fixture
def run(tmp_path: Path) -> Path:
    copy = tmp_path / "runs" / OLD.name
    shutil.copytree(OLD, copy)
    return copy


def test_an_old_run_loads_with_its_verdicts_derived_again(run: Path) -> None:
    assert all(json.loads(p.read_text())["schema_version"] == 2
               for p in (run / "cells").glob("*.json"))
    result = SweepResult(run)
    assert result.counts() == {"ok": 1, "invalid": 3, "crashed": 0, "skipped": 0}
    codes = {c.cell_id: c.verdict.codes for c in result.cells}
    assert codes == {OK: set(), LATE: {"rate_not_reached"},
                     "auto__code__ctx2046__c2__q30": {"context_overflow"},
                     "auto__code__ctx2046__c2__q2000": {"context_overflow"}}
    ok = result.cell(OK)
    assert all(r.multi_reads is None and r.stalls is None for r in ok.requests)  # not recorded
    assert ok.metrics is not None and ok.metrics["n_requests"] == 3
    stored = json.loads((run / "cells" / f"{OK}.json").read_text())["metrics"]
    assert ok.metrics["output_tok_s"] == pytest.approx(stored["output_tok_s"])
    counters_only = {"position_acceptance_rate", "acceptance_histogram",  # vLLM's counters
                     "tree_node_acceptance_rate"}  # a tree config's (issue 48)
    gpus = set(columns("gpu"))  # only where the cell's GPUs were sampled (none then, none here)
    assert set(ok.metrics) == set(CellMetrics.__annotations__) - counters_only - gpus  # typed, whole
    table = result.table()
    assert len(table) == 1  # the one ok cell's row
    written = CellRecord.from_dict(json.loads((run / "cells" / f"{OK}.json").read_text()))
    assert written.to_dict()["schema_version"] == SCHEMA_VERSION  # migrated: written as 3


def test_old_cells_keep_the_coalescing_decided_while_measuring(run: Path) -> None:
    path = run / "cells" / f"{OK}.json"
    data = json.loads(path.read_text())
    for request in data["requests"]:
        if not request["warmup"]:
            request["first_token_coalesced"] = True  # as a schema-2 dispatcher decided
    path.write_text(json.dumps(data))
    cell = SweepResult(run).cell(OK)
    assert cell.verdict.codes == {"coalesced_reads"}
    assert all(coalesced(r)[1] for r in cell.measured)


def test_stored_reads_and_stalls_decide_coalescing_on_read(run: Path) -> None:
    path = run / "cells" / f"{OK}.json"
    data = json.loads(path.read_text())
    data["schema_version"] = SCHEMA_VERSION
    data["judge"]["max_coalesced_fraction"] = 0.05  # the default (the fixture ran lenient)
    for request in data["requests"]:
        times = request["token_times"]
        read_at = times[-1]
        request["multi_reads"] = [[read_at, 3, False]] if not request["warmup"] else []
        request["stalls"] = [[read_at - 0.05, read_at]]  # 50 ms: it hid several deliveries
        request["coalesced_tokens"] = 0
    path.write_text(json.dumps(data))
    cell = SweepResult(run).cell(OK)
    assert cell.verdict.codes == {"coalesced_reads"}, cell.verdict.reasons
    assert [coalesced(r)[0] for r in cell.measured] == [3, 3, 3]


def test_a_resume_keeps_the_old_ok_cell(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cells, damaged = RunDir(run).read_cells()
    assert len(cells) == 4 and not damaged
    prints = {c.cell_id: c.fingerprint for c in cells}
    assert _matching_ok(RunDir(run), prints) == {OK}  # not measured again for the schema bump
    assert "old schema" not in capsys.readouterr().out
