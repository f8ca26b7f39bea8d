# gpusm: `make demo` and `make test` set up a local virtual environment on first use.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# On a machine with an NVIDIA GPU (nvidia-smi answers), the CUDA libraries numba-cuda needs are
# installed too: the cu13 extra for a driver of CUDA 13 or newer, cu12 for CUDA 12. Override with
# EXTRAS=test,cu12 (or EXTRAS=test for none).
comma := ,
space := $(subst ,, )
CUDA_MAJOR := $(shell nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\).*/\1/p' | head -n 1)
CUDA_EXTRA := $(shell v='$(CUDA_MAJOR)'; if [ -z "$$v" ]; then :; elif [ "$$v" -ge 13 ]; then echo cu13; elif [ "$$v" -eq 12 ]; then echo cu12; fi)
EXTRAS ?= test$(if $(CUDA_EXTRA),$(comma)$(CUDA_EXTRA))

help:
	@echo 'make demo             a seeded graph, every engine, a table checked against the cpu reference'
	@echo 'make test             the test suite (about 6 min on 2 cores in the simulator)'
	@echo 'make test-fast        the suite without the tests marked slow'
	@echo 'make test-gpu         the suite on the GPU, serially (GPUS=0,1 spreads it, PER_GPU=4 workers each; needs an NVIDIA GPU)'
	@echo 'make warmup           compile the GPU kernels into the disk cache (ENGINES="gsi egsm" for some)'
	@echo 'make lint             ruff over the tree'
	@echo 'make install          create .venv and install gpusm (every target does this on first use)'
	@echo 'make cuda-extra       which CUDA extra make install picks, without installing'
	@echo 'make experiment-gsi   one paper'"'"'s set: also -sgsi -egsm -gmatch -stwig (SCALE=tiny|small|medium|full, BUDGET=s)'
	@echo 'make experiment-sgsi / experiment-egsm / experiment-gmatch / experiment-stwig   the other papers'"'"' sets'
	@echo 'make compare          every engine side by side (results/compare)'
	@echo 'make experiments      all six sets (GPUS=0,1,2,3: one process per set and GPU)'
	@echo 'make experiment-plan  the worst-case seconds per experiment, set and GPU'
	@echo 'make authors          build the EGSM and gMatch authors'"'"' binaries (docs/authors.md; needs nvcc)'
	@echo 'make competitors      build STMatch, T-DFS, BEEP, G2Miner and the authors'"'"' GSI (docs/competitors.md; needs nvcc)'
	@echo 'make results-readme   restate the committed reports'"'"' verdicts from their rows, regenerate results/README.md'
	@echo 'make notebooks        re-execute the paper notebooks on results/'
	@echo 'make clean            remove .venv and build outputs'
	@echo 'After make demo, run source .venv/bin/activate so that gpusm and python -m experiments are found.'

.PHONY: help require-gpu results-readme demo warmup test test-fast lint test-gpu install cuda-extra clean experiments authors competitors notebooks compare experiment-gsi experiment-sgsi experiment-egsm experiment-gmatch experiment-stwig experiment-plan
# Experiments: make experiment-gsi SCALE=small (tiny | small | medium | full); outputs under results/<paper>/
# Without SCALE: small on a GPU, tiny without one (the CUDA simulator, seconds); a larger scale in the
# simulator warns with its plan and asks first (YES=1, or no terminal: warn and go on).
# BUDGET=seconds: queries not started by then are recorded as skipped (a later run fills them in);
# make experiments GPUS=0,1,2,3 runs the six sets in parallel, one process per set, pinned to GPUs
# (BUDGET then bounds the whole run); make experiment-plan prints the worst case per set and GPU.
SCALE ?=
OUT   ?= results
EXPERIMENT := $(PY) -m experiments $(if $(SCALE),--scale $(SCALE)) --out $(OUT) $(if $(BUDGET),--budget $(BUDGET)) $(if $(YES),--yes)

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "gpusm needs Python 3.11 or newer")'
	@echo "gpusm: $(if $(CUDA_MAJOR),NVIDIA driver for CUDA $(CUDA_MAJOR) found,no NVIDIA GPU found (nvidia-smi): kernels will run in the CUDA simulator); installing extras [$(EXTRAS)]"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install -e '.[$(EXTRAS)]'
	@touch $@

# What make install would pick (the GPU check above), without installing anything.
cuda-extra:
	@echo "cuda_major=$(CUDA_MAJOR) extras=$(EXTRAS)"

demo: $(STAMP)
	$(VENV)/bin/gpusm demo
	@echo "gpusm: to run gpusm and python -m experiments yourself: source $(VENV)/bin/activate (in each new shell)"

# Compile the GPU engines' kernels into the disk cache (NUMBA_CACHE_DIR, else ~/.cache/numba):
# later processes load them. make warmup ENGINES="gsi egsm" for some engines only.
warmup: $(STAMP)
	$(VENV)/bin/gpusm warmup $(if $(ENGINES),--engines $(ENGINES))

