# Held-out accuracy of each trained run.


rule evaluate:
    input:
        model="results/runs/{experiment}/{arm}/seed{seed}/model.pt",
        final="results/runs/{experiment}/{arm}/seed{seed}/final.json",
        data=eval_data,
    output:
        "results/evals/{experiment}/{arm}/seed{seed}.json",
    log:
        "results/logs/evaluate/{experiment}/{arm}/seed{seed}.log",
    benchmark:
        "results/benchmarks/evaluate/{experiment}/{arm}/seed{seed}.tsv"
    conda:
        "../envs/torch.yaml"
    threads: THREADS
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        experiment=lambda wc: EXPERIMENTS[wc.experiment],
    script:
        "../scripts/evaluate.py"
