# Two entry points: `make fuzz` (a short campaign with a report) and `make test`.
# Both create and fill .venv on first use; later runs only check a stamp file.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
MODELS := $(VENV)/.models
BACKENDS := $(VENV)/.backends
CLUSTER := $(VENV)/.cluster
EXTRAS := $(VENV)/.extras
TORCH_PIN := torch==2.13.0
BUDGET ?= 120
OUT ?= runs/latest
# Python's bytecode cache, written even where the environment turns it off: the suites start hundreds of
# processes (repros, command lines, workers), each of which would otherwise compile every module it imports
# anew, and pytest's rewritten test modules are cached beside them (about 5 s a worker on a fresh clone).
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest
# pip compiles every file it installs (torch's and transformers' thousands, most never imported: 53 s of a
# fresh clone's setup); with --no-compile a module is compiled when first imported, and kept (above).
PIP := $(PY) -m pip install --quiet --no-compile

.PHONY: fuzz test nightly gpu setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PIP) $(TORCH_PIN)
	$(PIP) -e .
	touch $(STAMP)

fuzz: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m harness fuzz --budget $(BUDGET) --out $(OUT) --feedback steer

# The model zoo's optional extra (transformers, pinned in pyproject.toml).
$(MODELS): $(STAMP)
	$(PIP) -e ".[models]"
	touch $(MODELS)

# The third-party backends' optional extra (openvino, iree-turbine: pinned in pyproject.toml).
$(BACKENDS): $(STAMP)
	$(PIP) -e ".[backends]"
	touch $(BACKENDS)

# The cluster extra (submitit, PyYAML: pinned in pyproject.toml).
$(CLUSTER): $(STAMP)
	$(PIP) -e ".[cluster]"
	touch $(CLUSTER)

# The three extras in one pip run (one resolution, one editable build, not three): what the suites use.
$(EXTRAS): $(STAMP) pyproject.toml
	$(PIP) -e ".[models,backends,cluster]"
	touch $(MODELS) $(BACKENDS) $(CLUSTER) $(EXTRAS)

test: $(EXTRAS)
	@command -v chromium >/dev/null || (command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
		apt-get install -y -qq chromium >/dev/null 2>&1) || echo "note: no chromium; the HTML report's browser test will skip"
	$(PYTEST) suites/

# The nightly tier: first the gate held to its time budget (suites/budget.py:
# a test past its share fails with its measured time; GATE_SCALE=auto scales
# the budget by this machine's bare compile loop over the measuring machine's,
# GATE_SCALE=1.5 holds it to one half again as slow), then
# every suite with larger, fresh random draws, plus the long searches (tests
# marked nightly) the CI gate leaves out. Not part of `make test`.
GATE_SCALE ?= auto
nightly: $(EXTRAS)
	$(PYTEST) suites/ --gate-budget $(GATE_SCALE); gate=$$?; \
		HYPOTHESIS_PROFILE=nightly $(PYTEST) suites/ && exit $$gate

# On a machine with an NVIDIA GPU and a CUDA build of torch (make setup keeps it): the GPU suite (the
# CUDA-graph oracle over drawn programs, its positive controls, workers and warm runs reaching CUDA), then a
# campaign on each of torch's CUDA-graph backends. Not part of `make test` (CI has no GPU).
GPU_BUDGET ?= 150
gpu: $(STAMP)
	$(PYTEST) suites/ -m gpu -n 0; suite=$$?; \
	for b in reduce-overhead cudagraphs; do env -u PYTHONDONTWRITEBYTECODE $(PY) -m harness fuzz --backend $$b \
		--oracles cudagraph,cudagraph_engaged --device cuda --budget $(GPU_BUDGET) --out runs/gpu-$$b; done; exit $$suite

clean:
	rm -rf $(VENV) runs
