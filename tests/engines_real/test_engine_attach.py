"""Attach mode against a real llama-server that the test starts (and the sweep must not stop)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest
from test_engine_sweep import TINY, server_processes

SECRET = "sk-planted-3b8e01d9c4"
PORT = 8194
LAUNCHED_PORT = 8196


@pytest.fixture
def llama_server(engine: tuple[Path, Path], tmp_path: Path):
    """llama-server with n-gram speculation (budget 8) that only answers with the bearer token."""
    binary, model = engine
    argv = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(PORT), "-np", "1",
            "-c", "2048", "--no-webui", "--metrics", "-t", "2", "--api-key", SECRET,
            "--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", "8", "--spec-ngram-mod-n-min", "8",
            "--spec-ngram-mod-n-max", "8"]
    log = open(tmp_path / "own-server.log", "wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{PORT}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, (tmp_path / "own-server.log").read_text()[-2000:]
            time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


@pytest.mark.engine
def test_attach_to_running_llama_server_with_token(llama_server: subprocess.Popen, outputs: Path,
                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import specbench_lib as sb

    url = f"http://127.0.0.1:{PORT}"
    assert httpx.get(f"{url}/props").status_code == 401  # without the token nothing but /health
    monkeypatch.setenv("SPECBENCH_TEST_LLAMA_KEY", SECRET)
    params = tmp_path / "p.yaml"
    params.write_text(f"""extends: {TINY}
engine: {{port: {LAUNCHED_PORT}}}
configs:
  - {{name: auto, method: auto}}
  - {{name: ngram, method: ngram, budgets: [8],
     attach: {{url: "{url}", api_key_env: SPECBENCH_TEST_LLAMA_KEY}}}}
contexts: [128]
concurrency: [1]
""")
    result = sb.run_sweep(sb.load_plan(params), progress=False)

    assert llama_server.poll() is None, "the sweep stopped a server it did not start"
    assert httpx.get(f"{url}/health").status_code == 200
    assert server_processes(LAUNCHED_PORT) == []  # the launched baseline is gone
    cells = {c.spec.config: c for c in result.cells}
    for label in ("auto", "ngram-b8"):
        assert cells[label].status == "ok", cells[label].verdict
        assert cells[label].metrics["output_tok_s"] > 0
    drafted = sum(r.final.draft_tokens for r in cells["ngram-b8"].requests)
    assert drafted > 0  # the attached server really is the speculative one

    servers = result.manifest["servers"]
    assert servers["auto"]["controlled"] is True and servers["auto"]["argv"]
    attached = servers["ngram-b8"]
    assert attached["controlled"] is False and attached["url"] == url and attached["unit"] is None
    assert "argv" not in attached and cells["ngram-b8"].server_argv == ()
    assert attached["effective"]["default_generation_settings"]["n_ctx"] == 2048
    leaked = [str(p) for p in result.run_dir.rglob("*")
              if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []
