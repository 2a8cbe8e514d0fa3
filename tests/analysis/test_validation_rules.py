"""Each validation rule: a case that triggers it and one that does not."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from specbench_lib.analysis.ruleset import RULES, thresholds_of
from specbench_lib.analysis.validate import judge_cell, request_problems
from specbench_lib.core.errors import UnknownReason
from specbench_lib.model import catalogue, params
from specbench_lib.model.catalogue import BY_CODE, LEVELS, entries
from specbench_lib.model.catalogue import codes as known_codes
from specbench_lib.model.layering import load_params
from specbench_lib.model.records import RequestRecord
from specbench_lib.model.verdict import Reason
from specbench_lib.servers.engines import FinalStats

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "specbench_lib"


def good(index: int = 0, *, warmup: bool = False) -> RequestRecord:
    rec = RequestRecord(index=index, warmup=warmup, prompt_tokens_planned=16, max_tokens=8)
    rec.status = 200
    rec.token_times = [0.1 * (i + 1) for i in range(8)]
    rec.final = FinalStats(prompt_tokens=16, completion_tokens=8, draft_tokens=4,
                           accepted_tokens=2, verify_steps=6)
    return rec


def broken(rule: str) -> RequestRecord:
    """A request that breaks exactly ``rule``."""
    rec = good()
    assert rec.final is not None
    if rule in ("http_400", "error_in_stream", "timeout", "connection_error"):
        rec.final, rec.token_times, rec.error_kind, rec.error = None, [], rule, "boom"
    elif rule == "incomplete_stream":
        rec.final = None
    elif rule == "empty_output":
        rec.final.completion_tokens, rec.token_times = 0, []
    elif rule == "short_output":
        rec.final.completion_tokens, rec.token_times = 5, rec.token_times[:5]
    elif rule == "long_output":
        rec.final.completion_tokens, rec.token_times = 9, [*rec.token_times, 0.9]
    elif rule == "truncated":
        rec.final.truncated = True
    elif rule == "prompt_mismatch":
        rec.final.prompt_tokens = 15
    elif rule == "prefix_cache_hit":
        rec.final.cached_tokens = 12
    elif rule == "token_count_mismatch":
        rec.chunk_sizes, rec.token_times = [1] * 4, rec.token_times[:4]
    elif rule == "missing_spec_stats":
        rec.final.draft_tokens = rec.final.verify_steps = None
    return rec


REQUEST_RULES = ["http_400", "error_in_stream", "timeout", "connection_error", "incomplete_stream",
                 "empty_output", "short_output", "long_output", "truncated", "prompt_mismatch",
                 "prefix_cache_hit", "token_count_mismatch", "missing_spec_stats"]


def codes(reasons: list[str] | tuple[str, ...]) -> set[str]:
    return {r.split(":")[0] for r in reasons}


def test_every_rule_is_listed_and_tested() -> None:
    names = {c.name for c in entries() if c.level in ("request", "cell")}
    assert names == {"http_<status>", *REQUEST_RULES[1:], "server_died", "crash_signature",
                     "log", "returncode",  # evidence with server_died / server_failed
                     "too_few_completed", "failed_fraction", "context_overflow",
                     "rate_not_reached",  # a flag in the metrics: tests/analysis/test_rate_flag.py
                     "coalesced_reads",  # tests/analysis/test_coalesced_reads.py
                     "busy_host",  # tests/host/test_hostload.py, tests/host/test_busy_host.py
                     "busy_gpu",  # tests/host/test_gpu_telemetry.py
                     "seen_prompt",  # tests/sweep/test_isolation.py
                     "unplanned_reasoning",  # tests/servers/test_engines_meet.py
                     "impossible_spec_stats",  # tests/servers/test_counter_lies.py
                     "no_profile_rate",  # tests/sweep/test_load_axes.py
                     "concurrency_not_held",  # tests/servers/test_sglang_research.py
                     "kv_pool_too_small"}  # tests/sweep/test_kvpool.py, test_sglang_research.py
    assert all(c.protects and c.level in LEVELS for c in entries())
    assert len(BY_CODE) == len(entries())  # one entry a code
    # every cell rule object's entry is the catalogue's (the registry added it)
    assert all(BY_CODE[r.code] == r.entry() for r in RULES if r.declares)


def _minted() -> dict[str, list[str]]:
    """Every reason code specbench_lib names: ``Reason("code", ...)`` and ``C.code`` (the
    catalogue's names, which minting sites and request error kinds use)."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            code = None
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "C":
                code = node.attr
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Reason" \
                    and node.args and isinstance(node.args[0], ast.Constant):
                code = str(node.args[0].value)
            if code is not None:
                found.setdefault(code, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_reason_specbench_builds_has_a_catalogue_entry_and_every_entry_is_built() -> None:
    minted = _minted()
    unknown = {c: where for c, where in minted.items() if c not in known_codes()}
    assert not unknown, f"reason codes missing from specbench_lib/model/catalogue.py: {unknown}"
    unused = known_codes() - set(minted) - {"http_<status>"}  # http_<status>: catalogue.http_status
    assert not unused, f"catalogue entries no code builds: {sorted(unused)}"


def test_every_catalogue_entry_is_documented_in_the_rules_page() -> None:
    page = (ROOT / "docs" / "rules.md").read_text()
    missing = [c.name for c in entries() if f"| `{c.name}` | {c.level} |" not in page]
    assert not missing, f"run: .venv/bin/python scripts/rules_reference.py --write ({missing})"


def test_an_unknown_code_is_a_programming_error_and_http_statuses_are_known() -> None:
    with pytest.raises(UnknownReason):
        Reason("no_such_rule", "x")
    assert Reason("http_503", "busy").code == "http_503"
    assert catalogue.entry("http_404").name == "http_<status>"
    assert catalogue.level("busy_host") == "cell" and catalogue.level("worker_lost") == "run"
    assert str(Reason("busy_host", "d", count=2, tolerated=True)) == "tolerated: busy_host: d (x2)"
    with pytest.raises(UnknownReason):  # a file naming an unknown request error is malformed
        RequestRecord.from_dict({"index": 0, "warmup": False, "prompt_tokens_planned": 1,
                                 "max_tokens": 1, "error_kind": "gremlins"})


def test_each_threshold_has_its_default_in_the_catalogue_only() -> None:
    keys = {t.key: t.default for c in entries() for t in c.thresholds}
    fields = params.SweepParams.model_fields
    for key, default in keys.items():
        if key.startswith("("):
            continue  # a tolerance, not a params key
        head, _, tail = key.partition(".")
        field = fields[head]
        if tail:
            field = type(field.default).model_fields[tail]
        assert field.default == default, key
    # the judge inputs are filled from params by each rule's keys (auto resolved on this host)
    filled = thresholds_of(load_params(ROOT / "params" / "embedded_small.yaml"))
    assert set(filled) == {t.key for r in RULES for t in r.thresholds if t.in_params}
    assert all(filled[k] == d for k, d in keys.items() if k in filled and d != "auto")
    source = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py") if p.name != "catalogue.py")
    assert not re.search(r"^DEFAULT_MAX_\w+ = ", source, re.M)  # defined once, here


@pytest.mark.parametrize("rule", REQUEST_RULES)
def test_request_rule_triggers_and_a_valid_request_passes(rule: str) -> None:
    assert request_problems(good(), speculative=True) == []
    problems = request_problems(broken(rule), speculative=True)
    assert rule in codes(problems), problems
    verdict = judge_cell([good(1), broken(rule)], server_alive=True, speculative=True)
    assert verdict.status == "invalid" and rule in codes(verdict.reasons)
    assert verdict.failed == (0,)


def test_short_truncated_output_gives_both_reasons() -> None:
    rec = broken("short_output")
    assert rec.final is not None
    rec.final.truncated = True
    assert codes(request_problems(rec)) == {"short_output", "truncated"}


def test_auto_needs_no_speculative_statistics() -> None:
    assert request_problems(broken("missing_spec_stats"), speculative=False) == []
    assert judge_cell([broken("missing_spec_stats")], server_alive=True).ok


def test_server_died_and_crash_signature() -> None:
    assert judge_cell([good()], server_alive=True).status == "ok"
    dead = judge_cell([good()], server_alive=False)
    assert dead.status == "crashed" and codes(dead.reasons) == {"server_died"}
    sig = judge_cell([good()], server_alive=True, crash_line="GGML_ASSERT(x) failed")
    assert sig.status == "crashed" and codes(sig.reasons) == {"crash_signature"}


def test_too_few_completed() -> None:
    assert judge_cell([good(0), good(1)], server_alive=True, planned=2).ok
    few = judge_cell([good(0)], server_alive=True, planned=2)
    assert few.status == "invalid"
    assert few.reasons == ("too_few_completed: 1 of 2 planned requests were sent",)


def test_failed_fraction_threshold() -> None:
    records = [good(i) for i in range(9)] + [broken("empty_output")]
    records[-1].index = 9
    strict = judge_cell(records, server_alive=True)
    assert strict.status == "invalid" and codes(strict.reasons) == {"empty_output"}
    tolerant = judge_cell(records, server_alive=True, max_failed_fraction=0.1)
    assert tolerant.status == "ok" and tolerant.failed == (9,)
    assert tolerant.reasons and all(r.startswith("tolerated: empty_output") for r in tolerant.reasons)
    records[0] = broken("timeout")
    over = judge_cell(records, server_alive=True, max_failed_fraction=0.1)
    assert over.status == "invalid"
    assert "failed_fraction" in codes(over.reasons) and "timeout" in codes(over.reasons)


def test_a_failed_warmup_request_taints_the_cell_even_with_tolerance() -> None:
    warm = broken("http_400")
    warm.warmup = True
    verdict = judge_cell([warm, good(1), good(2)], server_alive=True, max_failed_fraction=0.5)
    assert verdict.status == "invalid" and codes(verdict.reasons) == {"http_400"}


def test_a_cached_prefix_is_allowed_when_the_params_allow_it() -> None:
    cached = broken("prefix_cache_hit")
    assert request_problems(cached, speculative=True, prefix_cache=True) == []
    assert judge_cell([good(1), cached], server_alive=True, speculative=True,
                      prefix_cache=True).status == "ok"
    cached.final.cached_tokens = 0  # a server that reports zero cached tokens is fine either way
    assert request_problems(cached, speculative=True) == []
