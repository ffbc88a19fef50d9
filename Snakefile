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


rule all:
    default_target: True
    input:
        PLAN.targets(),
