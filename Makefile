# Every target bootstraps its own virtualenv in .venv from nothing but Python >= 3.11.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit docs bench bench-smoke versions clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,docs]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# The strict docs build runs inside the unit suite (tests/docs/conftest.py builds the
# site once, and tests/docs read it as a reader would); `make docs` builds it alone.
test: lint typecheck unit bench-smoke

lint: $(STAMP)
	$(BIN)/ruff check pride tests examples benchmarks
	$(BIN)/ruff format --check pride tests examples benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

# The cluster suite runs in a process of its own, after the rest: one ray.init per
# test session (under xdist every worker would start a Ray cluster of its own).
unit: $(STAMP)
	$(BIN)/python -m pytest -n 2 --ignore=tests/cluster
	$(BIN)/python -m pytest tests/cluster

# The other Pythons pride claims (pyproject's classifiers; `make test` proves the
# first, 3.11): the unit suite on each, in a virtualenv of its own (.venv-3.12, ...).
# CI (.ci/run) runs `make test`, then this; docs/contributing.md says what it costs.
OTHER_PYTHONS := 3.12 3.13

versions:
	for version in $(OTHER_PYTHONS); do \
		python=$$(.ci/python $$version) && \
		$(MAKE) --no-print-directory unit PYTHON=$$python VENV=.venv-$$version || exit 1; \
	done

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

bench-smoke: $(STAMP)
	$(BIN)/python -m benchmarks --smoke

# The reference system (lionagi) lives in its own environment: never a dependency of pride.
BENCH_VENV := .bench-venv
REFERENCE := lionagi==0.36.0

$(BENCH_VENV)/.installed:
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet '$(REFERENCE)'
	touch $(BENCH_VENV)/.installed

bench: $(STAMP) $(BENCH_VENV)/.installed
	PRIDE_REFERENCE_PYTHON=$(BENCH_VENV)/bin/python $(BIN)/python -m benchmarks \
		--write-results benchmarks/RESULTS.md

clean:
	rm -rf $(VENV) $(OTHER_PYTHONS:%=.venv-%) build .mypy_cache .ruff_cache .hypothesis
