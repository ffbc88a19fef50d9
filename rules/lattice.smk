# The lattice-memory report: one table and one three-panel figure over its three studies
# (capacity, forgetting, real text: the experiments the config's `lattice` block names,
# arbench.report.lattice.lattice_studies), read from their statistics. Planned only when the
# config holds all three (arbench.plan.Plan.targets).
from arbench.report import lattice as arbench_lattice  # noqa: E402

LATTICE_STUDIES = arbench_lattice.lattice_studies(CFG)


rule lattice_report:
    input:
        **{kind: f"{R}/stats/{name}.json" for kind, name in LATTICE_STUDIES.items()},
        template="src/arbench/report/templates/lattice.tex.j2",
    output:
        tex=report(
            f"{R}/tables/lattice.tex",
            category="Tables",
            caption="../docs/report/lattice.rst",
        ),
        pdf=report(
            f"{R}/figures/lattice.pdf",
            category="Figures",
            caption="../docs/report/lattice.rst",
        ),
        png=report(
            f"{R}/figures/lattice.png",
            category="Figures",
            caption="../docs/report/lattice.rst",
        ),
    log:
        f"{R}/logs/tables/lattice.log",
    benchmark:
        f"{R}/benchmarks/tables/lattice.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        arm=lambda wc: arbench_lattice.lattice_arm(CFG),
    script:
        "../scripts/lattice.py"
