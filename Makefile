# supernode_nb — the commands of the README's quick start.
# `make demo` and `make test` create .venv when it is missing and install everything.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
# A CPU build of torch from local disk on the project's machines; users with GPUs/NPUs
# who already have torch in the venv keep theirs (pyproject only asks for a range).
TORCH_PIN ?= torch==2.13.0
# Jupyter/IPython write to home dirs: keep them inside the tree so parallel runs do not collide.
export JUPYTER_CONFIG_DIR ?= $(CURDIR)/.jupyter_tmp/config
export JUPYTER_DATA_DIR ?= $(CURDIR)/.jupyter_tmp/data
export JUPYTER_RUNTIME_DIR ?= $(CURDIR)/.jupyter_tmp/runtime
export IPYTHONDIR ?= $(CURDIR)/.jupyter_tmp/ipython
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: setup demo test lab docs export clean-nbs check-sync lint nbtest pytest

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[dev]"
	@touch $@

setup: $(VENV)/.installed
	@mkdir -p $(JUPYTER_CONFIG_DIR) $(JUPYTER_DATA_DIR) $(JUPYTER_RUNTIME_DIR) $(IPYTHONDIR)

demo: setup
	$(BIN)/supernode-nb demo --out demo.html

# The whole suite: package in sync with notebooks, notebooks clean, nbdev-test over
# the module notebooks, then pytest (tests/, nbval over the tutorials and examples/*.ipynb;
# the 15 slowest cases timed); ends with pytest's summary line.
test: setup check-sync lint nbtest pytest

# tests never write to the user's run archive
nbtest pytest: export SUPERNODE_NB_ARCHIVE=off

check-sync:
	@$(PY) tools/check_sync.py

# the house rules: no line over 140 characters in what people write (ruff, configured in pyproject.toml: the
# notebooks, tests, benchmarks, tools); the package's lines, functions and dataclass calls: tests/test_layers.py
lint:
	$(BIN)/ruff check

# module notebooks only: the tutorials run once, under nbval in `pytest` below
nbtest:
	$(BIN)/nbdev-test --n-workers 2 --timing --skip-folder-re '^([_.]|tutorials$$)'

# tests/ on two xdist workers, a file per worker at a time (`--dist loadfile`: a notebook's cells stay in one kernel, a
# module fixture is made once), (tests/test_readme_outputs.py re-runs nbs/index.ipynb and compares the outputs the README shows,
# strictly), and nbval-lax over numbered copies of the tutorials and examples (nbval needs execution counts,
# nbdev-clean removes them): cells marked NBVAL_CHECK_OUTPUT are compared, the rest must run
pytest:
	$(PY) tools/nbval_copies.py nbs/tutorials $(wildcard examples/*.ipynb)
	$(PY) -m pytest tests --nbval-lax .nbval -p no:cacheprovider --durations=15 -n 2 --dist loadfile

# The documentation site, offline, into _docs/ (MkDocs + mkdocs-jupyter; Quarto cannot be installed here)
docs: setup
	NO_MKDOCS_2_WARNING=1 $(PY) tools/build_docs.py --out _docs

lab: setup
	$(BIN)/jupyter lab --ip=127.0.0.1 --no-browser examples/dashboard.ipynb

export: setup
	$(BIN)/nbdev-export
clean-nbs: setup
	$(BIN)/nbdev-clean
