"""Snakemake glue: the benchmark's JSON and figure from the throughput and streaming jobs."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.bench.cells import combine, ratios, shared_caps
from arbench.io import atomic_write_json, read_json
from arbench.report.bench_figure import bench_figure

result = combine(read_json(sm.input.throughput), [read_json(p) for p in sm.input.streams])
for scope in ("cell", "kernel"):
    for cell, by_t in ratios(result, scope).items():
        speedups = ", ".join(f"T={t}: {r:.1f}x" for t, r in by_t.items())
        log(f"{cell} ({scope}): chunked/recurrent {speedups}")
for cell, by_t in shared_caps(result).items():
    caps = ", ".join(f"T={t}: {r:.1f}x" for t, r in by_t.items())
    log(f"{cell}: whole-cell cap (recurrent / shared work) {caps}")
atomic_write_json(sm.output.json, result)
bench_figure(result, [sm.output.png, sm.output.pdf])
log(f"wrote {sm.output.json}, {sm.output.png} and {sm.output.pdf}")
