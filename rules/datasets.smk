# Data and its validation. Training depends on the oracle's report, so data that fails
# validation can never train a model. A task declares its data kind:
#   stream   held-out set written here, one per dataset (an experiment's task block, or each
#            point of a grid over a task setting: arbench.plan), then the oracle checks it and
#            a sample of every seed's training stream (batches are drawn on the fly);
#   release  a published file set, one job per (subset, split), then one validation job.
from arbench.tasks import build_task  # noqa: E402


rule eval_set:
    input:
        # files the task reads besides its settings (a corpus: rules/corpus.smk builds it)
        lambda wc: build_task(PLAN.datasets[wc.dataset]["task"]).input_files(),
    output:
        f"{R}/datasets/{{dataset}}/eval.npz",
    log:
        f"{R}/logs/eval_set/{{dataset}}.log",
    benchmark:
        f"{R}/benchmarks/eval_set/{{dataset}}.tsv"
    wildcard_constraints:
        dataset=one_of(PLAN.datasets),
    conda:
        "../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        task=lambda wc: PLAN.datasets[wc.dataset]["task"],
        examples=lambda wc: PLAN.datasets[wc.dataset]["examples"],
    script:
        "../scripts/eval_set.py"


rule validate_stream:
    input:
        f"{R}/datasets/{{dataset}}/eval.npz",
    output:
        f"{R}/datasets/{{dataset}}/oracle.json",
    log:
        f"{R}/logs/oracle/{{dataset}}.log",
    benchmark:
        f"{R}/benchmarks/oracle/{{dataset}}.tsv"
    wildcard_constraints:
        dataset=one_of(PLAN.datasets),
    conda:
        "../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        task=lambda wc: PLAN.datasets[wc.dataset]["task"],
        seeds=lambda wc: PLAN.datasets[wc.dataset]["seeds"],
        batch=lambda wc: PLAN.datasets[wc.dataset]["batch"],
    script:
        "../scripts/validate_stream.py"


rule release_split:
    output:
        shards=PLAN.release_split_patterns(),
        sidecar=f"{R}/datasets/{{release}}/stats/{{subset}}/{{split}}.json",
    log:
        f"{R}/logs/releases/{{release}}/{{subset}}_{{split}}.log",
    benchmark:
        f"{R}/benchmarks/releases/{{release}}/{{subset}}_{{split}}.tsv"
    wildcard_constraints:
        release=one_of(PLAN.releases),
        subset=r"[A-Za-z0-9_]+",
        split=r"[a-z]+",
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=lambda wc: PLAN.release_runtime(wc.release, wc.subset, wc.split),
    params:
        task=lambda wc: PLAN.releases[wc.release]["task"],
        settings=lambda wc: PLAN.release_split_settings(wc.release, wc.subset, wc.split),
        root=lambda wc: PLAN.release_dir(wc.release),
    script:
        "../scripts/release_split.py"


# The card, vocabulary and statistics, from every split's sidecar: their own job, so that the
# validation job's only output is its report and a failed validation deletes nothing else.
rule release_index:
    input:
        sidecars=lambda wc: PLAN.release_sidecars(wc.release),
        shards=lambda wc: PLAN.release_shards(wc.release),
    output:
        PLAN.release_index_patterns(),
    log:
        f"{R}/logs/releases/{{release}}/index.log",
    benchmark:
        f"{R}/benchmarks/releases/{{release}}/index.tsv"
    wildcard_constraints:
        release=one_of(PLAN.releases),
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        task=lambda wc: PLAN.releases[wc.release]["task"],
        settings=lambda wc: PLAN.release_validate_settings(wc.release),
        root=lambda wc: PLAN.release_dir(wc.release),
    script:
        "../scripts/release_index.py"


# Every shard is an input, so a shard truncated or replaced after validation (newer than the
# report) reruns it. The report is the only output; it is also written to the `report` log,
# which Snakemake keeps when the job fails.
rule release_validate:
    input:
        sidecars=lambda wc: PLAN.release_sidecars(wc.release),
        shards=lambda wc: PLAN.release_shards(wc.release),
        index=lambda wc: PLAN.release_index_files(wc.release),
    output:
        report=f"{R}/datasets/{{release}}/oracle_report.json",
    log:
        f"{R}/logs/releases/{{release}}/validate.log",
        report=f"{R}/logs/releases/{{release}}/validate_report.json",
    benchmark:
        f"{R}/benchmarks/releases/{{release}}/validate.tsv"
    wildcard_constraints:
        release=one_of(PLAN.releases),
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        task=lambda wc: PLAN.releases[wc.release]["task"],
        settings=lambda wc: PLAN.release_validate_settings(wc.release),
    script:
        "../scripts/release_validate.py"
