# Per-experiment statistics: per-arm summaries, contrasts, lock-in, floors.


rule stats:
    input:
        evals=lambda wc: eval_paths(wc.experiment),
        finals=lambda wc: run_paths(wc.experiment, "final.json"),
    output:
        "results/stats/{experiment}.json",
    log:
        "results/logs/stats/{experiment}.log",
    benchmark:
        "results/benchmarks/stats/{experiment}.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        experiment=lambda wc: EXPERIMENTS[wc.experiment],
        name=lambda wc: wc.experiment,
        scale=SCALE,
    script:
        "../scripts/stats.py"
