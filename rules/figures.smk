# Figures, drawn in the experiment's layout (stats JSON "layout"; arbench.report.layouts).


rule figure:
    input:
        stats=f"{R}/stats/{{experiment}}.json",
    output:
        pdf=report(
            f"{R}/figures/{{experiment}}.pdf",
            category="Figures",
            caption="../docs/report/figure.rst",
        ),
        png=report(
            f"{R}/figures/{{experiment}}.png",
            category="Figures",
            caption="../docs/report/figure.rst",
        ),
    log:
        f"{R}/logs/figures/{{experiment}}.log",
    benchmark:
        f"{R}/benchmarks/figures/{{experiment}}.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/figure.py"
