"""Snakemake glue: train one (experiment, arm, seed) run, resuming if checkpointed."""

from pathlib import Path

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.run import train_run

wc, p = sm.wildcards, sm.params
warm = getattr(sm.input, "warm", [])  # the base run's model.pt, or none
warm = [warm] if isinstance(warm, str) else list(warm)
log(f"train {wc.experiment}/{wc.arm} seed {wc.seed} at scale={p.scale}")
train_run(
    p.task,
    p.model,
    p.train,
    int(wc.seed),
    Path(sm.output.final).parent,
    data_dir=p.data,
    warm_start=warm[0] if warm else None,
    threads=sm.threads,
    record={"experiment": wc.experiment, "arm": wc.arm, "scale": p.scale},
    log=log,
)
