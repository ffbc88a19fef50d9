# Data and its validation. Training depends on the oracle's report, so data that fails
# validation can never train a model. A task declares its data kind:
#   stream   held-out set written here, one per dataset (an experiment's task block, or each
#            point of a grid over a task setting: arbench.plan), then the oracle checks it and
#            a sample of every seed's training stream (batches are drawn on the fly);
#   release  a published file set, one job per (subset, split), then one validation job.


rule eval_set:
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
    script:
        "../scripts/release_split.py"


rule release_validate:
    input:
        lambda wc: PLAN.release_sidecars(wc.release),
    output:
        report=f"{R}/datasets/{{release}}/oracle_report.json",
    log:
        f"{R}/logs/releases/{{release}}/validate.log",
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
