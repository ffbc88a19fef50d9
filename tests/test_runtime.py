"""The job runtime: threads pinned, log file written, and a failure's traceback in the log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def test_setup_logs_a_broken_torch(tmp_path: Path) -> None:
    """The log opens before torch is imported, so an environment without it says so there."""
    log = tmp_path / "job.log"
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'src')!r})\n"
        "sys.modules['torch'] = None  # import torch raises ImportError\n"
        "from arbench.runtime import setup\n"
        f"setup({str(log)!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    assert "Traceback" in log.read_text() and "torch" in log.read_text()


def test_sigterm_is_logged_with_where_the_job_was(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    code = (
        "import os, signal, sys, time\n"
        f"sys.path.insert(0, {str(ROOT / 'src')!r})\n"
        "sys.modules['torch'] = type(sys)('torch')  # a stand-in: the real import is slow\n"
        "sys.modules['torch'].set_num_threads = lambda n: None\n"
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
