"""Snakemake glue: generate one passkey_swar config/split (rule passkey_swar_generate)."""

from pathlib import Path

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.passkey_swar import write_split
from arbench.tasks.passkey_swar import Params

sm = snakemake  # noqa: F821 (injected by Snakemake)
out_dir = Path(sm.output.sidecar).parents[2]  # <dataset>/stats/n{N}/{split}.json
N, split = int(sm.wildcards.N), sm.wildcards.split

with open(sm.log[0], "w") as log:
    # write_split stages shards in a temporary folder and renames them into place; the
    # sidecar (this rule's output) is written last through a temporary file.
    write_split(
        out_dir,
        N,
        split,
        int(sm.params.n_examples),
        Params.from_dict(dict(sm.params.gen_params)),
        split_seeds=dict(sm.params.split_seeds),
        shard_rows=int(sm.params.shard_rows),
        progress=lambda msg: print(msg, file=log, flush=True),
    )
