# opsweep: `make run` to see it work, `make test` to check it. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# torch is pinned so pip takes the local CPU wheel instead of GBs of CUDA packages;
# override with `make setup TORCH_SPEC=torch` on a machine where you want another build.
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup run test lint gpu-check clean-venv

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

setup: $(VENV)/.installed

run: setup
	$(PY) -m runner experiment=quickstart

test: setup
	$(PY) -m pytest -q

lint: setup
	$(PY) -m ruff check .

clean-venv:
	rm -rf $(VENV)
