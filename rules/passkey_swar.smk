# passkey_swar: generate every config/split in the Hugging Face layout, then validate with
# the independent oracle. Settings come from CFG["passkey_swar"] (rules/common.smk).

PSW = CFG["passkey_swar"]
PSW_DIR = "results/datasets/passkey_swar"
PSW_SPLITS = [(n, "train") for n in PSW["train_configs"]] + [
    (n, s) for n in PSW["eval_configs"] for s in ("validation", "test")
]


# completion markers: the per-split stats sidecar, written after the split's shards
PSW_SIDECARS = [f"{PSW_DIR}/stats/n{n}/{s}.json" for n, s in PSW_SPLITS]
# minutes per config/split from its token count (about 0.5 M tokens/s, generous)
PSW_RUNTIME = lambda wc: int(
    10 + PSW["examples"][wc.split] * (12 + 3.75 * int(wc.N)) / 5e5 / 60
)


rule passkey_swar_generate:
    output:
        sidecar=f"{PSW_DIR}/stats/n{{N}}/{{split}}.json",
    log:
        "results/logs/passkey_swar/generate_n{N}_{split}.log",
    benchmark:
        "results/benchmarks/passkey_swar/generate_n{N}_{split}.tsv"
    wildcard_constraints:
        N=r"\d+",
        split="train|validation|test",
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=PSW_RUNTIME,
    params:
        n_examples=lambda wildcards: PSW["examples"][wildcards.split],
        gen_params=PSW["params"],
        split_seeds=PSW["split_seeds"],
        shard_rows=PSW.get("shard_rows", 100000),
    script:
        "../scripts/passkey_swar_generate.py"


rule passkey_swar_validate:
    input:
        PSW_SIDECARS,
    output:
        report=f"{PSW_DIR}/oracle_report.json",
        stats=f"{PSW_DIR}/stats.md",
        readme=f"{PSW_DIR}/README.md",
        vocab=f"{PSW_DIR}/vocab.json",
    log:
        "results/logs/passkey_swar/validate.log",
    benchmark:
        "results/benchmarks/passkey_swar/validate.tsv"
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        gen_params=PSW["params"],
        split_seeds=PSW["split_seeds"],
    script:
        "../scripts/passkey_swar_validate.py"
