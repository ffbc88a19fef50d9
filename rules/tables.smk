# LaTeX tables rendered from jinja2 templates: each experiment's in its layout, the cell zoo
# at the reference arm's budget, and the floors of every task setting the config trains on.
from arbench.report.layouts import template_path  # noqa: E402


rule table:
    input:
        stats=f"{R}/stats/{{experiment}}.json",
        template=lambda wc: template_path(PLAN.layout(wc.experiment)),
    output:
        report(
            f"{R}/tables/{{experiment}}.tex",
            category="Tables",
            caption="../docs/report/table.rst",
        ),
    log:
        f"{R}/logs/tables/{{experiment}}.log",
    benchmark:
        f"{R}/benchmarks/tables/{{experiment}}.tsv"
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
        template="src/arbench/report/templates/cells.tex.j2",
    output:
        tex=report(
            f"{R}/tables/cells.tex",
            category="Tables",
            caption="../docs/report/cells.rst",
        ),
        json=f"{R}/tables/cells.json",
    log:
        f"{R}/logs/tables/cells.log",
    benchmark:
        f"{R}/benchmarks/tables/cells.tsv"
    conda:
        "../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        reference=PLAN.reference(CFG["zoo"]["reference"]),
        name="{experiment}/{arm}".format(**CFG["zoo"]["reference"]),
    script:
        "../scripts/cells_table.py"


rule floors_table:
    input:
        template="src/arbench/report/templates/floors.tex.j2",
    output:
        tex=report(
            f"{R}/tables/floors.tex",
            category="Tables",
            caption="../docs/report/floors.rst",
        ),
        json=f"{R}/tables/floors.json",
    log:
        f"{R}/logs/tables/floors.log",
    benchmark:
        f"{R}/benchmarks/tables/floors.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    params:
        blocks=PLAN.task_blocks(),
        scale=SCALE,
    script:
        "../scripts/floors_table.py"
