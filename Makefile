# Two commands do all of the set-up on a fresh machine:
#   make experiment CONFIG=gelu.yaml [FLAGS='--config.problem.m=64']
#   make test
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CONFIG ?= gelu.yaml
FLAGS ?=
RUN ?= results/gelu/latest

.PHONY: experiment test lint report compare clean-venv

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

experiment: $(VENV)/.installed
	$(PY) -m harness --config=$(CONFIG) $(FLAGS)

# pytest exits 5 when it collects no tests: that is a failure here, not a pass.
test: $(VENV)/.installed
	$(PY) -m ruff check harness tests benchmarks
	$(PY) -m pytest -q tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc

lint: $(VENV)/.installed
	$(PY) -m ruff check harness tests benchmarks
	$(PY) -m ruff format --check harness tests benchmarks

clean-venv:
	rm -rf $(VENV)
