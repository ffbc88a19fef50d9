# LaTeX tables rendered from jinja2 templates.


rule table:
    input:
        stats="results/stats/{experiment}.json",
        template=table_template,
    output:
        report(
            "results/tables/{experiment}.tex",
            category="Tables",
            caption="../docs/report/table.rst",
        ),
    log:
        "results/logs/tables/{experiment}.log",
    benchmark:
        "results/benchmarks/tables/{experiment}.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    script:
        "../scripts/table.py"
