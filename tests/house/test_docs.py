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
