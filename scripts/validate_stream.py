"""Snakemake glue: the oracle re-derives the held-out set and a training-stream sample."""

from pathlib import Path

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.io import atomic_write_json
from arbench.run import validate_stream

p = sm.params
report = validate_stream(p.task, Path(sm.input[0]).parent, p.seeds, p.batch, log=log)
atomic_write_json(sm.output[0], report)
