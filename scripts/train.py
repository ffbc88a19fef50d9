"""Snakemake glue: train one (experiment, arm, seed) run, resuming if checkpointed."""

from pathlib import Path

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.config import model_config_dict
from arbench.glue import setup
from arbench.models import ModelConfig
from arbench.tasks import make_task
from arbench.train.loop import TrainConfig, train, write_final

log = setup(snakemake.log[0], snakemake.threads)
exp, wc = snakemake.params.experiment, snakemake.wildcards
task = make_task(exp["task"])
model_cfg = ModelConfig(**model_config_dict(exp, wc.arm, task.vocab_size))
run_dir = Path(snakemake.output.final).parent
log(f"train {wc.experiment}/{wc.arm} seed {wc.seed} at scale={snakemake.params.scale}")
payload = train(
    task,
    model_cfg,
    TrainConfig.from_dict(exp["train"]),
    int(wc.seed),
    run_dir,
    threads=snakemake.threads,
    progress=log,
)
payload.update(experiment=wc.experiment, arm=wc.arm, scale=snakemake.params.scale, task=exp["task"])
write_final(snakemake.output.final, payload)
log(f"done in {payload['wall_time_s']:.1f}s: {payload['scores']}")
