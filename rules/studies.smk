# One study's tables and figures (`studies:` in the config), and an index of them: what
# `make demo-<study>` asks for at the study scale (snakemake --config scale=study
# results/study/studies/<study>.md).


rule study:
    input:
        lambda wc: PLAN.study_targets(wc.study),
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
