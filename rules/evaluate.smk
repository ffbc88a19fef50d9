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
    # at paper scale the resource model's prediction on the declared device (its longest
    # batch's memory, its tokens' time, host memory beside a GPU), and that GPU, as training
    # asks for it; the job evaluates on the GPU it is given (scripts/evaluate.py). Below paper
    # scale 2 GB, no GPU, and minutes from the tokens it reads
    resources:
        mem_mb=job_resource("evaluate", "mem_mb"),
        runtime=job_resource("evaluate", "runtime"),
        gpu_mem_mb=job_resource("evaluate", "gpu_mem_mb"),
        gpu=job_resource("evaluate", "gpu"),
        gpu_model=GPU_MODEL,
        cpus_per_gpu=THREADS,
    params:
        task=lambda wc: PLAN.task_settings(wc.experiment, wc.arm),
        examples=lambda wc: PLAN.eval_examples(wc.experiment, wc.arm),
        options=lambda wc: PLAN.eval_options(wc.experiment, wc.arm),
        data=lambda wc: PLAN.data_dir(wc.experiment, wc.arm),
    script:
        "../scripts/evaluate.py"
