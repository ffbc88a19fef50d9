# Held-out accuracy of each trained run. The model's shape is read from the run's own
# record (final.json), so the job needs only the task, the held-out count and the arm's
# evaluation options.


rule evaluate:
    input:
        model=f"{R}/runs/{{experiment}}/{{arm}}/seed{{seed}}/model.pt",
        final=f"{R}/runs/{{experiment}}/{{arm}}/seed{{seed}}/final.json",
        data=lambda wc: PLAN.eval_inputs(wc.experiment),
    output:
        f"{R}/evals/{{experiment}}/{{arm}}/seed{{seed}}.json",
    log:
        f"{R}/logs/evaluate/{{experiment}}/{{arm}}/seed{{seed}}.log",
    benchmark:
        f"{R}/benchmarks/evaluate/{{experiment}}/{{arm}}/seed{{seed}}.tsv"
    conda:
        "../envs/torch.yaml"
    threads: THREADS
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        task=lambda wc: EXPERIMENTS[wc.experiment]["task"],
        examples=lambda wc: EXPERIMENTS[wc.experiment]["eval"]["examples"],
        options=lambda wc: PLAN.eval_options(wc.experiment, wc.arm),
        data=lambda wc: PLAN.data_dir(wc.experiment),
    script:
        "../scripts/evaluate.py"
