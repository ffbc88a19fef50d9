# Analyses that need no training: the interference study (additive vs delta-rule writes
# into a fixed matrix state, closed form and simulation) as a figure and a self-contained
# interactive page. Its settings are the config's `interference` block, all of them read.


rule interference:
    output:
        pdf=report(
            f"{R}/figures/interference.pdf",
            category="Figures",
            caption="../docs/report/interference.rst",
        ),
        png=report(
            f"{R}/figures/interference.png",
            category="Figures",
            caption="../docs/report/interference.rst",
        ),
        html=report(
            f"{R}/figures/interference.html",
            category="Figures",
            caption="../docs/report/interference.rst",
        ),
    log:
        f"{R}/logs/analysis/interference.log",
    benchmark:
        f"{R}/benchmarks/analysis/interference.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        settings=CFG["interference"],
        scale=SCALE,
    script:
        "../scripts/interference.py"


# The key-value benchmark's argument for squared scores: the variance of an attention output
# against context length for raw, squared and cubed scores (the config's `score_variance`).
rule score_variance:
    output:
        pdf=report(
            f"{R}/figures/score_variance.pdf",
            category="Figures",
            caption="../docs/report/score_variance.rst",
        ),
        png=report(
            f"{R}/figures/score_variance.png",
            category="Figures",
            caption="../docs/report/score_variance.rst",
        ),
        json=f"{R}/stats/score_variance.json",
    log:
        f"{R}/logs/analysis/score_variance.log",
    benchmark:
        f"{R}/benchmarks/analysis/score_variance.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        settings=CFG["score_variance"],
        scale=SCALE,
    script:
        "../scripts/score_variance.py"
