# Speed benchmark: chunked vs recurrent cell throughput, and long-stream evaluation.


rule bench_cells:
    output:
        json=report(
            "results/bench/cells.json",
            category="Benchmarks",
            caption="../docs/report/bench.rst",
        ),
        png=report(
            "results/bench/cells.png",
            category="Benchmarks",
            caption="../docs/report/bench.rst",
        ),
        pdf=report(
            "results/bench/cells.pdf",
            category="Benchmarks",
            caption="../docs/report/bench.rst",
        ),
    log:
        "results/logs/bench/cells.log",
    benchmark:
        "results/benchmarks/bench/cells.tsv"
    conda:
        "../envs/torch.yaml"
    threads: 8  # every core it is given: Snakemake caps this at --cores
    resources:
        mem_mb=8000,
        runtime=30,
    params:
        bench=CFG["bench"],
    script:
        "../scripts/bench_cells.py"
