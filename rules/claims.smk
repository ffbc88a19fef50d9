# The claim-by-claim reproduction report (claims.yaml against this scale's stats JSONs) and
# the compiled paper. The claims rule reads only the stats files of claims on what the config
# plans (an experiment the config lacks adds no input; its claims read "not run at this
# scale"). The paper is not part of `rule all`: it needs LaTeX (`make paper`).
from arbench.report import claims as arbench_claims  # noqa: E402
from arbench.report import paper as arbench_paper  # noqa: E402

CLAIMS = "claims.yaml"
PAPER_FILES = arbench_paper.paper_files(PLAN.targets())


rule claims:
    input:
        claims=CLAIMS,
        md_template="src/arbench/report/templates/claims.md.j2",
        tex_template="src/arbench/report/templates/claims.tex.j2",
        stats=lambda wc: arbench_claims.stats_inputs(CLAIMS, PLAN),
    output:
        md=report(
            f"{R}/claims.md",
            category="Claims",
            caption="../docs/report/claims.rst",
        ),
        tex=report(
            f"{R}/tables/claims.tex",
            category="Claims",
            caption="../docs/report/claims.rst",
        ),
    log:
        f"{R}/logs/claims.log",
    benchmark:
        f"{R}/benchmarks/claims.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    params:
        # the results root: where claims.md lies
        root=lambda wc, output: os.path.dirname(output.md),
        scale=SCALE,
        planned=lambda wc: arbench_claims.planned_for(CLAIMS, PLAN),
    script:
        "../scripts/claims.py"


rule paper:
    input:
        frame="paper/main.tex",
        captions="paper/captions.yaml",
        tables=PAPER_FILES["tables"],
        figures=PAPER_FILES["figures"],
    output:
        body=f"{R}/paper/body.tex",
        pdf=f"{R}/paper.pdf",
    log:
        f"{R}/logs/paper.log",
    benchmark:
        f"{R}/benchmarks/paper.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        scale=lambda wc: SCALE,
        experiments={
            name: {"title": exp.get("title", name), "layout": PLAN.layout(name)}
            for name, exp in EXPERIMENTS.items()
        },
    script:
        "../scripts/paper.py"
