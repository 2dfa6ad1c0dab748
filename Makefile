# Two commands do all of the set-up on a fresh machine:
#   make experiment CONFIG=gelu.yaml [FLAGS='--config.problem.m=64']
#   make test
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CONFIG ?= gelu.yaml
FLAGS ?=
RUN ?= results/gelu/latest

# Every path a user gives goes to the shell as one quoted word, never expanded by make:
# $(call q,A) is A's value, unexpanded ($(value)), in single quotes, each ' in it as '\''.
# A run folder named `run;touch X;#` is then a name, not three commands.
q = '$(subst ','\'',$(value $(1)))'
# Nor expanded to be exported: make would run a `$(shell ...)` in a value given on its command
# line to put it in the recipes' environment, which needs none of them.
unexport A B OUT RUN CONFIG

.PHONY: experiment search test test-fast lint report compare index clean-venv

# The torch extra comes too (pinned to the CPU build, torch==2.13.0), so the PyTorch row's
# tests run.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,torch,train]'
	touch $@

experiment: $(VENV)/.installed
	$(PY) -m harness --config=$(call q,CONFIG) $(FLAGS)

# A config with a `search:` section: make search CONFIG=search_cpu.yaml
search: $(VENV)/.installed
	$(PY) -m harness --config=$(call q,CONFIG) $(FLAGS)

# pytest exits 5 when it collects no tests: that is a failure here, not a pass.
test: $(VENV)/.installed
	$(PY) -m ruff check harness tests benchmarks
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=15 tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc

# The tests marked neither `study` nor `slow` (pyproject.toml, tests/conftest.py): about a
# minute on two cores. `make test` runs them too, with the rest.
test-fast: $(VENV)/.installed
	$(PY) -m ruff check harness tests benchmarks
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=10 -m "not study and not slow" tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc

lint: $(VENV)/.installed
	$(PY) -m ruff check harness tests benchmarks
	$(PY) -m ruff format --check harness tests benchmarks

# Re-render a saved run's report.md, report.html and plots/ (never imports jax).
report: $(VENV)/.installed
	$(PY) -m harness.report --run=$(call q,RUN)

# Compare two runs: make compare A=results/gelu/<run_a> B=results/gelu/<run_b> [OUT=dir]
# Without OUT the folder is named by the two runs resolved (`latest` by its run id), so a
# later compare never replaces an earlier one.
A ?=
B ?=
OUT ?=
compare: $(VENV)/.installed
	@test -n $(call q,A) -a -n $(call q,B) || { echo "usage: make compare A=RUN B=RUN [OUT=DIR]" >&2; exit 2; }
	$(PY) -m harness.commands.compare --a=$(call q,A) --b=$(call q,B) $(if $(value OUT),--out=$(call q,OUT))

# Rewrite results/index.html, the list of every run (a study also does this; report, export
# and reanalyze write nothing above their own folder).
index: $(VENV)/.installed
	$(PY) -c "from pathlib import Path; from harness.report.index import write_results_index as w; print(w(Path('results')))"

clean-venv:
	rm -rf $(VENV)
