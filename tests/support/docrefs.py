"""What the manual and the docstrings name, and whether it exists (tests/house/test_doc_references.py).

A docstring names code with Sphinx roles (``:mod:`~.claim```, ``:func:`cell_metrics```,
``:meth:`~specbench_lib.model.records.CellRecord.from_dict```); a docs page names it as a path
(``analysis/metrics.py``) or a dotted name in backticks (``specbench_lib.analysis.slo``,
``metrics.spec_metrics``). Each is resolved as Python reads a name in the module that names it:
an absolute name by import and attribute; ``.x`` in that module's package, ``..x`` in the
package above; a bare name in that module (or one of its classes).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
from functools import cache
from pathlib import Path
from types import ModuleType

import specbench_lib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "specbench_lib"
ROLE = re.compile(r":(mod|class|func|meth|data|attr|exc):`([^`]+)`")
PATH = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.py)\b")
FOLDER = re.compile(r"`((?:[\w-]+/)*[\w-]+)/<[\w-]+>\.py`")  # `analysis/rules/<code>.py`
DOTTED = re.compile(r"`((?:specbench_lib|[a-z_]+)(?:\.[A-Za-z_]\w*)+)(?:\(\))?`")


@cache
def modules() -> dict[str, ModuleType]:
    """Every module of the package by its dotted name."""
    found = {"specbench_lib": specbench_lib}
    for info in pkgutil.walk_packages(specbench_lib.__path__, "specbench_lib."):
        found[info.name] = importlib.import_module(info.name)
    return found


@cache
def names() -> frozenset[str]:
    """Every dotted name a reference can reach: modules, their attributes, their classes'."""
    out: set[str] = set()
    for dotted, module in modules().items():
        out.add(dotted)
        for attr, value in vars(module).items():
            out.add(f"{dotted}.{attr}")
            if isinstance(value, type) and getattr(value, "__module__", None) == dotted:
                out.update(f"{dotted}.{attr}.{a}" for a in _members(value))
    return frozenset(out)


def _members(cls: type) -> set[str]:
    found = {a for k in cls.__mro__ for a in vars(k)}
    found.update(getattr(cls, "__annotations__", {}))
    found.update(getattr(cls, "model_fields", {}))  # pydantic
    return found


