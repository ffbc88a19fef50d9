"""Snakemake glue: run the passkey_swar oracle and write the report, card, vocab and stats."""

import json
import os
from pathlib import Path

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.passkey_swar import validate, write_index
from arbench.tasks.passkey_swar import Params

sm = snakemake  # noqa: F821 (injected by Snakemake)
params = Params.from_dict(dict(sm.params.gen_params))
out_dir = Path(sm.output.report).parent
with open(sm.log[0], "w") as log:
    say = lambda msg: print(msg, file=log, flush=True)
    write_index(out_dir, params)  # README.md, vocab.json, stats.md (atomic renames)
    report = validate(out_dir, params, dict(sm.params.split_seeds), progress=say)
    say(json.dumps({k: report[k] for k in ("ok", "examples_checked", "failed_examples")}))
    if not report["ok"]:
        say(json.dumps(report, indent=1))
        raise SystemExit("passkey_swar oracle found failures; see this log")

out = Path(sm.output.report)
tmp = out.with_name(out.name + ".tmp")
tmp.write_text(json.dumps(report, indent=1) + "\n")
os.replace(tmp, out)