# GPUSM_REQUIRE_EXTRAS=1: a test whose optional extra (igraph, jupyter, make) is missing fails
# here instead of skipping (tests/_extras.py); the test extra installs them all.
# --dist worksteal: test durations range from milliseconds to tens of seconds in the simulator;
# an idle worker takes queued tests from a busy one instead of waiting at the end.
test: $(STAMP)
	GPUSM_REQUIRE_EXTRAS=1 $(PY) -m pytest -n auto --dist worksteal

# A developer's loop: the suite without the tests marked slow (pyproject.toml: Dask clusters,
# notebooks, packaging, subprocesses, stress runs, whole real-data query sets, and the tests
# tests/conftest.py lists as simulator-heavy).
test-fast: $(STAMP)
	GPUSM_REQUIRE_EXTRAS=1 $(PY) -m pytest -n auto --dist worksteal -m "not slow"

# ruff (rules in pyproject.toml) over the whole tree.
lint: $(STAMP)
	$(VENV)/bin/ruff check .

# The whole suite on the GPU (no simulator), one test at a time: kernels share the device.
# GPUS=0,1: one pytest worker per listed GPU (tests/conftest.py), each test file on one of them.
# PER_GPU: test workers per listed GPU (the kernels' first compiles, on the host CPUs, dominate
# the run; the workers of one GPU share it).
PER_GPU ?= 1
test-gpu: require-gpu $(STAMP)
	$(if $(GPUS),GPUSM_TEST_GPUS=$(GPUS) NUMBA_ENABLE_CUDASIM=0 $(PY) -m pytest -n $(shell echo $$(( $(words $(subst $(comma),$(space),$(GPUS))) * $(PER_GPU) ))) --dist loadfile,NUMBA_ENABLE_CUDASIM=0 $(PY) -m pytest -p no:xdist)

# Refuses in one line where nvidia-smi does not answer (before installing anything).
require-gpu:
	$(if $(CUDA_MAJOR),,$(error $(MAKECMDGOALS) needs an NVIDIA GPU: none found (nvidia-smi does not answer); make test runs the suite in the CUDA simulator))

experiment-gsi: $(STAMP)
	$(EXPERIMENT) --paper gsi_icde20
experiment-sgsi: $(STAMP)
	$(EXPERIMENT) --paper sgsi_tkde22
experiment-egsm: $(STAMP)
	$(EXPERIMENT) --paper egsm_sigmod23
experiment-gmatch: $(STAMP)
	$(EXPERIMENT) --paper gmatch_pvldb26
experiment-stwig: $(STAMP)
	$(EXPERIMENT) --paper stwig_lin14
compare: $(STAMP)
	$(EXPERIMENT) --paper compare
experiments: $(STAMP)
	$(EXPERIMENT) --all $(if $(GPUS),--gpus $(GPUS))
experiment-plan: $(STAMP)
	$(PY) -m experiments --plan --all $(if $(SCALE),--scale $(SCALE)) $(if $(GPUS),--gpus $(GPUS))

# The EGSM and gMatch authors' binaries, a column of the EGSM Fig. 8 and gMatch Fig. 9 reports
# (experiments/papers/authors.py): built by the anchors' build.sh from ANCHORS_SRC (the authors' sources
# at the pinned commits, fetched as docs/authors.md says; never committed here); build.sh and run.sh
# are ours (experiments/anchors/), copied next to the sources.
# Skipped, saying why, where there is no CUDA toolkit.
ANCHORS     ?= .anchors
ANCHORS_SRC ?= $(ANCHORS)/src
authors:
	@if ! command -v nvcc >/dev/null 2>&1; then echo "make authors: skipped: no CUDA toolkit (nvcc not in PATH)"; \
	elif [ ! -d "$(ANCHORS_SRC)/egsm" ] || [ ! -d "$(ANCHORS_SRC)/gmatch" ]; then \
	  echo "make authors: $(ANCHORS_SRC)/egsm and $(ANCHORS_SRC)/gmatch missing: fetch the pinned commits as docs/authors.md says"; exit 2; \
	else mkdir -p $(ANCHORS) && cp experiments/anchors/build.sh experiments/anchors/run.sh $(ANCHORS)/ && \
	  ANCHORS_SRC=$(abspath $(ANCHORS_SRC)) bash $(ANCHORS)/build.sh; fi

# The papers' other competitors (STMatch, T-DFS, BEEP, G2Miner, GSI; experiments/papers/competitors.py),
# built by experiments/competitors/build.sh from COMPETITORS_SRC (pinned snapshots, docs/competitors.md;
# never committed here). Skipped, saying why, where there is no CUDA toolkit.
COMPETITORS_SRC ?= .competitors/src
competitors:
	@if ! command -v nvcc >/dev/null 2>&1; then echo "make competitors: skipped: no CUDA toolkit (nvcc not in PATH)"; \
	else COMPETITORS_SRC=$(abspath $(COMPETITORS_SRC)) bash experiments/competitors/build.sh $(SYSTEMS); fi

# Re-execute the paper notebooks on the results under results/ and save them with their outputs.
notebooks: $(STAMP)
	$(PY) -c "from experiments.harness.notebook import execute_notebooks; execute_notebooks()"

# results/README.md from the committed reports (the verdicts, decided in code); --check in the tests.
results-readme: $(STAMP)
	$(PY) -m experiments.harness.readme --results $(OUT)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
