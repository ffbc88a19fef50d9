# Figures: one bar per arm with one dot per seed.


rule figure:
    input:
        stats="results/stats/{experiment}.json",
    output:
        pdf=report(
            "results/figures/{experiment}.pdf",
            category="Figures",
            caption="../docs/report/figure.rst",
        ),
        png=report(
            "results/figures/{experiment}.png",
            category="Figures",
            caption="../docs/report/figure.rst",
        ),
    log:
        "results/logs/figures/{experiment}.log",
    benchmark:
        "results/benchmarks/figures/{experiment}.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/figure.py"
