"""Snakemake glue: write the held-out evaluation set of one stream-task experiment."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.run import write_eval_set

held_out = write_eval_set(sm.params.task, sm.params.examples, sm.output[0])
log(f"wrote {len(held_out)} held-out sequences of length {held_out.tokens.shape[1]}")
