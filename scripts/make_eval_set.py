"""Snakemake glue: write the held-out evaluation set of one experiment."""

import io

import _arbench_path  # noqa: F401  (puts src/ on sys.path)
import numpy as np

from arbench.glue import setup
from arbench.io import atomic_write_bytes
from arbench.tasks import make_task

log = setup(snakemake.log[0], snakemake.threads)
task = make_task(snakemake.params.task)
tokens, targets = task.eval_set(snakemake.params.examples)
buf = io.BytesIO()
np.savez_compressed(buf, tokens=tokens.astype(np.int16), targets=targets.astype(np.int16))
atomic_write_bytes(snakemake.output[0], buf.getvalue())
log(f"wrote {len(tokens)} held-out sequences of length {tokens.shape[1]}")
