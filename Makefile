# gpusm: `make demo` and `make test` set up a local virtual environment on first use.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# On a machine with an NVIDIA GPU, install the CUDA libraries too: make demo EXTRAS=test,cu13
EXTRAS ?= test

.PHONY: demo test install clean

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
	$(PY) -m pytest

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
