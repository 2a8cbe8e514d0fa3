"""The docs stay true and whole: the module map, the generated reference pages, an offline strict
MkDocs build with no broken link or anchor, and no reference that leaves the repository."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT / "scripts"))

import metrics_reference  # noqa: E402
import params_reference  # noqa: E402
import rules_reference  # noqa: E402

# what is read as a document: the front page, the manual, the test servers' sources of truth
PAGES = sorted([ROOT / "README.md", ROOT / "tests" / "PROTOCOLS.md", *DOCS.glob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
UP_PATH = re.compile(r"(?<![\w./])((?:\.\./)+[\w./-]+\.\w+)")  # a file: it has an extension
SHARED = re.compile(r"(?<![\w./-])((?:\.\./)*shared/[\w./-]+\.(?:md|py|yaml|txt))")
LOADED = re.compile(r'<(?:script[^>]*\ssrc|link[^>]*rel="stylesheet"[^>]*\shref)="(https?://[^"]+)"')


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config),
                           "-d", str(site)], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = _build(ROOT / "mkdocs.yml", out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    return out


def test_every_module_is_in_the_architecture_module_map() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    modules = sorted(p.relative_to(ROOT / "specbench_lib").as_posix()
                     for p in (ROOT / "specbench_lib").rglob("*.py"))
    missing = [m for m in modules if f"| `{m}` |" not in doc]
    assert missing == [], f"add them with: python scripts/module_map.py --write ({missing})"
    assert "docs/architecture.md" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("script", [params_reference, rules_reference, metrics_reference],
                         ids=["params", "rules", "metrics"])
def test_each_generated_page_equals_its_script_output(script) -> None:  # type: ignore[no-untyped-def]
    page = script.DOC.read_text()
    assert page.count(script.START) == 1 and page.count(script.END) == 1, script.DOC
    generated = page.split(script.START, 1)[1].split(script.END, 1)[0].strip("\n")
    expected = script.reference() if script is params_reference else "\n".join(script.rows())
    name = Path(script.__file__).name
    assert generated == expected.strip("\n"), f"run: .venv/bin/python scripts/{name} --write"


def test_the_params_page_names_every_key_of_the_model() -> None:
    from specbench_lib.model.params import SweepParams

    page = (DOCS / "params.md").read_text()
    keys = [f"`{k}`" for k in SweepParams.model_fields] + ["`engine.port`", "`host.max_other_cpu_cores`",
                                                           "`configs[].attach.url`", "`slo.percentile`"]
    assert [k for k in keys if f"| {k} |" not in page] == []


def test_the_docs_build_offline_with_no_broken_link_or_anchor(site: Path) -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert [p for p in pages if p not in nav] == [], "every page is in mkdocs.yml's nav"
    for page in site.glob("*.html"):
        assert LOADED.findall(page.read_text()) == [], f"{page.name} loads from the network"


def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    config = (ROOT / "mkdocs.yml").read_text()
    (tmp_path / "mkdocs.yml").write_text(config)
    usage = docs / "usage.md"
    usage.write_text(usage.read_text() + "\n[gone](no-such-page.md)\n")
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no-such-page.md" in done.stderr, done.stderr
    usage.write_text(usage.read_text().replace("[gone](no-such-page.md)", "[x](rules.md#no-anchor)"))
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no-anchor" in done.stderr, done.stderr


def _anchors(site: Path, page: str) -> set[str]:
    html = (site / page).with_suffix(".html").read_text()
    return set(re.findall(r'\sid="([^"]+)"', html))


def test_the_readmes_links_reach_pages_and_anchors_that_exist(site: Path) -> None:
    broken = []
    for target in LINK.findall((ROOT / "README.md").read_text()):
        if "://" in target:
            continue
        path, _, anchor = target.partition("#")
        file = (ROOT / path).resolve()
        if not file.is_file() or ROOT not in file.parents:
            broken.append(target)
        elif anchor and anchor not in _anchors(site, file.relative_to(DOCS).as_posix()):
            broken.append(target)
    assert broken == []


def _leaving(page: Path, text: str) -> list[str]:
    """References in ``text`` (of ``page``) to files outside the repository or not in it."""
    found: set[str] = set()
    for target in [*LINK.findall(text), *UP_PATH.findall(text)]:
        path = target.partition("#")[0]
        if "://" in target or not path:
            continue
        file = (page.parent / path).resolve()
        if ROOT not in file.parents or not file.exists():
            found.add(f"{page.relative_to(ROOT)}: {target}")
    for target in SHARED.findall(text):
        if not (ROOT / target.lstrip("./")).exists():
            found.add(f"{page.relative_to(ROOT)}: {target}")
    return sorted(found)


def test_no_reference_leaves_the_repository() -> None:
    tracked = [ROOT / p for p in subprocess.run(
        ["git", "ls-files", "*.md", "*.py", "*.yaml", "*.yml"], cwd=ROOT, capture_output=True,
        text=True, check=True).stdout.split()]
    sources = [p for p in tracked if p.suffix != ".md" and p.is_file()
               and p != Path(__file__).resolve()]  # this file's examples name such references
    found = [hit for page in PAGES for hit in _leaving(page, page.read_text())]
    found += [f"{p.relative_to(ROOT)}: {t}" for p in sources for t in SHARED.findall(p.read_text())]
    assert found == [], "copy what is needed into docs/ or drop the reference"


def test_a_reference_out_of_the_repository_is_found() -> None:
    page = DOCS / "usage.md"
    text = "see `../shared/ENGINE.md`, [design](../../DESIGN.md) and shared/STYLE.md"
    assert len(_leaving(page, text)) == 3
    assert _leaving(page, "[rules](rules.md), `../tests/PROTOCOLS.md`") == []


def test_the_type_checking_words_are_the_settings() -> None:
    """docs/architecture.md says which of strict's checks are relaxed where, and pyproject.toml's
    mypy settings are that: strict on every module, the checks the page names off for the
    package, on again for core, model and analysis (and nothing else relaxed package-wide)."""
    import tomllib

    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["strict"] is True
    by_modules = {tuple(o["module"]): {k: v for k, v in o.items() if k != "module"}
                  for o in mypy["overrides"]}
    relaxed = by_modules[("specbench_lib.*",)]
    firm = by_modules[("specbench_lib.core.*", "specbench_lib.model.*", "specbench_lib.analysis.*")]
    assert all(v is False for v in relaxed.values()) and all(v is True for v in firm.values())
    assert set(relaxed) == set(firm) and len(relaxed) == 4
    page = (DOCS / "architecture.md").read_text()
    words = page.split("type-checks", 1)[1].split("the big", 1)[0]
    assert "strict on every module" in words and "`core`, `model` and `analysis`" in words
    assert {w for w in re.findall(r"`([a-z]\w+)`", words) if "_" in w} == set(relaxed), words
    assert "default checks" not in page and "default checks" not in (ROOT / "pyproject.toml").read_text()


def _choices(annotation: object) -> list[object]:
    import typing

    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [c for inner in typing.get_args(annotation) for c in _choices(inner)]


def test_the_params_page_gives_a_meaning_for_every_key_and_every_choice() -> None:
    """Each key's row says what it is, and a key of choices names each choice in its meaning
    (``source``'s meanings come from the sources' table, ``model.sources.SOURCES``); a row that
    says "see above" is said by its section's paragraph."""
    page = (DOCS / "params.md").read_text()
    rows = {row.split("|")[1].strip().strip("`"): row.rsplit("|", 2)[1]
            for row in page.splitlines() if row.startswith("| `")}
    from specbench_lib.model.params import SweepParams

    missing: list[str] = []

    def walk(model: type, prefix: str) -> None:
        for name, info in model.model_fields.items():  # type: ignore[attr-defined]
            key = prefix + name
            what = rows[key]
            if what.strip().startswith("see above"):  # the section's own paragraph says it
                what += params_reference._doc(model)
            if not what.strip():
                missing.append(key)
            for choice in _choices(info.annotation):
                if not re.search(rf"(?<![\w-]){re.escape(str(choice))}(?![\w-])", what):
                    missing.append(f"{key}: {choice}")
            inner = params_reference._nested(info.annotation)
            if inner is not None:
                listed = getattr(info.annotation, "__origin__", None) is tuple
                walk(inner, f"{key}{'[]' if listed else ''}.")

    walk(SweepParams, "")
    assert missing == [], "say what each means in the field's comment, then params_reference --write"


def test_the_front_page_reads_in_one_screen_and_keeps_the_two_commands() -> None:
    """The README says what specbench is, the two commands and what `make run` asks, then
    links on; measured results live on docs/results.md (its make-run-answer section, once)."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 80, "move measured results to docs/results.md"
    commands = readme.split("## The two commands", 1)[1].split("```", 2)[1]
    assert [line.split()[:2] for line in commands.splitlines() if line.strip()][1:] == [
        ["make", "run"], ["make", "test"]]
    assert "make-run-answer" not in readme and "(docs/results.md)" in readme
    results = (DOCS / "results.md").read_text()
    assert results.count("<!-- make-run-answer: ") == 1 and results.count("<!-- make-run-answer:end -->") == 1
