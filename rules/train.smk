# One job per (experiment, run arm, seed). Resumes from its own checkpoint after a kill. Each
# job receives only what it reads (the run arm's task block, model and train block; the seed is
# its wildcard), so editing a title, a contrast or a threshold re-plans no training job. A run
# that an earlier experiment trains identically is never requested here (arbench.plan).


rule train:
    input:
        gate=lambda wc: PLAN.gate(wc.experiment, wc.arm),
    output:
        final=f"{R}/runs/{{experiment}}/{{arm}}/seed{{seed}}/final.json",
        model=f"{R}/runs/{{experiment}}/{{arm}}/seed{{seed}}/model.pt",
        metrics=f"{R}/runs/{{experiment}}/{{arm}}/seed{{seed}}/metrics.jsonl",
    log:
        f"{R}/logs/train/{{experiment}}/{{arm}}/seed{{seed}}.log",
    benchmark:
        f"{R}/benchmarks/train/{{experiment}}/{{arm}}/seed{{seed}}.tsv"
    conda:
        "../envs/torch.yaml"
    threads: THREADS
    resources:
        mem_mb=2000,
        runtime=lambda wc: PLAN.train_minutes(wc.experiment, wc.arm),
        # paper scale trains on a GPU (the slurm executor turns these into --gpus=1 and
        # --cpus-per-gpu); every other scale is a CPU job of `threads` cores
        gpu=1 if SCALE == "paper" else 0,
        cpus_per_gpu=THREADS,
    params:
        task=lambda wc: PLAN.task_settings(wc.experiment, wc.arm),
        model=lambda wc: PLAN.model(wc.experiment, wc.arm),
        train=lambda wc: PLAN.train_settings(wc.experiment, wc.arm),
        data=lambda wc: PLAN.data_dir(wc.experiment, wc.arm),
        scale=SCALE,
    script:
        "../scripts/train.py"
