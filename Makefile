# Two entry points: `make demo` (whole pipeline, reduced) and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORES ?= 2

.PHONY: demo test smoke paper-dryrun lint fmt bench report clean

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --config scale=demo --rerun-incomplete --printshellcmds

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
	$(BIN)/snakemake --report results/report.html --config scale=demo

clean:
	rm -rf results .snakemake
