"""Script jobs import this checkout's library even when another arbench is on the path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_arbench_path_prefers_this_checkout(tmp_path: Path) -> None:
    other = tmp_path / "other_src" / "arbench"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("WRONG_CHECKOUT = True\n")
    # the other checkout first, this one later: what a job of a shared environment sees
    code = (
        "import sys; "
        f"sys.path[:0] = [{str(other.parent)!r}, {str(ROOT / 'src')!r}]; "
        "import _arbench_path, arbench; print(arbench.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT / "scripts", capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).resolve() == ROOT / "src" / "arbench" / "__init__.py"
