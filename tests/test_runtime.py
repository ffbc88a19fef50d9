"""The job runtime: threads pinned, log file written, and a failure's traceback in the log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

JOB = """
import sys
sys.path.insert(0, {src!r})
from arbench.runtime import setup
import torch
log = setup({log!r}, threads=1)
log("working with %d thread(s)" % torch.get_num_threads())
raise KeyError("no such arm: ghost")
"""


def test_a_failed_job_leaves_its_traceback_in_the_log(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "job.log"
    code = JOB.format(src=str(ROOT / "src"), log=str(log))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    text = log.read_text()
    assert "working with 1 thread(s)" in text
    assert "job failed" in text and "Traceback" in text and "no such arm: ghost" in text
    assert text.count("Traceback") == 1 and done.stderr.count("Traceback") == 1


SCRIPTS = sorted(p for p in (ROOT / "scripts").glob("*.py") if p.name != "_arbench_path.py")

# a job whose every library import after `arbench.runtime` fails, and whose snakemake object
# has only a log and threads: whatever a script does after `setup`, it fails there
POISONED = """
import runpy, sys
sys.path.insert(0, {scripts!r})
ALLOWED = {{"arbench", "arbench.runtime", "arbench.cpu_memory"}}

class Poison:
    def find_spec(self, name, path=None, target=None):
        if name.startswith("arbench.") and name not in ALLOWED:
            raise ImportError(f"deliberately broken import of {{name}}")
        return None

sys.meta_path.insert(0, Poison())
# a stand-in torch for setup's thread pinning (the real import costs seconds per script)
sys.modules["torch"] = type(sys)("torch")
sys.modules["torch"].set_num_threads = lambda n: None

class FakeSnakemake:
    log, threads = [{log!r}], 1
    def __getattr__(self, name):
        raise AttributeError(f"deliberately missing snakemake.{{name}}")

runpy.run_path({script!r}, init_globals={{"snakemake": FakeSnakemake()}}, run_name="__main__")
"""


def test_every_script_logs_a_failure_of_anything_after_setup(tmp_path: Path) -> None:
    """Each script calls `runtime.setup` before any library import (and before reading its
    inputs), so the failure of any of them reaches the rule's log with its traceback."""
    jobs = {}
    for script in SCRIPTS:
        log = tmp_path / f"{script.stem}.log"
        code = POISONED.format(scripts=str(script.parent), log=str(log), script=str(script))
        jobs[script.name] = (
            log,
            subprocess.Popen(
                [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
            ),
        )
    for name, (log, job) in jobs.items():
        _, err = job.communicate(timeout=300)
        assert job.returncode == 1, f"{name}: {err.decode()[-2000:]}"
        assert log.exists(), f"{name} failed before runtime.setup opened its log"
        text = log.read_text()
        assert "job failed" in text and "Traceback" in text, f"{name}: {text}"
        assert "deliberately" in text, f"{name}: {text}"


def test_a_broken_torch_is_logged_by_the_job_that_imports_it(tmp_path: Path) -> None:
    """The log opens before anything imports torch, so an environment without it says so
    there; `setup` itself never imports it."""
    log = tmp_path / "job.log"
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'src')!r})\n"
        "sys.modules['torch'] = None  # import torch raises ImportError\n"
        "from arbench.runtime import setup\n"
        f"setup({str(log)!r})\n"
        "print('setup done')\n"
        "import torch\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1 and "setup done" in done.stdout
    assert "Traceback" in log.read_text() and "torch" in log.read_text()


def test_threads_are_pinned_for_a_torch_loaded_after_setup(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'src')!r})\n"
        "from arbench.runtime import setup\n"
        "setup(None, threads=1)\n"
        "assert 'torch' not in sys.modules\n"
        "import torch\n"
        "print(torch.get_num_threads())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1"]  # torch alone would take every core


def test_sigterm_is_logged_with_where_the_job_was(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    code = (
        "import os, signal, sys, time\n"
        f"sys.path.insert(0, {str(ROOT / 'src')!r})\n"
        "from arbench.runtime import setup\n"
        f"setup({str(log)!r})\n"
        "def long_training_step():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(30)\n"
        "long_training_step()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    text = log.read_text()
    assert "Terminated: received signal SIGTERM" in text and "long_training_step" in text


# the jobs that read and write data, stats, tables and figures: none needs torch, whose import
# (2-3 s) would be most of such a job's time
TORCH_FREE = [
    "claims",
    "eval_set",
    "figure",
    "floors_table",
    "lattice",
    "paper",
    "release_index",
    "release_split",
    "release_validate",
    "stats",
    "table",
    "validate_stream",
]
IMPORTS_ONLY = """
import ast, sys
sys.path.insert(0, {scripts!r})
tree = ast.parse(open({script!r}).read())
imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
exec(compile(ast.Module(body=imports, type_ignores=[]), {script!r}, "exec"), {{}})
print(sorted(m for m in ("torch", "arbench.models", "arbench.train.loop") if m in sys.modules))
"""


@pytest.mark.parametrize("name", TORCH_FREE)
def test_a_data_or_report_script_never_imports_torch(name: str) -> None:
    script = ROOT / "scripts" / f"{name}.py"
    code = IMPORTS_ONLY.format(scripts=str(script.parent), script=str(script))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", f"{name} imports {done.stdout.strip()}"
