# The real-text task's corpus (arbench.tasks.realtext): the King James Bible from Debian's
# bible-kjv package, written one verse per line by tools/corpus.py (standard library only;
# it installs the package when missing and it runs as root, else says which command to run).
# Its path is the config's `realtext_corpus`, which the task blocks that read it name too; the
# held-out set of such a task takes it as an input (Task.input_files), so a clean checkout
# builds it before any real-text job. One file for every scale, under data/ (an input fetched
# from a package, not a result): the text does not depend on the scale.


if CFG.get("realtext_corpus"):

    rule corpus:
        output:
            CFG["realtext_corpus"],
        log:
            "data/corpora/logs/corpus.log",
        benchmark:
            "data/corpora/logs/corpus.tsv"
        conda:
            "../envs/corpus.yaml"
        threads: 1
        resources:
            mem_mb=500,
            runtime=10,
        shell:
            "python3 tools/corpus.py fetch --out {output} > {log} 2>&1"
