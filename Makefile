# emery: `make demo` runs the main job, `make test` runs the whole test suite.
# Both create .venv on first use; the first build of llama.cpp takes 5-9 minutes on 2 cores.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
EMERY := $(VENV)/bin/emery
LLAMA_VERSION := 0.3.36
# A portable build: -march=native enables AMX on some Xeons, which crashes in containers.
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
WHEELS := .wheels

.PHONY: demo test check lint unit integration bench clean reliability reliability-kills reliability-faults reliability-fuzz reliability-table reliability-all

demo: $(VENV)/.installed
	$(EMERY) models pull qwen2.5-coder-0.5b
	$(EMERY) demo

# Both embedded models: the integration tests run SmolLM2, and the batching and harness
# tests Qwen2.5 too (a machine that ran the demo had it cached; a fresh one does not).
# Every test, on one xdist process per logical CPU up to TEST_WORKERS (each with its own
# PostgreSQL database); the 25 slowest are listed at the end.
TEST_WORKERS ?= 2
test: $(VENV)/.installed
	$(EMERY) models pull smollm2-135m
	$(EMERY) models pull qwen2.5-coder-0.5b
	$(VENV)/bin/ruff check src tests benchmarks examples docs/hooks
	$(VENV)/bin/ruff format --check src tests benchmarks examples docs/hooks
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -n logical --maxprocesses $(TEST_WORKERS) --dist loadgroup --durations=25

unit: $(VENV)/.installed
	$(VENV)/bin/pytest tests/unit -q

# The edit loop: lint, types and the unit tests not marked slow, on two processes. Modules
# marked slow as a whole are not imported (tests/conftest.py), so no test left needs
# hypothesis' plugin, which imports all of hypothesis into each process.
check: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests benchmarks examples docs/hooks
	$(VENV)/bin/ruff format --check src tests benchmarks examples docs/hooks
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest tests/unit -q -m "not slow" -p no:hypothesispytest -n logical --maxprocesses $(TEST_WORKERS) --dist loadgroup

# The bad-input corpus as subprocesses (permission cases as nobody when run as root), then a
# job paused in its final test scoring and resumed, then twelve pauses and resumes at once
# to a job run by emery server's workers; not part of `make test`.
reliability: $(VENV)/.installed
	$(PY) benchmarks/reliability/run.py
	$(PY) benchmarks/reliability/search_end.py
	$(PY) benchmarks/reliability/claims.py

# SIGKILL at random points and resume, per algorithm, cache on and off (RUNS=20 each).
RUNS ?= 20
reliability-kills: $(VENV)/.installed
	$(PY) benchmarks/reliability/kills.py --runs $(RUNS)

# LM faults (429, 500, hangs, garbage) at 20% and 100% against a local mock endpoint.
reliability-faults: $(VENV)/.installed
	$(PY) benchmarks/reliability/faults.py

# schemathesis (a dev dependency) and malformed bodies against emery serve and the task app.
reliability-fuzz: $(VENV)/.installed
	$(PY) benchmarks/reliability/fuzz.py

# Storage and fleet faults with scripted models, one table read from the store (fault,
# where injected, outcome, steps lost, rollouts scored twice); PostgreSQL rows need its binaries.
reliability-table: $(VENV)/.installed
	$(PY) benchmarks/reliability/fault_table.py

reliability-all: reliability reliability-kills reliability-faults reliability-fuzz reliability-table

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests benchmarks examples docs/hooks
	$(VENV)/bin/ruff format --check src tests benchmarks examples docs/hooks
	$(VENV)/bin/mypy

$(WHEELS)/.llama-$(LLAMA_VERSION):
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip wheel --no-cache-dir --no-deps \
		llama-cpp-python==$(LLAMA_VERSION) -w $(WHEELS)
	touch $@

$(VENV)/.installed: pyproject.toml $(WHEELS)/.llama-$(LLAMA_VERSION)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --find-links $(WHEELS) -e ".[local,dev,postgres,server-test,ray,train,mlflow,examples,litellm]"
	touch $@

clean:
	rm -rf $(VENV) $(WHEELS) .emery results .pytest_cache .mypy_cache .ruff_cache
