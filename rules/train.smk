# One job per (experiment, arm, seed). Resumes from its own checkpoint after a kill. Each job
# receives only what it reads (the task block, the arm's model, the train block; the seed is
# its wildcard), so editing a title, a contrast or a threshold re-plans no training job.


rule train:
    input:
        gate=lambda wc: PLAN.gate(wc.experiment),
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
        runtime=lambda wc: PLAN.train_minutes(wc.experiment),
        gpu=1 if SCALE == "paper" else 0,
    params:
        task=lambda wc: EXPERIMENTS[wc.experiment]["task"],
        model=lambda wc: PLAN.model(wc.experiment, wc.arm),
        train=lambda wc: EXPERIMENTS[wc.experiment]["train"],
        data=lambda wc: PLAN.data_dir(wc.experiment),
        scale=SCALE,
    script:
        "../scripts/train.py"
