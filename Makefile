# Two commands on a fresh machine:  make demo  (train and translate)  and  make test.
# Both build a virtual environment in .venv (or in $(VENV)) the first time.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum setup.py | cut -d' ' -f1)
# The scripts and tests import this checkout's code, whichever venv runs them.
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))
export MPLBACKEND := Agg

.PHONY: demo test lint venv clean-demo

venv: $(STAMP)

$(STAMP): setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e ".[dev]"
	@touch $@

demo: $(STAMP)
	$(PY) ExamplesTransformers/demo.py

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean-demo:
	rm -rf demo_run
