# One job per (experiment, arm, seed). Resumes from its own checkpoint after a kill.


rule train:
    input:
        oracle=oracle_report,
    output:
        final="results/runs/{experiment}/{arm}/seed{seed}/final.json",
        model="results/runs/{experiment}/{arm}/seed{seed}/model.pt",
        metrics="results/runs/{experiment}/{arm}/seed{seed}/metrics.jsonl",
    log:
        "results/logs/train/{experiment}/{arm}/seed{seed}.log",
    benchmark:
        "results/benchmarks/train/{experiment}/{arm}/seed{seed}.tsv"
    conda:
        "../envs/torch.yaml"
    threads: THREADS
    resources:
        mem_mb=2000,
        runtime=train_runtime,
        gpu=1 if SCALE == "paper" else 0,
    params:
        experiment=lambda wc: EXPERIMENTS[wc.experiment],
        scale=SCALE,
    script:
        "../scripts/train.py"
