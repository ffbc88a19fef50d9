# Two entry points: `make demo` (whole pipeline, reduced) and `make test`.
# PY: a Python 3.11 interpreter (make PY=python3.11 ...).
# TORCH_INDEX: where torch comes from; on a machine without CUDA, the CPU-only build is
#   make TORCH_INDEX=https://download.pytorch.org/whl/cpu demo
SHELL := /bin/bash
PY ?= python3
TORCH_INDEX ?=
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORES ?= 2

.PHONY: demo test smoke paper-dryrun lint fmt bench report clean

$(STAMP): requirements.lock pyproject.toml
	@$(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || \
	  { echo "make needs Python 3.11: run make PY=/path/to/python3.11 ..."; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(if $(TORCH_INDEX),$(BIN)/python -m pip install --quiet --no-deps --index-url $(TORCH_INDEX) \
	  torch==$$(sed -n 's/^torch==//p' requirements.lock))
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --config scale=demo --rerun-incomplete --printshellcmds
	@echo "demo results are in results/demo/: tables/ (LaTeX), figures/ (PDF, PNG), bench/,"
	@echo "stats/ (JSON), runs/ and evals/ (per seed), datasets/; paper scale writes results/."

test: $(STAMP)
	$(BIN)/python -m pytest -q

smoke: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --config scale=smoke --rerun-incomplete

paper-dryrun: $(STAMP)
	$(BIN)/snakemake -n --cores 8

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts benchmarks
	$(BIN)/snakemake --lint
	$(BIN)/snakefmt --check .

fmt: $(STAMP)
	$(BIN)/ruff format src tests scripts benchmarks
	$(BIN)/snakefmt .

report: $(STAMP)
	$(BIN)/snakemake --report results/demo/report.html --config scale=demo

clean:
	rm -rf results .snakemake
