# One job per (experiment, run arm, seed). Resumes from its own checkpoint after a kill. Each
# job receives only what it reads (the run arm's task block, model and train block; the seed is
# its wildcard), so editing a title, a contrast or a threshold re-plans no training job. A run
# that an earlier experiment trains identically is never requested here (arbench.plan).


rule train:
    input:
        gate=lambda wc: PLAN.gate(wc.experiment, wc.arm),
        # a warm-started run's base model (train.warm_start; none for a run from scratch)
        warm=lambda wc: PLAN.warm_start_model(wc.experiment, wc.arm, wc.seed),
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
    # at paper scale the resource model's prediction on the declared device (arbench.resources:
    # host memory, minutes, device memory); the slurm executor turns gpu and gpu_model into
    # --gpus=<model>:1. No submission asks for more minutes than the partition limit
    # (resources.partition_minutes): a longer run times out, is submitted again (retries) and
    # resumes from its checkpoint, each retry asking twice the minutes, up to the limit.
    # Every other scale is a CPU job of `threads` cores.
    resources:
        mem_mb=job_resource("train", "mem_mb"),
        runtime=job_resource("train", "runtime"),
        gpu_mem_mb=job_resource("train", "gpu_mem_mb"),
        gpu=job_resource("train", "gpu"),
        gpu_model=GPU_MODEL,
        cpus_per_gpu=THREADS,
    params:
        task=lambda wc: PLAN.task_settings(wc.experiment, wc.arm),
        model=lambda wc: PLAN.model(wc.experiment, wc.arm),
        train=lambda wc: PLAN.train_settings(wc.experiment, wc.arm),
        data=lambda wc: PLAN.data_dir(wc.experiment, wc.arm),
        scale=SCALE,
    script:
        "../scripts/train.py"
