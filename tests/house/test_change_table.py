""""Where a change goes" walked for real (issue 50): a change of each kind (a workload source, a
cell rule, a metric, a claim quantity, an engine) is made on a copy of the package by editing
only the files its row of docs/architecture.md names, and the new thing is then validated,
computed and documented there, in a fresh interpreter. A row that leaves out a place the change
needs fails the walk (the new thing does not work); a walk that edits a file its row does not
name fails the check of the row; the copy passes the project's own checks (ruff on the files
it changed, the layering contracts, a module's and a function's length, mypy).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import docrefs
import pytest
import test_architecture as architecture  # tests/house, beside this one

ROOT = docrefs.ROOT
Edit = Callable[[str], str]  # a file's text → its text after the change ("": a new file)


def _replace(old: str, new: str) -> Edit:
    def edit(source: str) -> str:
        assert source.count(old) == 1, f"the walk's anchor moved: {old!r}"
        return source.replace(old, new)
    return edit


def _insert(after: str, text: str) -> Edit:
    return _replace(after, after + text)


def _chain(*edits: Edit) -> Edit:
    def edit(source: str) -> str:
        for one in edits:
            source = one(source)
        return source
    return edit


def _new(text: str) -> Edit:
    def edit(source: str) -> str:
        assert source == "", "a new file that exists"
        return textwrap.dedent(text).lstrip()
    return edit


def _row(kind: str) -> str:
    rows = {row[0].strip("* "): " ".join(row[1:]) for row in docrefs.change_table()}
    return rows[kind]


def _named(text: str) -> set[str]:
    """The package files a row names: paths, a folder's ``<name>.py`` (any new module there),
    and the modules of its dotted names."""
    found = {p for p in docrefs.PATH.findall(text) if (docrefs.PACKAGE / p).is_file()}
    found |= {f"{folder}/<new>.py" for folder in docrefs.FOLDER.findall(text)}
    for dotted in docrefs.DOTTED.findall(text):
        module = docrefs.module_of(dotted)
        if module is not None:
            found.add(module)
    return found


IMPORTED_FROM_THE_COPY = """
import specbench_lib, pathlib
assert pathlib.Path(specbench_lib.__file__).parent == pathlib.Path.cwd() / "specbench_lib"
"""


def _house_checks(copy: Path, changed: list[Path]) -> None:
    """The project's own checks on the copy: ruff on the files changed, import-linter's
    contracts on the package, the length of each changed module and its functions, mypy."""
    bin_ = Path(sys.executable).parent
    ruff = subprocess.run([str(bin_ / "ruff"), "check", "--config", str(ROOT / "pyproject.toml"),
                           *map(str, changed)], capture_output=True, text=True, timeout=120)
    assert ruff.returncode == 0, ruff.stdout + ruff.stderr
    shutil.copy(ROOT / ".importlinter", copy / ".importlinter")
    assert architecture.lint(copy).returncode == 0, architecture.lint(copy).stdout[-3000:]
    for path in changed:
        architecture.check_length(path)
    cache = copy.parent.parent / "walks-mypy-cache"  # the session's: one cold check, then warm
    typed = subprocess.run([str(bin_ / "mypy"), "--config-file", str(ROOT / "pyproject.toml"),
                            "--cache-dir", str(cache), "specbench_lib"], cwd=copy,
                           env={**os.environ, "PYTHONPATH": str(copy)},
                           capture_output=True, text=True, timeout=600)
    assert typed.returncode == 0, typed.stdout[-3000:] + typed.stderr[-3000:]


def _walk(tmp: Path, kind: str, edits: dict[str, Edit], check: str) -> str:
    """Copy the package, make ``edits`` (package-relative paths; a new module under the
    folder's ``<new>.py`` name is written as its real name), check that the row names every
    file edited, and run ``check`` against the copy; its output."""
    named = _named(_row(kind))
    for path in edits:
        placeholder = f"{path.rpartition('/')[0]}/<new>.py"
        assert path in named or placeholder in named, f"'{kind}' row does not name {path}"
    copy = tmp / "copy"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(docrefs.PACKAGE, copy / "specbench_lib", ignore=ignore)
    shutil.copytree(ROOT / "scripts", copy / "scripts", ignore=ignore)
    for path, edit in edits.items():
        file = copy / "specbench_lib" / path
        file.write_text(edit(file.read_text() if file.exists() else ""))
    env = {**os.environ, "PYTHONPATH": f"{copy}{os.pathsep}{copy / 'scripts'}",
           "SUPPORT": str(ROOT / "tests" / "support")}
    _house_checks(copy, [copy / "specbench_lib" / path for path in edits])
    code = IMPORTED_FROM_THE_COPY + textwrap.dedent(check)
    done = subprocess.run([sys.executable, "-c", code], cwd=copy, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout




def test_a_new_workload_source(tmp_path: Path) -> None:
    """``lines``: a text file, each non-empty line a document."""
    edits = {
        "model/sources.py": _chain(
            _insert('"random", "speed_bench"', ', "lines"'),
            _insert("SOURCES: dict[str, SourceSpec] = {s.name: s for s in (\n",
                    '    SourceSpec("lines", "file", "a text file", "a text file of your own, "\n'
                    '               "each non-empty line a document", path="a text file"),\n')),
        "prompts/sources/lines.py": _new('''
            """``source: lines``: a text file, each non-empty line a document."""

            from __future__ import annotations

            from ...core.paths import resolve_project_path
            from ...model.workloadparams import WorkloadParams
            from .base import Document, Source


            class Lines(Source):
                def documents(self, workload: WorkloadParams) -> list[Document]:
                    text = resolve_project_path(str(workload.path)).read_text()
                    return [(f"line:{n}", t) for n, t in enumerate(text.splitlines()) if t]

                def corpus(self, workload: WorkloadParams, index: int) -> str:
                    return f"lines:{workload.path}"


            SOURCE = Lines("lines")
        '''),
        "prompts/sources/__init__.py": _chain(
            _insert("    jsonl,\n", "    lines,\n"),
            _insert("speed_bench.SOURCE", ", lines.SOURCE")),
    }
    out = _walk(tmp_path, "workload source", edits, """
        import pydantic, pytest
        pathlib.Path("doc.txt").write_text("first line of text\\n\\nsecond line of text\\n")
        from specbench_lib.model.workloadparams import WorkloadParams
        from specbench_lib.prompts.workload import build_prompts, documents
        w = WorkloadParams(name="l", source="lines", path="doc.txt")
        assert [d for d, _ in documents(w)] == ["line:0", "line:2"]
        prompts = build_prompts(w, n=2, tokens=6, seed=0, tokenize=lambda s: list(s.encode()))
        assert [len(p.tokens) for p in prompts] == [6, 6]
        with pytest.raises(pydantic.ValidationError, match="needs 'path' \\\\(a text file\\\\)"):
            WorkloadParams(name="l", source="lines")
        import params_reference
        print(params_reference.reference())
    """)
    assert "lines: a text file of your own, each non-empty line a document" in out


def test_a_new_cell_rule(tmp_path: Path) -> None:
    """``too_long_answer``: a cell whose answers exceed a token threshold is invalid."""
    edits = {"analysis/rules/too_long_answer.py": _new('''
        """``too_long_answer``: an answer past ``thresholds.max_answer_tokens``."""

        from __future__ import annotations

        from ...model.catalogue import Threshold
        from ...model.verdict import Reason, Verdict
        from ..rule import Judged, Rule


        class TooLongAnswer(Rule):
            code = "too_long_answer"
            protects = "answers longer than the plan allows, averaged as if they were not"
            order = 95
            thresholds = (Threshold("thresholds.max_answer_tokens", 1000),)

            def judge(self, verdict: Verdict, cell: Judged) -> Verdict:
                most = max((r.final.completion_tokens or 0 for r in cell.measured if r.final),
                           default=0)
                if most <= self.limit(cell, "thresholds.max_answer_tokens"):
                    return verdict
                reason = Reason("too_long_answer", f"an answer of {most} tokens")
                return Verdict("invalid", (*verdict.reasons, reason), verdict.failed)
    ''')}
    out = _walk(tmp_path, "cell rule", edits, """
        from specbench_lib.analysis.ruleset import RULES, thresholds_of
        from specbench_lib.model.params import SweepParams
        assert "too_long_answer" in [r.code for r in RULES]
        params = SweepParams(phase="t", configs=[{"name": "auto", "method": "auto"}],
                             workloads=[{"name": "c", "source": "humaneval"}], contexts=[64],
                             concurrency=[1], thresholds={"max_answer_tokens": 7})
        assert thresholds_of(params)["thresholds.max_answer_tokens"] == 7
        import rules_reference
        print("\\n".join(rules_reference.rows()))
    """)
    assert "too_long_answer" in out and "answers longer than the plan allows" in out


METRIC_CHECK = """
    import os, sys
    sys.path.insert(0, os.environ["SUPPORT"])
    from cellfactory import make_cell
    from specbench_lib.analysis.analyse import analyse
    from specbench_lib.analysis.metrics import CellMetrics, results_table
    from specbench_lib.analysis.metricset import CELL_KINDS, METRICS
    cell = analyse(make_cell("auto", "auto", None, tokens=8))
    assert {m.name for m in METRICS if m.kind in CELL_KINDS} == set(CellMetrics.__annotations__)
    print("value", cell.metrics[NAME])
    print("column", NAME in results_table([cell]).columns)
    import metrics_reference
    print("\\n".join(metrics_reference.rows()))
"""


def test_a_new_metric(tmp_path: Path) -> None:
    """``window_ms``: the measurement window in milliseconds, a line of the window's family."""
    edits = {"analysis/metricfamilies/window.py": _chain(
        _insert('    return {"window_s": cell.window', ', "window_ms": cell.window * 1000'),
        _insert('    Metric("window_s", "s", "the measurement window: first request sent → last '
                'token received"),\n',
                '    Metric("window_ms", "ms", "the measurement window in milliseconds"),\n'))}
    out = _walk(tmp_path, "metric", edits, METRIC_CHECK.replace("NAME", '"window_ms"'))
    assert "column True" in out and "the measurement window in milliseconds" in out
    value = float(out.split("value ", 1)[1].split()[0])
    assert value > 0


def test_a_new_metric_family(tmp_path: Path) -> None:
    """``ttft_share_mean``: the share of a request's time spent before its first token, a
    family of its own."""
    edits = {"analysis/metricfamilies/ttftshare.py": _new('''
        """The share of a request's time spent before its first token."""

        from __future__ import annotations

        import statistics

        from ..metric import Computed, Family, Metric, Requests


        def _share(cell: Requests) -> Computed:
            shares = [r.ttft / r.e2e for r in cell.measured if r.ttft is not None and r.e2e > 0]
            return {"ttft_share_mean": statistics.fmean(shares) if shares else None}


        FAMILY = Family(65, (
            Metric("ttft_share_mean", "fraction", "TTFT over E2E, mean over the cell's requests"),
        ), requests=_share)
    ''')}
    out = _walk(tmp_path, "metric", edits, METRIC_CHECK.replace("NAME", '"ttft_share_mean"'))
    assert "column True" in out and "TTFT over E2E, mean over the cell's requests" in out
    assert float(out.split("value ", 1)[1].split()[0]) > 0


def test_a_new_claim_quantity(tmp_path: Path) -> None:
    """``answer_rate``: a request's tokens over the time after its first token."""
    part = ("def _answer(r: RequestRecord, drafting: bool) -> tuple[float, float] | None:\n"
            "    times = r.token_times\n"
            "    return (len(times), times[-1] - times[0]) if len(times) >= 2 and times[-1] > \\\n"
            "        times[0] else None\n\n\n")
    quantity = ('ANSWER_RATE = Quantity("answer_rate", "answer rate (tokens over the time after "\n'
                '                       "the first token)", "answer rate", _answer)\n\n')
    edits = {
        "model/quantities.py": _chain(
            _replace("\nOUTPUT_RATE = Quantity(", "\n" + part + "OUTPUT_RATE = Quantity("),
            _replace("\nQUANTITIES: dict", "\n" + quantity + "QUANTITIES: dict"),
            _replace("(OUTPUT_RATE, DECODE_RATE, TTFT,\n",
                     "(OUTPUT_RATE, DECODE_RATE, TTFT, ANSWER_RATE,\n")),
        "model/params.py": _insert("ttft or acceptance", " or answer_rate"),
    }
    out = _walk(tmp_path, "claim quantity", edits, """
        import os, sys
        sys.path.insert(0, os.environ["SUPPORT"])
        from cellfactory import make_cell
        from specbench_lib.analysis.units import units_of
        from specbench_lib.model.params import SweepParams
        from specbench_lib.model.quantities import QUANTITIES
        params = SweepParams(phase="t", configs=[{"name": "auto", "method": "auto"}],
                             workloads=[{"name": "c", "source": "humaneval"}], contexts=[64],
                             concurrency=[1], claim_quantity="answer_rate")
        assert QUANTITIES[params.claim_quantity].short == "answer rate"
        cell = make_cell("auto", "auto", None, tokens=8)
        on, decode = units_of([cell], "answer_rate"), units_of([cell], "decode_rate")
        assert on.n == decode.n > 0 and list(on.tokens) == [t + 1 for t in decode.tokens]
        import params_reference
        print(params_reference.reference())
    """)
    assert "or answer_rate" in out


def test_a_new_engine(tmp_path: Path) -> None:
    """``tgi``: a server that speaks vLLM's protocol under its own name."""
    edits = {
        "servers/engines/tgi.py": _new('''
            """A server that speaks vLLM's OpenAI protocol under its own kind (the walk's engine)."""

            from __future__ import annotations

            from .vllm import VllmAdapter


            class TgiAdapter(VllmAdapter):
                kind = "tgi"
        '''),
        "servers/engines/__init__.py": _insert('            "vllm": ".vllm:VllmAdapter"',
                                               ',\n            "tgi": ".tgi:TgiAdapter"'),
        "model/kinds.py": _chain(_insert('KINDS = ("llamacpp", "sglang", "vllm"', ', "tgi"'),
                                 _insert('APIS = ("llamacpp", "sglang", "vllm"', ', "tgi"')),
    }
    _walk(tmp_path, "engine", edits, """
        from specbench_lib.model.sections import EngineParams
        from specbench_lib.servers.engines import get_adapter
        engine = EngineParams(kind="tgi", model="m", binary="vllm")
        adapter = get_adapter(engine)
        assert type(adapter).__name__ == "TgiAdapter" and adapter.kind == "tgi"
    """)


@pytest.mark.parametrize("kind", ["workload source", "cell rule", "metric", "claim quantity",
                                  "engine"])
def test_each_walked_kind_has_its_row_naming_this_test(kind: str) -> None:
    assert "tests/house/test_change_table.py" in _row(kind)
