# Speed benchmark: chunked vs recurrent cell throughput (one job), streaming evaluation of
# one arm's model (one job per stream length, so each peak RSS is its own process's), and
# the JSON + figure that combine them. Every job takes all the cores it is given (Snakemake
# caps threads at --cores), so no other job runs beside a timing.


rule bench_throughput:
    output:
        f"{R}/bench/throughput.json",
    log:
        f"{R}/logs/bench/throughput.log",
    benchmark:
        f"{R}/benchmarks/bench/throughput.tsv"
    conda:
        "../envs/torch.yaml"
    threads: 8
    resources:
        mem_mb=8000,
        runtime=30,
    params:
        reference=PLAN.reference(CFG["zoo"]["reference"]),
        settings={
            k: CFG["bench"][k]
            for k in ("T", "B", "repeats", "max_recurrent_seconds")
            if k in CFG["bench"]
        },
    script:
        "../scripts/bench_throughput.py"


rule bench_stream:
    output:
        f"{R}/bench/stream/{{tokens}}.json",
    log:
        f"{R}/logs/bench/stream_{{tokens}}.log",
    benchmark:
        f"{R}/benchmarks/bench/stream_{{tokens}}.tsv"
    wildcard_constraints:
        tokens=r"\d+",
    conda:
        "../envs/torch.yaml"
    threads: 8
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        reference=PLAN.reference(CFG["bench"]["stream"]),
        piece=CFG["bench"]["piece"],
    script:
        "../scripts/bench_stream.py"


rule bench_cells:
    input:
        throughput=f"{R}/bench/throughput.json",
        streams=[f"{R}/bench/stream/{n}.json" for n in CFG["bench"]["stream_tokens"]],
    output:
        json=report(
            f"{R}/bench/cells.json",
            category="Benchmarks",
            caption="../docs/report/bench.rst",
        ),
        png=report(
            f"{R}/bench/cells.png",
            category="Benchmarks",
            caption="../docs/report/bench.rst",
        ),
        pdf=report(
            f"{R}/bench/cells.pdf",
            category="Benchmarks",
            caption="../docs/report/bench.rst",
        ),
    log:
        f"{R}/logs/bench/cells.log",
    benchmark:
        f"{R}/benchmarks/bench/cells.tsv"
    conda:
        "../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/bench_cells.py"
