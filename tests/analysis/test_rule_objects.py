"""A cell rule is one object in one file of ``analysis/rules/``, found by the registry: a new
rule with a threshold is that file and its test (issue 31)."""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from cellfactory import make_cell
from paramsfiles import write_params

from specbench_lib.analysis import rules as rules_folder
from specbench_lib.analysis import ruleset
from specbench_lib.analysis.analyse import verdict_of
from specbench_lib.analysis.rule import Rule, param
from specbench_lib.core.errors import ParamsError, UnknownReason
from specbench_lib.model import catalogue
from specbench_lib.model.layering import load_params
from specbench_lib.model.records import CellRecord
from specbench_lib.model.verdict import Reason

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import rules_reference  # noqa: E402

SMALL = ROOT / "params" / "embedded_small.yaml"

# the whole of a new rule: this text, as its own module, and nothing else in the library
TOO_SLOW = '''"""``too_slow``: a measured request whose last token came after thresholds.max_last_token_s."""

from specbench_lib.analysis.rule import Judged, Rule
from specbench_lib.model.catalogue import Threshold
from specbench_lib.model.verdict import Reason, Verdict


class TooSlow(Rule):
    code = "too_slow"
    protects = "a cell whose requests took longer than the study allows"
    thresholds = (Threshold("thresholds.max_last_token_s", 1.5),)
    order = 90

    def judge(self, verdict: Verdict, cell: Judged) -> Verdict:
        limit = self.limit(cell, "thresholds.max_last_token_s")
        slow = [r.index for r in cell.measured if r.token_times and r.token_times[-1] > limit]
        if not slow:
            return verdict
        reason = Reason(self.code, f"requests {slow} ended after {limit:g} s")
        return Verdict("invalid", (*verdict.reasons, reason), verdict.failed)
'''


@pytest.fixture
def too_slow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rule]:
    """The rule above in a package of its own, discovered and judged with the library's rules
    (the catalogue's and the registry's state restored after the test)."""
    package = tmp_path / "more_rules"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "too_slow.py").write_text(TOO_SLOW)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(catalogue, "BY_CODE", dict(catalogue.BY_CODE))
    with pytest.raises(UnknownReason):
        Reason("too_slow")
    found = ruleset.discover(importlib.import_module("more_rules"))
    monkeypatch.setattr(ruleset, "RULES", (*ruleset.RULES, *found))
    yield found[0]
    sys.modules.pop("more_rules.too_slow", None)
    sys.modules.pop("more_rules", None)


def with_params(tmp_path: Path, text: str) -> Path:
    return write_params(tmp_path, SMALL, text=text)


def test_a_new_rule_file_is_judged_documented_and_reads_its_threshold_from_params(
        too_slow: Rule, tmp_path: Path) -> None:
    assert [r.code for r in ruleset.RULES][-1] == "too_slow"
    assert catalogue.level("too_slow") == "cell"  # a Reason with its code is known now
    cell = make_cell("auto", "auto", None, tok_s=8.0)  # 16 tokens, the last at 2.0 s
    assert cell.requests[0].token_times[-1] == pytest.approx(2.0)

    # its threshold, filled from params by key into the cell's judge inputs
    default = ruleset.thresholds_of(load_params(SMALL))
    assert default["thresholds.max_last_token_s"] == 1.5
    loose = ruleset.thresholds_of(load_params(with_params(
        tmp_path, "thresholds:\n  max_last_token_s: 3.0\n")))
    assert loose["thresholds.max_last_token_s"] == 3.0

    judged = replace(cell, judge=replace(cell.judge, thresholds=default))
    verdict = verdict_of(judged)
    assert verdict.status == "invalid" and verdict.codes == {"too_slow"}
    assert verdict.reasons[0].detail == "requests [0] ended after 1.5 s"
    assert verdict_of(replace(cell, judge=replace(cell.judge, thresholds=loose))).ok

    # stored with the cell, read back, judged on read; a cell without it reads the default
    again = CellRecord.from_dict(json.loads(json.dumps(replace(judged, judge=replace(
        cell.judge, thresholds=loose)).to_dict())))
    assert again.judge.thresholds["thresholds.max_last_token_s"] == 3.0 and verdict_of(again).ok
    assert verdict_of(cell).codes == {"too_slow"}

    # documented: the generated rules page has its row with the threshold's key and default
    row = next(r for r in rules_reference.rows() if r.startswith("| `too_slow` |"))
    assert row.startswith("| `too_slow` | cell | a cell whose requests took longer than the "
                          "study allows | `thresholds.max_last_token_s` = `1.5` |")


