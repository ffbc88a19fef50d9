# Held-out accuracy of each trained run. The model's shape is read from the run's own
# record (final.json), so the job needs only the task, the held-out count and the run arm's
# evaluation options. The run is the shared one (arbench.plan: an identical run trained for
# an earlier experiment is evaluated, not retrained).


rule evaluate:
    input:
        model=lambda wc: f"{PLAN.run_dir(wc.experiment, wc.arm, wc.seed)}/model.pt",
        final=lambda wc: f"{PLAN.run_dir(wc.experiment, wc.arm, wc.seed)}/final.json",
        data=lambda wc: PLAN.eval_inputs(wc.experiment, wc.arm),
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
        # from the tokens it reads: 10 minutes for a held-out set, an hour for a long sweep
        runtime=lambda wc: PLAN.eval_minutes(wc.experiment, wc.arm),
    params:
        task=lambda wc: PLAN.task_settings(wc.experiment, wc.arm),
        examples=lambda wc: EXPERIMENTS[wc.experiment]["eval"]["examples"],
        options=lambda wc: PLAN.eval_options(wc.experiment, wc.arm),
        data=lambda wc: PLAN.data_dir(wc.experiment, wc.arm),
    script:
        "../scripts/evaluate.py"
