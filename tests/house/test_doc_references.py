"""Docs that cannot drift (issue 40): every module, class, function or name a docstring's
cross-reference (``:mod:``, ``:class:``, ``:func:``, ``:meth:``, ``:data:``, ``:attr:``) or a
docs page (a ``path/module.py``, a backticked dotted name) names exists; "where a change goes"
is a table whose every name is checked against the code. A planted stale name fails each check."""

from __future__ import annotations

from pathlib import Path

import docrefs
import pytest

ROOT = docrefs.ROOT
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])


def test_every_docstring_reference_names_code_that_exists() -> None:
    counted, stale = 0, []
    for path in sorted(docrefs.PACKAGE.rglob("*.py")):
        n, found = docrefs.stale_in_source(path)
        counted, stale = counted + n, stale + found
    assert counted > 400  # the references are read at all
    assert stale == [], "name what exists now (a module moved to a folder: its new dotted name)"


def test_every_path_and_dotted_name_a_page_names_exists() -> None:
    counted, stale = 0, []
    for page in PAGES:
        n, found = docrefs.stale_in_page(page)
        counted, stale = counted + n, stale + found
    assert counted > 300
    assert stale == []


def test_a_planted_stale_name_is_found_in_a_docstring(tmp_path: Path) -> None:
    source = docrefs.PACKAGE / "analysis" / "best.py"  # read as that module, from a copy
    text = source.read_text()
    planted = text.replace('"""', '"""See :mod:`~.errors` and :func:`~.claim.no_such_claim`. ', 1)
    _, stale = docrefs.stale_in_source(source, planted)
    assert [s.split(": ", 1)[1] for s in stale] == ["~.errors", "~.claim.no_such_claim"]
    # the flat layout's names: a relative name is read in the module's own package
    _, stale = docrefs.stale_in_source(source, '""":mod:`.claim`, :class:`~.records.CellRecord`, '
                                       ':data:`~specbench_lib.records.SCHEMA_VERSION`"""')
    assert [s.split(": ", 1)[1] for s in stale] == ["~.records.CellRecord",
                                                    "~specbench_lib.records.SCHEMA_VERSION"]


def test_a_planted_stale_name_is_found_in_a_page(tmp_path: Path) -> None:
    page = tmp_path / "docs" / "planted.md"
    page.parent.mkdir()
    text = ("The hash (`runs/codehash.py`, `codehash.measuring_modules`) over `hostload.py`, "
            "`analysis/hostload.py` and `provenance.no_such_name`; `specmetrics.spec_metrics`, "
            "`slo.percentile` (a params key), `results.csv` (a file), `facts.host.gpu` (a record's).")
    page.write_text(text)
    refs, stale = docrefs.stale_in_page(page)
    assert stale == ["planted.md: hostload.py", "planted.md: analysis/hostload.py",
                     "planted.md: provenance.no_such_name"]
    assert refs == 6  # 4 paths, 2 code names; the params key, file and record path are not code


def _change_table() -> list[list[str]]:
    return docrefs.change_table()


def test_where_a_change_goes_is_a_table_of_names_that_exist() -> None:
    rows = _change_table()
    assert len(rows) >= 8
    page = ROOT / "docs" / "architecture.md"
    for row in rows:
        text = " ".join(row)
        names = docrefs.DOTTED.findall(text)
        paths = [p for p in docrefs.PATH.findall(text) if "<" not in p]
        assert names or paths, f"a row that names no code: {row[0]}"
        assert [n for n in names if docrefs.dotted_exists(n) is not True] == [], row[0]
        assert [p for p in paths if not docrefs.path_exists(p, page)] == [], row[0]
        for folder in docrefs.FOLDER.findall(text):  # `analysis/rules/<code>.py`: its folder
            assert (docrefs.PACKAGE / folder).is_dir() or (ROOT / folder).is_dir(), folder


@pytest.mark.parametrize("what, name", [
    ("engine", "specbench_lib.servers.engines.ADAPTERS"),
    ("workload source", "specbench_lib.model.sources.SOURCES"),
    ("metric", "specbench_lib.analysis.metricset"),
    ("cell rule", "specbench_lib.analysis.ruleset"),
    ("run directory", "specbench_lib.runs.rundir.RunDir")])
def test_each_kind_of_change_names_its_one_place(what: str, name: str) -> None:
    rows = {row[0].strip("* "): " ".join(row[1:]) for row in _change_table()}
    assert what in rows, f"'{what}' has no row"
    short = name.removeprefix("specbench_lib.")
    assert f"`{name}`" in rows[what] or f"`{short}`" in rows[what], (what, rows[what])
