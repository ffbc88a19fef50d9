"""Our paper-scale runs as a release in the repository (references/arbench_paper_runs):
publish the finished ones, check the records, retrain one and compare it to the last bit.

    python tools/paper_release.py publish [--root results] [--commit SHA] [--replace]
    python tools/paper_release.py check
    python tools/paper_release.py retrain paper_mqar/armed_gdn/seed0 [--here] [--keep]
                                          [--workdir DIR] [--out result.json] [--dry-run]

publish: one record per finished paper-scale evaluation under --root that this checkout's
config plans (`arbench.paper_release.publish`), idempotent; a record already published with
other scores or model bytes for the same fingerprint is refused, naming the file and key
(exit 1). The commit is the HEAD of the checkout holding --root unless --commit names it, the
machine this host (a run's final.json names neither).

retrain: clones this repository into a fresh folder, checks out the record's commit (--here:
copies this checkout's files instead, uncommitted changes included), runs
`snakemake --cores <the record's threads> results/evals/<experiment>/<arm>/seed<N>.json` there
at paper scale (CPU only where the record's run was), and prints, key by key, whether the
fingerprint, the model's sha256 and every held-out score match the record to the last bit
(exit 0: all match).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arbench.paper_release import (  # noqa: E402
    RELEASE_DIR,
    ReleaseError,
    Stamp,
    compare,
    git_commit,
    load_record,
    load_release,
    machine,
    publish,
    record_path,
    sha256_file,
)


def _publish(args: argparse.Namespace) -> int:
    """The publish subcommand."""
    from arbench import config as arbench_config
    from arbench.plan import Plan

    root = Path(args.root)
    if not (root / "evals").is_dir():
        print(f"{root}: no evals/ folder: nothing to publish")
        return 0
    if args.commit:
        commit, dirty = args.commit, False
        how = "the commit was given to publish (--commit)"
    else:
        commit, dirty = git_commit(root)
        state = "with tracked changes" if dirty else "clean"
        how = f"the commit is the HEAD of the checkout holding the results when published ({state})"
    stamp = Stamp(
        commit=commit,
        dirty=dirty,
        host=machine(),
        provenance=(
            f"published by tools/paper_release.py from {root.resolve()}: {how}; the machine is "
            "the publishing host (a run's final.json names neither)"
        ),
    )
    plan = Plan(arbench_config.load(ROOT / "config.yaml", scale="paper"))
    report = publish(root, args.release, plan.table, stamp, replace=args.replace)
    for line in report.lines():
        print(line)
    return 1 if report.refused else 0


def _check(args: argparse.Namespace) -> int:
    """The check subcommand: every record valid."""
    records = load_release(args.release)
    print(f"{len(records)} records valid in {args.release}")
    return 0


def _tree(dest: Path, commit: str, here: bool) -> str:
    """A fresh copy of the repository in ``dest``: a clone at ``commit``, or (``here``) this
    checkout's tracked and untracked, not ignored, files. Returns what it is."""
    if here:
        files = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
        for name in filter(None, files):
            src = ROOT / os.fsdecode(name)
            if src.is_file():
                (dest / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / os.fsdecode(name))
        return f"a copy of this checkout ({ROOT}), uncommitted changes included"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(dest)], check=True)
    subprocess.run(["git", "checkout", "--quiet", "--detach", commit], cwd=dest, check=True)
    return f"a fresh clone of {ROOT} at {commit}"


def _snakemake() -> str:
    """This environment's snakemake."""
    exe = Path(sys.executable).parent / "snakemake"
    return str(exe) if exe.exists() else shutil.which("snakemake") or "snakemake"


def _retrain(args: argparse.Namespace) -> int:
    """The retrain subcommand."""
    try:
        experiment, arm, seed_text = args.run.strip("/").split("/")
        seed = int(seed_text.removeprefix("seed"))
    except ValueError:
        print(f"{args.run!r}: expected <experiment>/<arm>/seed<N>", file=sys.stderr)
        return 2
    record = load_record(record_path(args.release, experiment, arm, seed))
    target = f"results/evals/{experiment}/{arm}/seed{seed}.json"
    cmd = [_snakemake(), "--cores", str(record["threads"]), "--rerun-incomplete", target]
    env = dict(os.environ)
    if record["device"] == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # the record's run trained on the CPU
    work = Path(args.workdir or tempfile.mkdtemp(prefix="arbench-retrain-"))
    tree = work / "arbench"
    where = "this checkout's files" if args.here else f"a clone at {record['commit']}"
    print(f"retrain {experiment}/{arm}/seed{seed} in {tree} ({where}): {' '.join(cmd)}")
    if record["commit_dirty"] and not args.here:
        print("note: the record says its checkout had tracked changes beside that commit")
    if args.dry_run:
        return 0
    tree.mkdir(parents=True, exist_ok=False)
    what = _tree(tree, record["commit"], args.here)
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=tree, env=env, check=True)
    seconds = time.perf_counter() - t0
    ev = json.loads((tree / target).read_text())
    owner = record["trained_as"]
    run_dir = tree / "results" / "runs" / owner["experiment"] / owner["arm"] / f"seed{seed}"
    final = json.loads((run_dir / "final.json").read_text())
    rows = compare(record, ev, final, sha256_file(run_dir / "model.pt"))
    print(f"retrained from {what} in {seconds:.0f} s ({final['wall_time_s']:.0f} s training)")
    print(f"{'key':<34} {'published':<26} {'retrained':<26} same")
    for m in rows:
        print(f"{m.key:<34} {_cell(m.published):<26} {_cell(m.retrained):<26} {m.same}")
    ok = all(m.same for m in rows)
    print(f"match to the last bit: {'yes' if ok else 'NO'}")
    if args.out:
        doc = {
            "run": f"{experiment}/{arm}/seed{seed}",
            "tree": what,
            "command": cmd,
            "seconds": seconds,
            "match": ok,
            "keys": [
                {"key": m.key, "published": m.published, "retrained": m.retrained, "same": m.same}
                for m in rows
            ],
        }
        Path(args.out).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


def _cell(value: object) -> str:
    """A value for the comparison table: floats in full (repr), long text shortened."""
    text = repr(value) if isinstance(value, float) else str(value)
    return text if len(text) <= 26 else text[:23] + "..."


def main(argv: list[str] | None = None) -> int:
    """Parse the subcommand and run it; a bad record fails in one line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", default=str(RELEASE_DIR), help="the release folder")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("publish", help="record every finished paper-scale run")
    p.add_argument("--root", default=str(ROOT / "results"), help="paper-scale results root")
    p.add_argument("--commit", help="the commit the runs were trained at (default: HEAD)")
    p.add_argument("--replace", action="store_true", help="publish runs whose settings changed")
    p.set_defaults(fn=_publish)
    c = sub.add_parser("check", help="validate every record")
    c.set_defaults(fn=_check)
    r = sub.add_parser("retrain", help="retrain one published run and compare it")
    r.add_argument("run", help="<experiment>/<arm>/seed<N>")
    r.add_argument("--here", action="store_true", help="this checkout's files, not the commit")
    r.add_argument("--workdir", help="where to build the tree (default: a new temp folder)")
    r.add_argument("--keep", action="store_true", help="keep the tree and its results")
    r.add_argument("--out", help="write the comparison as JSON here")
    r.add_argument("--dry-run", action="store_true", help="print the command only")
    r.set_defaults(fn=_retrain)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except ReleaseError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