def _absolute(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = modules().get(".".join(parts[:cut]))
        if module is None:
            continue
        value: object = module
        for part in parts[cut:]:
            if isinstance(value, type) and part in _members(value):
                value = getattr(value, part, None)
                continue
            if not hasattr(value, part):
                return False
            value = getattr(value, part)
        return True
    return False


def resolves(target: str, within: str) -> bool:
    """Whether ``target`` (a role's target, ``~`` and ``()`` allowed) names something that
    exists, read in the module named ``within`` as Python reads a name there: ``.x`` in its
    package, ``..x`` in the package above, a bare ``x`` in the module itself (or one of its
    classes), ``specbench_lib.…`` from the top. (Sphinx would also take ``.x`` as the suffix of
    any name, so a name written for the flat layout still found something; this does not.)"""
    target = target.lstrip("~!").removesuffix("()")
    if target.startswith("."):
        dots = len(target) - len(target.lstrip("."))
        is_package = hasattr(modules().get(within), "__path__")
        parts = within.split(".")
        base = parts[:len(parts) - dots + (1 if is_package else 0)]
        return bool(base) and _absolute(".".join([*base, target.lstrip(".")]))
    if target.startswith("specbench_lib"):
        return _absolute(target)
    return _absolute(f"{within}.{target}") or _in_a_class(within, target)


def _in_a_class(within: str, target: str) -> bool:
    """A member of one of the module's classes, or an attribute its methods set (``self.x``)."""
    module = modules().get(within)
    if module is None:
        return False
    head = target.split(".")[0]
    if any(isinstance(v, type) and head in _members(v) for v in vars(module).values()):
        return True
    return re.search(rf"self\.{re.escape(head)}\b\s*[:=,]", Path(module.__file__ or "")
                     .read_text()) is not None


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def stale_in_source(path: Path, text: str | None = None) -> tuple[int, list[str]]:
    """The role references in ``path``'s docstrings and comments: how many, and those that name
    nothing (``line: target``)."""
    text = path.read_text() if text is None else text
    within = _module_name(path)
    found = [(text.count("\n", 0, m.start()) + 1, m.group(2)) for m in ROLE.finditer(text)]
    return len(found), [f"{path.relative_to(ROOT)}:{line}: {t}" for line, t in found
                        if not resolves(t, within)]


@cache
def tracked() -> tuple[str, ...]:
    return tuple(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.split())


def path_exists(path: str, page: Path) -> bool:
    """Whether a page's ``path`` (to a repository file, from the root, the package, the page's
    folder, or as the tail of one) names a file there is."""
    if any((base / path).is_file() for base in (ROOT, PACKAGE, page.parent)):
        return True
    return any(f == path or f.endswith("/" + path) for f in tracked())


FILES = {"py", "json", "csv", "yaml", "yml", "md", "tex", "html", "parquet", "jinja", "txt", "ipynb",
         "png", "svg", "log", "gguf", "sh", "toml", "cfg"}
# paths of other projects' sources a page names as theirs (Spec-Bench's evaluation script)
# paths of other projects a page cites in their own folders (SGLang's wheel, NVIDIA
# Model-Optimizer's SPEED-Bench harness)
OTHERS = {"evaluation/speed.py", "sglang/srt/managers/tokenizer_manager.py",
          "sglang/kernels/ops/kvcache/cache_move.py", "sglang/srt/multimodal/internvl_utils.py",
          "prepare_data.py", "specdec_bench/datasets/speed.py",
          # SGLang's (0.5.23 and DB-Guo's DDTree fork) and vLLM's sources (issue 48)
          "flashattention_backend.py", "speculative_hook.py", "configs/model_config.py",
          "batch_result_processor.py", "sglang/srt/environ.py", "srt/speculative/spec_utils.py",
          "dflash_worker_v2.py", "eagle_utils.py", "vllm/config/speculative.py", "dflash_utils.py",
          "vllm/utils/cpu_triton_utils.py"}


def dotted_exists(dotted: str) -> bool | None:
    """Whether a backticked dotted name of a page exists; None when it is not a name of the
    package's code: a file (``results.csv``) or a path of fields (a params key such as
    ``slo.percentile``, a record's ``facts.host.gpu``, a manifest's ``isolation.why``)."""
    head, _, rest = dotted.partition(".")
    if dotted.rpartition(".")[2] in FILES:
        return None
    if head == "specbench_lib":
        return _absolute(dotted)
    owners = [m for m in modules() if m.rpartition(".")[2] == head]  # a folder or a module
    if any(_absolute(f"{m}.{rest}") for m in owners):
        return True
    if f"specbench_lib.{head}" in modules() and hasattr(modules()[f"specbench_lib.{head}"], "__path__"):
        from specbench_lib.model.params import SweepParams  # a folder, or the params' section

        return None if head in SweepParams.model_fields and all(
            p in fields() for p in dotted.split(".")) else False
    return None if not owners or all(p in fields() for p in dotted.split(".")) else False


@cache
def fields() -> frozenset[str]:
    """The field names of every record and params model of the package (a page's ``slo.x``,
    ``facts.x`` or ``isolation.x`` is a path of fields, not a module's name)."""
    found: set[str] = set()
    for module in modules().values():
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__:
                found.update(getattr(value, "__dataclass_fields__", {}))
                found.update(getattr(value, "model_fields", {}))
                if hasattr(value, "__total__"):  # a TypedDict
                    found.update(value.__annotations__)
    return frozenset(found)


def stale_in_page(page: Path, text: str | None = None) -> tuple[int, list[str]]:
    """The paths and dotted names a docs page names: how many, and those that name nothing."""
    text = page.read_text() if text is None else text
    refs, stale = 0, []
    for m in PATH.finditer(text):
        if "://" in text[max(0, m.start() - 60):m.start()]:
            continue
        refs += 1
        if m.group(1) not in OTHERS and not path_exists(m.group(1), page):
            stale.append(f"{page.name}: {m.group(1)}")
    for m in DOTTED.finditer(text):
        known = dotted_exists(m.group(1))
        refs += known is not None
        if known is False:
            stale.append(f"{page.name}: {m.group(1)}")
    return refs, stale


CHANGES = "## Where a change goes"


def change_table() -> list[list[str]]:
    """The rows of docs/architecture.md's "where a change goes", each a list of its cells."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page.split(CHANGES, 1)[1].split("\n## ", 1)[0]
    rows = [line.strip().strip("|").split("|") for line in section.splitlines()
            if line.startswith("|")]
    return [[cell.strip() for cell in row] for row in rows[2:]]  # past the header and its rule


def module_of(dotted: str) -> str | None:
    """The package file (``model/sources.py``) of a page's dotted name (``model.sources.SOURCES``,
    ``metrics.cell_metrics``: a module's own name), or None."""
    parts = dotted.removeprefix("specbench_lib.").split(".")
    for cut in range(len(parts), 0, -1):
        tail = ".".join(parts[:cut])
        found = [m for m in modules() if m == f"specbench_lib.{tail}" or m.endswith(f".{tail}")]
        if len(found) == 1:
            file = Path(modules()[found[0]].__file__ or "")
            return file.relative_to(PACKAGE).as_posix()
    return None
