# One study's tables and figures (`studies:` in the config), the claims it decides, and an
# index of them: what `make demo-<study>` asks for at the study scale (snakemake --config
# scale=study results/study/studies/<study>.md).


rule study_claims:
    input:
        claims=CLAIMS,
        md_template="src/arbench/report/templates/claims.md.j2",
        tex_template="src/arbench/report/templates/claims.tex.j2",
        stats=lambda wc: arbench_claims.stats_inputs(
            CLAIMS, PLAN, PLAN.studies[wc.study]
        ),
    output:
        md=f"{R}/studies/{{study}}/claims.md",
        tex=f"{R}/studies/{{study}}/claims.tex",
    log:
        f"{R}/logs/studies/{{study}}_claims.log",
    wildcard_constraints:
        study=one_of(PLAN.studies),
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    params:
        # the results root, two folders above studies/<study>/claims.md
        root=lambda wc, output: os.path.dirname(
            os.path.dirname(os.path.dirname(output.md))
        ),
        scale=SCALE,
        planned=lambda wc: arbench_claims.planned_for(
            CLAIMS, PLAN, PLAN.studies[wc.study]
        ),
        study=lambda wc: [wc.study, list(PLAN.studies[wc.study])],
    script:
        "../scripts/claims.py"


rule study:
    input:
        claims=f"{R}/studies/{{study}}/claims.md",
        files=lambda wc: PLAN.study_targets(wc.study),
    output:
        f"{R}/studies/{{study}}.md",
    log:
        f"{R}/logs/studies/{{study}}.log",
    wildcard_constraints:
        study=one_of(PLAN.studies),
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    params:
        experiments=lambda wc: PLAN.studies[wc.study],
        scale=SCALE,
    script:
        "../scripts/study_index.py"