def test_a_thresholds_key_no_rule_reads_is_refused_naming_it(
        too_slow: Rule, tmp_path: Path) -> None:
    params = load_params(with_params(tmp_path, "thresholds:\n  max_last_tokn_s: 3.0\n"))
    with pytest.raises(ParamsError, match=r"thresholds\.max_last_tokn_s is no rule's threshold "
                                          r".*thresholds\.max_last_token_s") as err:
        ruleset.thresholds_of(params)
    assert err.value.key == "thresholds.max_last_tokn_s" and err.value.value == 3.0


def test_without_the_rule_its_key_is_refused_and_its_code_unknown(tmp_path: Path) -> None:
    params = load_params(with_params(tmp_path, "thresholds:\n  max_last_token_s: 3.0\n"))
    with pytest.raises(ParamsError, match="own thresholds: none"):
        ruleset.thresholds_of(params)
    with pytest.raises(UnknownReason):
        Reason("too_slow")


def test_every_module_of_the_rules_folder_is_one_rule_with_its_entry() -> None:
    modules = {i.name for i in pkgutil.iter_modules(rules_folder.__path__)}
    assert len(ruleset.RULES) == len(modules) >= 8
    assert {type(r).__module__.rsplit(".", 1)[1] for r in ruleset.RULES} == modules
    orders = [r.order for r in ruleset.RULES]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)  # one place each
    for rule in ruleset.RULES:
        assert rule.code in catalogue.codes()
        if rule.declares:  # its entry is its own, with its thresholds and what it protects
            assert catalogue.BY_CODE[rule.code] == rule.entry() and rule.protects
        else:  # a request problem the rule also judges at the cell: the catalogue's entry
            assert rule.code in {c.name for c in catalogue.CATALOGUE} and not rule.protects


def test_schema3_cells_keep_the_verdicts_their_specbench_gave() -> None:
    """Cells written and judged by 1d4f366, each threshold a judge field of its own
    (tests/data/schema3_cells: every status, rule and tolerance 4000 random cells had), read
    through the migration and judged by the rule objects: the same verdicts, reason by reason."""
    stored = json.loads((ROOT / "tests" / "data" / "schema3_cells" / "cells.json").read_text())
    cells = stored["cells"]
    assert {c["schema_version"] for c in cells} == {3}
    seen = {r["code"] for c in cells for r in c["verdict"]["reasons"]}
    # each rule object has cells it judged, but for the rules whose evidence those cells lack
    # (unplanned_reasoning: a request's ``reasoning``, recorded since issue 38; concurrency_not_held:
    # a server's KV pool and a request's retractions, since issue 48; impossible_spec_stats: a
    # rule added since, judged on counters these random cells made up)
    assert {r.code for r in ruleset.RULES} - {"unplanned_reasoning", "concurrency_not_held",
                                              "impossible_spec_stats"} <= seen
    assert any(r.get("tolerated") for c in cells for r in c["verdict"]["reasons"])
    for data in cells:
        cell = CellRecord.from_dict(json.loads(json.dumps(data)))
        assert cell.judge.thresholds["max_failed_fraction"] == data["judge"]["max_failed_fraction"]
        now = verdict_of(cell).to_dict()
        # impossible_spec_stats (issue 49) judges counters these random cells made up
        now["reasons"] = [r for r in now["reasons"] if r["code"] != "impossible_spec_stats"]
        assert now == data["verdict"], data["cell_id"]


def test_a_rule_whose_key_params_lacks_is_named() -> None:
    params = load_params(SMALL)
    assert param(params, "host.max_other_gpu_mib") == params.host.max_other_gpu_mib
    assert param(params, "thresholds.not_set", 7) == 7  # a rule's own key: its default
    with pytest.raises(AttributeError, match="params has no key 'host.max_other_gpu_mb'"):
        param(params, "host.max_other_gpu_mb")
