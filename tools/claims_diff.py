"""Every claim whose verdict differs between two claims.md files (two commits, two scales,
before and after a change of the rules), with both verdicts and the new reason.

    python tools/claims_diff.py OLD/claims.md NEW/claims.md [--markdown]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

ROW = re.compile(r"^\| `(?P<id>[a-z0-9_]+)` \| ")
# the verdict in bold, then its reason after ": " (or, in reports before issue 43, a note
# in parentheses after a space)
VERDICT = re.compile(r"^\*\*(?P<verdict>[^*]+)\*\*:?\s*(?P<reason>.*)$")
VERDICT_COLUMN = 7


def read_rows(path: str | Path) -> dict[str, tuple[str, str]]:
    """Claim id -> (verdict, reason) of each claim row of a claims.md."""
    rows = {}
    for line in Path(path).read_text().splitlines():
        m = ROW.match(line)
        if not m:
            continue
        cells = re.split(r"(?<!\\) \| ", line.strip().strip("|").strip())
        v = VERDICT.match(cells[VERDICT_COLUMN].strip())
        if v is None:
            raise ValueError(f"{path}: claim {m['id']}: no verdict in column {VERDICT_COLUMN}")
        rows[m["id"]] = (v["verdict"], (v["reason"] or "").replace(r"\|", "|"))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Print the counts of both files and each changed row."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--markdown", action="store_true", help="rows as a Markdown table")
    args = ap.parse_args(argv)
    old, new = read_rows(args.old), read_rows(args.new)
    for name, rows in (("old", old), ("new", new)):
        counts = Counter(v for v, _ in rows.values())
        print(f"{name}: " + ", ".join(f"{n} {v}" for v, n in counts.most_common()))
    changed = [c for c in new if c in old and old[c][0] != new[c][0]]
    print(f"{len(changed)} of {len(new)} claims changed verdict")
    if args.markdown:
        print("| claim | before | after | why (the new reason) |\n| --- | --- | --- | --- |")
    for c in changed:
        why = new[c][1].replace("|", r"\|")
        if args.markdown:
            print(f"| `{c}` | {old[c][0]} | {new[c][0]} | {why} |")
        else:
            print(f"{c}: {old[c][0]} -> {new[c][0]}: {why}")
    for c in sorted(set(old) ^ set(new)):
        print(f"{c}: only in {'old' if c in old else 'new'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
