"""Snakemake glue: cell throughput (chunked vs recurrent) and streaming benchmark."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.bench.cells import ratios, run_bench, shared_caps
from arbench.glue import setup
from arbench.io import atomic_write_json
from arbench.report.bench_figure import bench_figure

log = setup(snakemake.log[0], snakemake.threads)
cfg = snakemake.params.bench
result = run_bench(
    lengths=list(cfg["T"]),
    batch=int(cfg["B"]),
    stream_tokens=[int(n) for n in cfg["stream_tokens"]],
    repeats=int(cfg["repeats"]),
    threads=snakemake.threads,
    max_recurrent_seconds=float(cfg.get("max_recurrent_seconds", 120.0)),
    log=log,
)
for scope in ("cell", "kernel"):
    for cell, by_t in ratios(result, scope).items():
        speedups = ", ".join(f"T={t}: {r:.1f}x" for t, r in by_t.items())
        log(f"{cell} ({scope}): chunked/recurrent {speedups}")
for cell, by_t in shared_caps(result).items():
    caps = ", ".join(f"T={t}: {r:.1f}x" for t, r in by_t.items())
    log(f"{cell}: whole-cell cap (recurrent / shared work) {caps}")
atomic_write_json(snakemake.output.json, result)
bench_figure(result, [snakemake.output.png, snakemake.output.pdf])
log(f"wrote {snakemake.output.json}, {snakemake.output.png} and {snakemake.output.pdf}")
