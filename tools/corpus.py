#!/usr/bin/env python3
"""The offline English corpus of the real-text recall task (`arbench.tasks.realtext`).

    python3 tools/corpus.py fetch [--out PATH]   # install, write, print path and sha256

The corpus is the King James Bible (public domain, about 790,000 words), from Debian's
``bible-kjv`` package (its ``bible`` program reads the compressed text of
``bible-kjv-text``); `fetch` runs ``apt-get install -y bible-kjv`` when the program is
missing (as root; otherwise it prints that command and stops). It dumps Genesis 1:1 to
Revelation 22:21 and writes one verse per line, without the book and chapter headings and
verse numbers, with punctuation split off the words (the way wikitext-103 is tokenised, so
that whitespace-splitting gives words, not "earth."). The output is the same bytes whatever
the terminal width, so its sha256 identifies it. A researcher with wikitext-103 passes that
file's path as ``task.corpus`` instead.

Standard library only, so it runs with the system's python3. A failure is one line on
stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = "bible-kjv"  # depends on bible-kjv-text, which holds the text itself
PROGRAM = "bible"
SPAN = "gen1:1-rev22:21"
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "data" / "corpora" / "kjv.txt"
# what `fetch` writes from bible-kjv 4.38 (Debian 12); another version may differ
KNOWN_SHA256 = "8f1089e589c882e61bc2a618fb6e3fe598f19eec748ddd6f1f994b2a9644d9c8"

VERSE = re.compile(r"^\s+(\d+)\s+(.*)$")
HEADING = re.compile(r"^\S.*\s\d+$")  # "Genesis 1", "1 Kings 3", after a blank line
PUNCT = re.compile(r"([.,;:!?()\"])")


class Failure(Exception):
    """A one-line failure."""


def _program() -> str:
    """The ``bible`` program's path, installing Debian's package when it is missing."""
    found = shutil.which(PROGRAM)
    if found:
        return found
    command = ["apt-get", "install", "-y", PACKAGE]
    if os.geteuid() != 0:
        raise Failure(f"{PROGRAM} is missing: run `sudo {' '.join(command)}` first")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise Failure(f"`{' '.join(command)}` failed: {tail[0]}")
    found = shutil.which(PROGRAM)
    if not found:
        raise Failure(f"{PACKAGE} installed but {PROGRAM} is not on PATH")
    return found


def verses(dump: str) -> list[str]:
    """The verses of the program's dump, one string each: a verse starts at a line
    ``  N text`` and runs on over the wrapped lines after it; headings are dropped."""
    out: list[str] = []
    blank = True
    for line in dump.splitlines():
        after_blank, blank = blank, not line.strip()
        if blank:
            continue
        m = VERSE.match(line)
        if m:
            out.append(m.group(2))
        elif after_blank and HEADING.match(line):
            continue
        elif out:
            out[-1] += " " + line.strip()
        else:
            raise Failure(f"unexpected text before the first verse: {line[:60]!r}")
    return out


def clean(verse: str) -> str:
    """A verse with punctuation split off into tokens and whitespace normalised."""
    return " ".join(PUNCT.sub(r" \1 ", verse).split())


def fetch(out: Path) -> tuple[Path, str, int]:
    """Write the corpus to ``out``; return its path, sha256 and size in bytes."""
    program = _program()
    env = {**os.environ, "COLUMNS": "80"}
    done = subprocess.run([program, "-l80", SPAN], env=env, capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout:
        raise Failure(f"`{program} {SPAN}` failed: {done.stderr.strip()[:200]}")
    text = "\n".join(clean(v) for v in verses(done.stdout)) + "\n"
    data = text.encode("utf-8")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    return out, hashlib.sha256(data).hexdigest(), len(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fetch", help="install the corpus, print its path and sha256")
    f.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    args = parser.parse_args(argv)
    try:
        path, sha, size = fetch(args.out)
    except (Failure, OSError) as e:
        print(f"corpus: {e}", file=sys.stderr)
        return 1
    print(f"path {path}")
    print(f"sha256 {sha}")
    print(f"bytes {size}")
    if sha != KNOWN_SHA256:
        print(f"note: not the sha256 of bible-kjv 4.38's text ({KNOWN_SHA256})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
