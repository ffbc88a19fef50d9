"""Snakemake glue: train one (experiment, arm, seed) run, resuming if checkpointed."""

from pathlib import Path

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.run import train_run

wc, p = sm.wildcards, sm.params
log(f"train {wc.experiment}/{wc.arm} seed {wc.seed} at scale={p.scale}")
train_run(
    p.task,
    p.model,
    p.train,
    int(wc.seed),
    Path(sm.output.final).parent,
    data_dir=p.data,
    threads=sm.threads,
    record={"experiment": wc.experiment, "arm": wc.arm, "scale": p.scale},
    log=log,
)
