# opsweep: `make run` to see it work, `make test` to check it. Both set up .venv first.
# `make help` lists every target.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# torch is pinned so pip takes the local CPU wheel instead of GBs of CUDA packages. For a GPU:
#   make setup TORCH_SPEC=torch TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128
# TORCH_SPEC is passed to pip as words, so it may hold several (`torch==2.7.1 --pre`).
TORCH_SPEC ?= torch==2.13.0
# An extra package index for torch (the CUDA wheels); empty: pip's configured index only.
TORCH_INDEX_URL ?=
# opsweep's extras: dev (tests, ruff, notebook) always, gpu (nvidia-ml-py: clocks, power,
# throttle reasons, energy) wherever nvidia-smi runs; `GPU_EXTRA=` leaves it out.
EXTRAS ?= dev
GPU_EXTRA ?= $(if $(shell command -v nvidia-smi 2>/dev/null),gpu,)
comma := ,
empty :=
space := $(empty) $(empty)
ALL_EXTRAS := $(subst $(space),$(comma),$(strip $(EXTRAS) $(GPU_EXTRA)))
# The stamp names what was installed: a different TORCH_SPEC, index or extra reinstalls.
STAMP := $(VENV)/.installed-$(shell printf '%s|%s|%s' '$(TORCH_SPEC)' '$(TORCH_INDEX_URL)' \
           '$(ALL_EXTRAS)' | cksum | cut -d' ' -f1)

.PHONY: help setup run test test-fast ci lint gpu-check clean-venv

help:  ## list the targets
	@echo "make TARGET [TORCH_SPEC=... TORCH_INDEX_URL=... EXTRAS=... GPU_EXTRA=...]"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | \
		awk -F':.*## ' '{printf "  %-11s %s\n", $$1, $$2}'
	@echo "now: TORCH_SPEC=$(TORCH_SPEC) TORCH_INDEX_URL=$(TORCH_INDEX_URL)" \
		"extras=$(ALL_EXTRAS)"

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(if $(TORCH_INDEX_URL),--extra-index-url $(TORCH_INDEX_URL)) \
		$(TORCH_SPEC)
	$(PY) -m pip install -q -e ".$(if $(ALL_EXTRAS),[$(ALL_EXTRAS)])"
	rm -f $(VENV)/.installed*
	touch $@

setup: $(STAMP)  ## make .venv: torch (TORCH_SPEC), opsweep editable, [dev] and [gpu] extras

# The quickstart that fits the machine, chosen as device=auto chooses: `quickstart` on cuda:0
# (fp32 against bf16 on the tensor cores), else `quickstart_cpu` (fp32 against fp64 on one
# core, seconds on any CPU). QUICKSTART=NAME runs another experiment.
QUICKSTART ?= $$($(PY) -c 'from runner.core.axes import cuda_device_count as n; \
	print("quickstart" if n() else "quickstart_cpu")')

run: setup  ## run the quickstart that fits this machine (GPU: quickstart; else quickstart_cpu)
	@name=$(QUICKSTART) && echo "$(PY) -m runner experiment=$$name" && \
		$(PY) -m runner experiment=$$name

test: setup  ## the full suite (GPU tests are skipped without CUDA; Ray's without the ray extra)
	$(PY) -m pytest -q

test-fast: setup  ## under a minute: every module in-process; no process, compile or big run
	$(PY) -m pytest -q -m "not slow and not cli and not wheel"

# Ray (~300 MB with its dependencies) is left out of a plain `make setup`; CI installs it so
# that the launcher tests run a local Ray cluster for real, and fail rather than skip without it.
# It names the search extra (the Optuna sweeper) too, which dev already includes.
ci:  ## what CI runs (.ci/run): `make test` with the ray and search extras, the Ray tests required
	OPSWEEP_REQUIRE_RAY=1 $(MAKE) test EXTRAS="$(EXTRAS) ray search"

lint: setup  ## ruff
	$(PY) -m ruff check .

gpu-check: setup  ## only the GPU tests (needs a CUDA device)
	$(PY) -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else \
		'gpu-check: no CUDA device visible to torch (make setup TORCH_SPEC=... for a CUDA build)')"
	$(PY) -m pytest -q -m gpu

clean-venv:  ## remove .venv (the next target sets it up again)
	rm -rf $(VENV)
