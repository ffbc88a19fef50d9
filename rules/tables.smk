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


rule cells_table:
    input:
        template="src/arbench/report/templates/cells_table.tex.j2",
    output:
        tex=report(
            "results/tables/cells.tex",
            category="Tables",
            caption="../docs/report/cells.rst",
        ),
        json="results/tables/cells.json",
    log:
        "results/logs/tables/cells.log",
    benchmark:
        "results/benchmarks/tables/cells.tsv"
    conda:
        "../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        name="factorial",
        experiment=EXPERIMENTS["factorial"],
        arm="delta",
    script:
        "../scripts/cells_table.py"
