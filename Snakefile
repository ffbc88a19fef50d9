"""arbench: regenerate every table and figure from the declared config.

snakemake --cores 8 results/tables/factorial.tex               # paper scale, under results/
snakemake --cores 2 --config scale=demo                         # everything, reduced, under results/demo/
"""

from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


include: "rules/common.smk"
include: "rules/datasets.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/stats.smk"
include: "rules/tables.smk"
include: "rules/figures.smk"
include: "rules/bench.smk"
include: "rules/analysis.smk"
include: "rules/claims.smk"
include: "rules/corpus.smk"
include: "rules/lattice.smk"
include: "rules/studies.smk"


# bookkeeping (stats, tables, figures, the benchmark's aggregation) runs in the main process
# on a cluster: seconds of work that a scheduler's queue would only delay
localrules:
    all,
    stats,
    table,
    cells_table,
    floors_table,
    figure,
    bench_cells,
    release_index,
    claims,
    lattice_report,
    study,


rule all:
    default_target: True
    input:
        PLAN.targets(),
