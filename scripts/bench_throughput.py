"""Snakemake glue: every cell's chunked vs recurrent training throughput at the zoo's shapes."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.bench.cells import reference_shape, run_throughput
from arbench.io import atomic_write_json

cfg, ref = sm.params.settings, sm.params.reference
result = run_throughput(
    lengths=list(cfg["T"]),
    batch=int(cfg["B"]),
    repeats=int(cfg["repeats"]),
    threads=sm.threads,
    max_recurrent_seconds=float(cfg.get("max_recurrent_seconds", 120.0)),
    shape=reference_shape(ref["task"], ref["model"]),
    log=log,
)
atomic_write_json(sm.output[0], result)
