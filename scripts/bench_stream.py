"""Snakemake glue: stream one length of random tokens through the configured arm's model."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.bench.streaming import stream_once
from arbench.io import atomic_write_json
from arbench.tasks import build_task

ref = sm.params.reference
vocab = build_task(ref["task"]).vocab_size
row = stream_once(
    ref["model"], vocab, int(sm.wildcards.tokens), piece=sm.params.piece, threads=sm.threads
)
atomic_write_json(sm.output[0], row)
log(
    f"streamed {row['tokens']} tokens: {row['seconds']:.1f}s, peak RSS {row['peak_rss_mb']:.0f} MiB"
)
