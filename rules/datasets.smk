# Held-out evaluation sets and their oracle validation. Training depends on the
# oracle's report, so data that fails validation can never train a model.


rule eval_set:
    output:
        "results/datasets/{experiment}/eval.npz",
    log:
        "results/logs/eval_set/{experiment}.log",
    benchmark:
        "results/benchmarks/eval_set/{experiment}.tsv"
    conda:
        "../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        task=lambda wc: EXPERIMENTS[wc.experiment]["task"],
        examples=lambda wc: EXPERIMENTS[wc.experiment]["eval"]["examples"],
    script:
        "../scripts/make_eval_set.py"


rule oracle_validate:
    input:
        "results/datasets/{experiment}/eval.npz",
    output:
        "results/datasets/{experiment}/oracle.json",
    log:
        "results/logs/oracle/{experiment}.log",
    benchmark:
        "results/benchmarks/oracle/{experiment}.tsv"
    conda:
        "../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        task=lambda wc: EXPERIMENTS[wc.experiment]["task"],
        seeds=lambda wc: EXPERIMENTS[wc.experiment]["seeds"],
        batch=lambda wc: EXPERIMENTS[wc.experiment]["train"]["batch"],
    script:
        "../scripts/oracle_validate.py"
