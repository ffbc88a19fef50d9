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

# One study at the size worth showing on its own (the `study` scale, under results/study/):
# make demo-kvbench, demo-wall, ... (`studies:` in config.yaml; times in docs/NOTEBOOK.md)
demo-%: $(STAMP)
	$(BIN)/snakemake results/study/studies/$*.md --cores $(CORES) --config scale=study \
	  --rerun-incomplete --printshellcmds
	@echo "study $* is in results/study/: its claims are results/study/studies/$*/claims.md, its index results/study/studies/$*.md"

# the suite in $(CORES) processes (pytest-xdist); the smoke run it reads starts at once beside it
test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(CORES)

smoke: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --config scale=smoke --rerun-incomplete

paper-dryrun: $(STAMP)
	$(BIN)/snakemake -n --cores 8

# The paper-scale plan per study: jobs, device-hours on the declared device and the largest
# job's memory (arbench.resources); exits 1 naming any job over its device's memory.
# paper-plan-probes measures the probes the table lacks (after adding an arm or a shape).
.PHONY: paper-plan paper-plan-probes paper-report paper-release
paper-plan: $(STAMP)
	$(BIN)/python tools/paper_plan.py
paper-plan-probes: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python tools/paper_plan.py --probe

# The paper-scale tables, figures and claims.md from whatever paper-scale evaluations exist
# (PAPER_RESULTS where it has a run, else the release references/arbench_paper_runs), in
# seconds, training nothing: results/paper_report/. paper-release publishes the finished runs
# of PAPER_RESULTS into the release (tools/paper_release.py; retrain one with its retrain).
PAPER_RESULTS ?= results
paper-report: $(STAMP)
	$(BIN)/python tools/paper_report.py --results $(PAPER_RESULTS) --out results/paper_report
paper-release: $(STAMP)
	$(BIN)/python tools/paper_release.py publish --root $(PAPER_RESULTS)

# The speed benchmark of every cell (chunked vs recurrent training, streaming evaluation) at
# the demo's shapes: results/demo/bench/cells.json and its table and figure (rules/bench.smk)
bench: $(STAMP)
	$(BIN)/snakemake results/demo/bench/cells.json --cores $(CORES) --config scale=demo \
	  --rerun-incomplete --printshellcmds

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts benchmarks tools
	$(BIN)/snakemake --lint
	$(BIN)/snakefmt --check .

fmt: $(STAMP)
	$(BIN)/ruff format src tests scripts benchmarks tools
	$(BIN)/snakefmt .

report: $(STAMP)
	$(BIN)/snakemake --report results/demo/report.html --config scale=demo

# A CUDA machine's check (under 8 minutes): every cell's chunked vs recurrent form in fp32,
# paper-scale factorial training steps/s, 10^7 streamed tokens with peak GPU memory. One JSON
# on stdout and in GPU_CHECK_OUT; exit 1 if a cell fails. Without CUDA each part says skipped;
# make gpu-check GPU_CHECK_ARGS=--cpu-smoke runs every part tiny on the CPU.
GPU_CHECK_OUT ?= results/gpu_check.json
GPU_CHECK_ARGS ?=
.PHONY: gpu-check
gpu-check: $(STAMP)
	$(BIN)/python benchmarks/gpu_check.py --out $(GPU_CHECK_OUT) $(GPU_CHECK_ARGS)

# One paper-scale slice of the key-value benchmark's long-context run on CUDA (under 10
# minutes): attention kernels on the device, training steps per rung, the sweep toward 10^7
# tokens with tokens/s and peak GPU memory. KV_GPU_ARGS=--cpu-smoke runs it tiny on the CPU.
KV_GPU_OUT ?= results/kvbench_gpu_slice.json
KV_GPU_ARGS ?=
.PHONY: kv-gpu-check
kv-gpu-check: $(STAMP)
	$(BIN)/python benchmarks/kvbench_gpu_slice.py --out $(KV_GPU_OUT) $(KV_GPU_ARGS)

# The paper: every table and figure of a scale, compiled with paper/main.tex into
# results[/<scale>]/paper.pdf. Not part of `make demo` (it needs LaTeX): `make latex` installs
# Debian's TeX packages (as root). `make paper SCALE=paper` for the paper scale.
SCALE ?= demo
PAPER_ROOT := $(if $(filter paper,$(SCALE)),results,results/$(SCALE))
.PHONY: paper latex
paper: $(STAMP)
	@command -v latexmk >/dev/null || command -v pdflatex >/dev/null || \
	  { echo "make paper needs LaTeX: run make latex (Debian, as root) first"; exit 1; }
	$(BIN)/snakemake --cores $(CORES) $(PAPER_ROOT)/paper.pdf --config scale=$(SCALE)

latex:
	command -v latexmk >/dev/null || { apt-get update -qq && apt-get install -y -qq \
	  --no-install-recommends texlive-latex-base texlive-latex-recommended latexmk; }

# Headless Chromium from Debian's packages, for the interactive page's browser test
# (tests/report/test_interference_page.py skips, saying so, without it).
.PHONY: browser
browser:
	command -v chromium-headless-shell >/dev/null || \
	  { apt-get update -qq && apt-get install -y -qq chromium-headless-shell; }

# A single-node SLURM on this machine (root, Debian), to try profiles/slurm for real:
#   make slurm-install slurm-up; snakemake --profile profiles/slurm --config scale=smoke; make slurm-down
# down stops the daemons by recorded pid and removes the conf and state it wrote.
.PHONY: slurm-install slurm-up slurm-down
slurm-install:
	python3 tools/local_slurm.py install
slurm-up:
	python3 tools/local_slurm.py up
slurm-down:
	python3 tools/local_slurm.py down

clean:
	rm -rf results .snakemake
