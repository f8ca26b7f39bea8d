# gpusm: `make demo` and `make test` set up a local virtual environment on first use.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# On a machine with an NVIDIA GPU, install the CUDA libraries too: make demo EXTRAS=test,cu13
EXTRAS ?= test

.PHONY: demo test install clean experiments compare experiment-gsi experiment-sgsi experiment-egsm experiment-gmatch experiment-stwig
# Experiments: make experiment-gsi SCALE=small (tiny | small | full); outputs under results/<paper>/
SCALE ?= small
OUT   ?= results

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "gpusm needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	@touch $@

demo: $(STAMP)
	$(VENV)/bin/gpusm demo

test: $(STAMP)
	$(PY) -m pytest -n auto

experiment-gsi: $(STAMP)
	$(VENV)/bin/gpusm experiment --paper gsi_icde20 --scale $(SCALE) --out $(OUT)
experiment-sgsi: $(STAMP)
	$(VENV)/bin/gpusm experiment --paper sgsi_tkde22 --scale $(SCALE) --out $(OUT)
experiment-egsm: $(STAMP)
	$(VENV)/bin/gpusm experiment --paper egsm_sigmod23 --scale $(SCALE) --out $(OUT)
experiment-gmatch: $(STAMP)
	$(VENV)/bin/gpusm experiment --paper gmatch_pvldb26 --scale $(SCALE) --out $(OUT)
experiment-stwig: $(STAMP)
	$(VENV)/bin/gpusm experiment --paper stwig_lin14 --scale $(SCALE) --out $(OUT)
compare: $(STAMP)
	$(VENV)/bin/gpusm experiment --paper compare --scale $(SCALE) --out $(OUT)
experiments: experiment-gsi experiment-sgsi experiment-egsm experiment-gmatch experiment-stwig compare

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
