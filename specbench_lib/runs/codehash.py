"""The measurement code's hash: what a cell's fingerprint says about the code that measured it.

The hash covers the code that decides what a cell file stores: the import closure (package-
internal, module- and function-level imports) of the modules that build, send, time and record
requests, plus the sources of those that run them (cell order, prompts, facts, rounds), whose
other imports are the run directory and the analysis on read. A change to any of them makes
earlier cells stale; a change to the analysis (rules, metrics) or to how values render applies
on read instead, so those modules are left out.

It is a hash of content, not of paths: each module counts as its syntax tree with comments,
layout and the *place* an import comes from removed (the names it binds are kept), and the
modules' digests are sorted, so moving or renaming a file leaves stored cells current.
"""

from __future__ import annotations

import ast
import hashlib
import re
from functools import lru_cache
from pathlib import Path

from ..core.paths import cache_dir
from ..core.store import write_atomic

MEASURING = ("client.dispatch", "client.warmclient", "sweep.loadprofile", "host.load",
             "prompts.promptbook")
# a server sweep's phases (state, start and warm, measure, stop) and the record it writes
RUNNERS = ("sweep.serversweep", "sweep.serverstate", "sweep.serverstart", "sweep.cellmeasure",
           "sweep.serverstop", "sweep.cellrecord", "sweep.liveserver", "sweep.driver",
           "sweep.lifetimes", "sweep.turns")
# folders whose every module measures: the engine adapters, which servers/engines/__init__.py's
# table names as strings (imported by name, so no import line leads to them)
FOLDERS = ("servers/engines",)
# the reason codes' table (its rules apply on read) and how values render (text, HTML, tables)
NOT_MEASURING = frozenset({"model.catalogue", "core.display", "core.tables"})
PACKAGE = Path(__file__).resolve().parent.parent


def _module_file(package: Path, name: str) -> Path | None:
    path = package.joinpath(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(package: Path, name: str, tree: ast.Module, is_package: bool) -> set[str]:
    """The package modules that module ``name`` imports, anywhere in its body."""
    here = name.split(".") if is_package else name.split(".")[:-1]
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        base = here[:len(here) - node.level + 1] + (node.module.split(".") if node.module else [])
        for alias in node.names:
            for parts in ([*base, alias.name], base):  # a submodule, else the module itself
                if parts and _module_file(package, ".".join(parts)) is not None:
                    found.add(".".join(parts))
                    break
    return found


class _Placeless(ast.NodeTransformer):
    """Imports as the names they bind (a package-internal import's source dropped), each run of
    consecutive imports sorted, docstrings left out: what the code does, not where it lies."""

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
        names = [ast.alias(name=a.asname or a.name) for a in node.names]
        return ast.ImportFrom(module=None if node.level else node.module, names=names, level=0)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list):
                setattr(node, field, _sorted_import_runs(_undocumented(body)))
        return node


def _undocumented(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    docstring = (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                 and isinstance(first.value.value, str))
    return body[1:] if docstring else body


def _sorted_import_runs(body: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    run: list[ast.stmt] = []
    for stmt in [*body, None]:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            run.append(stmt)
            continue
        out += sorted(run, key=ast.dump)
        run = []
        if stmt is not None:
            out.append(stmt)
    return out


@lru_cache(maxsize=1024)
def content_digest(source: bytes) -> str:
    """One module's digest: its syntax tree, placeless (see :class:`_Placeless`); a source
    already digested is not parsed again."""
    tree = _Placeless().visit(ast.parse(source))
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


def _parsed(file: Path) -> ast.Module:
    """``file``'s syntax tree, parsed once per source (read, never changed, by its callers)."""
    try:
        return _tree(file.read_bytes())
    except SyntaxError as err:
        err.filename = str(file)
        raise


@lru_cache(maxsize=1024)
def _tree(source: bytes) -> ast.Module:
    return ast.parse(source)


def measuring_modules(package: Path = PACKAGE, roots: tuple[str, ...] = MEASURING,
                      runners: tuple[str, ...] = RUNNERS,
                      leave_out: frozenset[str] = NOT_MEASURING) -> list[str]:
    """The files (relative to ``package``) :func:`measurement_code_hash` covers."""
    seen: set[str] = set()
    todo = [*roots, *(p.relative_to(package).with_suffix("").as_posix().replace("/", ".")
                      for folder in FOLDERS for p in sorted((package / folder).glob("*.py"))
                      if p.name != "__init__.py")]
    while todo:
        name = todo.pop()
        file = _module_file(package, name)
        if name in seen or name in leave_out or file is None:
            continue
        seen.add(name)
        todo += _imports(package, name, _parsed(file), file.name == "__init__.py")
    files = {_module_file(package, n) for n in seen | set(runners)}
    return sorted(f.relative_to(package).as_posix() for f in files if f is not None)


def content_hash(package: Path = PACKAGE) -> str:
    """SHA-256 (20 hex digits) over the sorted content digests of the measuring modules."""
    digests = sorted(content_digest((package / f).read_bytes()) for f in measuring_modules(package))
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()[:20]


@lru_cache(maxsize=4)
def measurement_code_hash(package: Path = PACKAGE) -> str:
    """The measuring code's hash as cells record it: :func:`content_hash`, kept in the cache."""
    return _stored_content_hash(package)


def _stored_content_hash(package: Path) -> str:
    """:func:`content_hash`, kept in the cache (``codehash/``) under a digest of every source
    file of ``package`` (this module's too, so a change to how it hashes is a new key): the
    digests take most of a second in each process that runs or reads a sweep."""
    whole = hashlib.sha256()
    for file in sorted(package.rglob("*.py")):
        whole.update(file.relative_to(package).as_posix().encode() + b"\0" + file.read_bytes())
    kept = cache_dir() / "codehash" / whole.hexdigest()[:32]
    try:
        text = kept.read_text().strip()
        if re.fullmatch(r"[0-9a-f]{20}", text):
            return text
    except OSError:
        pass
    own = content_hash(package)
    try:
        write_atomic(kept, lambda tmp: tmp.write_text(own + "\n"))
    except OSError:
        pass  # a read-only cache: computed again next time
    return own
