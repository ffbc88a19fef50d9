# Per-experiment statistics: per-arm summaries, contrasts, lock-in, floors.


rule stats:
    input:
        evals=lambda wc: PLAN.eval_files(wc.experiment),
        finals=lambda wc: PLAN.run_files(wc.experiment, "final.json"),
        metrics=lambda wc: PLAN.run_files(wc.experiment, "metrics.jsonl"),
        gates=lambda wc: sorted(set(PLAN.gates(wc.experiment).values())),
        reference=lambda wc: PLAN.reference_files(wc.experiment),
    output:
        f"{R}/stats/{{experiment}}.json",
    log:
        f"{R}/logs/stats/{{experiment}}.log",
    benchmark:
        f"{R}/benchmarks/stats/{{experiment}}.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        experiment=lambda wc: EXPERIMENTS[wc.experiment],
        layout=lambda wc: PLAN.layout(wc.experiment),
        gates=lambda wc: PLAN.gates(wc.experiment),
        scale=SCALE,
    script:
        "../scripts/stats.py"
