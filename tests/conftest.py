from __future__ import annotations

import os
from pathlib import Path

import pytest

from specbench_lib.servers.engines.llamacpp import default_llama_server, default_model

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private outputs folder, so tests never touch the project's outputs/."""
    out = tmp_path / "outputs"
    monkeypatch.setenv("SPECBENCH_OUTPUTS", str(out))
    return out


@pytest.fixture(scope="session")
def engine() -> tuple[Path, Path]:
    """The real llama-server and model; a failure (not a skip) when CI requires them."""
    binary, model = default_llama_server(), default_model()
    if binary.is_file() and model.is_file():
        return binary, model
    message = f"engine missing ({binary}, {model}): run 'make engine'"
    if os.environ.get("SPECBENCH_REQUIRE_ENGINE") == "1":
        pytest.fail(message)
    pytest.skip(message)
