# deltaflow developer commands. Every target sets up .venv itself on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The package and its runtime dependencies only: what the examples need.
RUN_STAMP := $(VENV)/.installed-run

.PHONY: run test bench lint clean

$(RUN_STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e .
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP) $(RUN_STAMP)

run: $(RUN_STAMP)
	$(PY) examples/reachability.py

test: $(STAMP)
	$(PY) -m pytest -q
	# again, under randomized delivery schedules, with the columnar kernels at every batch size
	$(PY) -m pytest -q --schedule --kernels=always tests

bench: $(STAMP)
	$(PY) benchmarks/run.py

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests examples benchmarks
	$(VENV)/bin/ruff format --check src tests examples benchmarks
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
