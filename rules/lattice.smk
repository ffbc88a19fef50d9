# The lattice-memory report: one table and one three-panel figure over its three studies
# (capacity, forgetting, real text; arbench.report.lattice.STUDIES), read from their
# statistics. Planned only when the config holds all three (arbench.plan.Plan.targets).
from arbench.report.lattice import STUDIES as LATTICE_STUDIES  # noqa: E402


rule lattice_report:
    input:
        template="src/arbench/report/templates/lattice.tex.j2",
        capacity=f"{R}/stats/{LATTICE_STUDIES['capacity']}.json",
        forgetting=f"{R}/stats/{LATTICE_STUDIES['forgetting']}.json",
        realtext=f"{R}/stats/{LATTICE_STUDIES['realtext']}.json",
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
    script:
        "../scripts/lattice.py"
