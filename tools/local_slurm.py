#!/usr/bin/env python3
"""A single-node SLURM on this machine, to run the pipeline through profiles/slurm for real.

    python3 tools/local_slurm.py install   # Debian's slurm-wlm and munge (apt-get, as root)
    python3 tools/local_slurm.py up        # munged, slurmctld, slurmd; waits for an idle node
    python3 tools/local_slurm.py status    # one line; exit 0 up, 1 down, 2 partly up
    python3 tools/local_slurm.py down      # stops them by pid, removes what `up` wrote

No systemd is needed: each daemon runs in the foreground in its own session (setsid) and
its pid is recorded in a private state folder (``--state``, default
/var/lib/arbench-slurm), which also holds SLURM's state, spool, logs and munge's seed. The
configuration must live at /etc/slurm/slurm.conf (the executor plugin's job step drops
SLURM_CONF); it is written with a header line naming this script, and a slurm.conf
without that header is never overwritten or removed. `down` cancels the cluster's jobs,
stops the daemons by recorded pid and removes the conf and the state folder. Every command
is idempotent; a failure is one line on stderr and exit status 1. The settings that work on
such a machine (SLURM 22.05, munge 0.5, no systemd) are those of docs/SLURM_NOTES.md in the
project's shared folder.

Standard library only, so it runs with the system's python3.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

CONF = Path("/etc/slurm/slurm.conf")
HEADER = "# written by arbench tools/local_slurm.py (removed by its `down`); edit it there"
DEFAULT_STATE = Path(os.environ.get("ARBENCH_SLURM_STATE", "/var/lib/arbench-slurm"))
MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_RUN = Path("/run/munge")  # the socket folder every SLURM client looks in
PACKAGES = ("slurm-wlm", "munge")
BINARIES = ("munged", "munge", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel")
ORDER = ("munged", "slurmctld", "slurmd")  # start order; stopped in reverse
IDLE_TIMEOUT_S = 60.0


class Failure(Exception):
    """One line for the user; the command exits 1."""


# --------------------------------------------------------------------------- helpers


def need_root(what: str) -> None:
    if os.geteuid() != 0:
        raise Failure(f"{what} needs root (running as uid {os.geteuid()})")


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None]


def alive(pid: int, name: str) -> bool:
    """Whether ``pid`` is still the ``name`` daemon we started (not a reused pid, not a
    zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] == "Z":
        return False
    return any(Path(arg.decode(errors="replace")).name == name for arg in cmdline)


def read_pids(state: Path) -> dict[str, int]:
    try:
        return json.loads((state / "pids.json").read_text())["pids"]
    except (OSError, ValueError, KeyError):
        return {}


def write_pids(state: Path, pids: dict[str, int], made_run_dir: bool) -> None:
    tmp = state / "pids.json.tmp"
    tmp.write_text(json.dumps({"pids": pids, "made_run_dir": made_run_dir}, indent=1))
    tmp.replace(state / "pids.json")


def made_run_dir(state: Path) -> bool:
    try:
        return bool(json.loads((state / "pids.json").read_text()).get("made_run_dir"))
    except (OSError, ValueError):
        return False


def conf_is_ours(path: Path = CONF) -> bool:
    try:
        with path.open() as f:
            return f.readline().rstrip("\n") == HEADER
    except OSError:
        return False


def conf_state(path: Path = CONF) -> Path | None:
    """The state folder our slurm.conf was written for (its second line), else None."""
    if not conf_is_ours(path):
        return None
    lines = path.read_text().splitlines()
    prefix = "# state folder: "
    return Path(lines[1][len(prefix) :]) if len(lines) > 1 and lines[1].startswith(prefix) else None


def run(cmd: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def last_line(path: Path) -> str:
    try:
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"


# --------------------------------------------------------------------------- install


def install() -> None:
    """Debian's slurm-wlm and munge, and munge's key; nothing is started."""
    need_root("install")
    if missing_binaries():
        if shutil.which("apt-get") is None:
            raise Failure("install needs apt-get (Debian or Ubuntu); none on PATH")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = ["apt-get", "install", "-y", "-q", *PACKAGES]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:  # a fresh machine may have no package lists yet
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env)
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
            raise Failure(f"apt-get install {' '.join(PACKAGES)} failed: {' '.join(tail)}")
        if missing_binaries():
            raise Failure(f"after apt-get install, still missing: {missing_binaries()}")
    if not MUNGE_KEY.exists():
        proc = run(["mungekey", "--create", "--keyfile", str(MUNGE_KEY)])
        if proc.returncode != 0:
            raise Failure(f"mungekey --create failed: {proc.stderr.strip()}")
        shutil.chown(MUNGE_KEY, "munge", "munge")
        MUNGE_KEY.chmod(0o400)
    version = run(["slurmctld", "-V"]).stdout.strip()
    print(f"installed: {version}, munge; start it with: python3 {sys.argv[0]} up")


# --------------------------------------------------------------------------- up


def node_line() -> tuple[str, str]:
    """(node name, its NodeName= line) as slurmd measures this machine."""
    proc = run(["slurmd", "-C"])
    first = proc.stdout.strip().splitlines()[:1]
    if proc.returncode != 0 or not first or not first[0].startswith("NodeName="):
        raise Failure(f"slurmd -C gave no node line: {proc.stderr.strip() or proc.stdout}")
    name = first[0].split()[0].split("=", 1)[1]
    return name, f"{first[0]} NodeAddr=127.0.0.1 State=UNKNOWN"


def slurm_conf(state: Path, node: str, line: str) -> str:
    """One node, one default partition, no accounting; every path in ``state``."""
    host = socket.gethostname().split(".")[0]
    return f"""{HEADER}
# state folder: {state}
ClusterName=arbench
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
MinJobAge=300
ReturnToService=2
StateSaveLocation={state}/ctld
SlurmdSpoolDir={state}/spool
SlurmctldPidFile={state}/slurmctld.pid
SlurmdPidFile={state}/slurmd.pid
SlurmctldLogFile={state}/log/slurmctld.log
SlurmdLogFile={state}/log/slurmd.log
{line}
PartitionName=local Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


def spawn(cmd: list[str], log: Path) -> subprocess.Popen:
    """Start ``cmd`` in its own session (setsid), output to ``log``."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True,
        )  # fmt: skip
    return proc


def wait_for(
    check, what: str, timeout: float, proc: subprocess.Popen, name: str, log: Path
) -> None:
    """Poll ``check()`` until true; fail naming the daemon's exit status and last log line
    if it died (asked of the child itself: /proc reads race with its exec)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        if proc.poll() is not None:
            raise Failure(
                f"{name} (pid {proc.pid}) exited with status {proc.returncode} before "
                f"{what}: {last_line(log)}"
            )
        time.sleep(0.2)
    raise Failure(f"{what}: not after {timeout:.0f} s; see {log}")


def node_state(node: str) -> str:
    try:
        proc = run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], timeout=10)
    except subprocess.TimeoutExpired:
        return "(sinfo timed out)"
    return proc.stdout.strip() if proc.returncode == 0 else "(no answer)"


def up(state: Path) -> None:
    """Write the conf, start munged, slurmctld and slurmd, wait until the node is idle."""
    need_root("up")
    if missing_binaries():
        raise Failure(f"missing {missing_binaries()}: run python3 {sys.argv[0]} install")
    pids = read_pids(state)
    if pids and all(alive(pids.get(n, -1), n) for n in ORDER):
        node, _ = node_line()
        print(f"already up: {describe(pids)}; node {node} {node_state(node)}")
        return
    if pids:  # partly up: start clean
        down(state, quiet=True)
    other = conf_state()
    if (
        other is not None
        and other != state
        and any(alive(p, n) for n, p in read_pids(other).items())
    ):
        raise Failure(f"a cluster with state {other} is up: run down --state {other} first")
    if CONF.exists() and not conf_is_ours():
        raise Failure(f"{CONF} exists and is not ours (first line is not {HEADER!r}): "
                      "move it away, or use that site's SLURM as it is")  # fmt: skip
    for parent in state.parents:  # munged, as user munge, keeps its seed and log in there
        if parent.exists() and not parent.stat().st_mode & 0o001:
            raise Failure(f"--state {state}: {parent} is closed to other users, so munged "
                          "cannot reach its folder; pick one under /var/lib or /srv")  # fmt: skip
    node, line = node_line()
    for sub in ("ctld", "spool", "log"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    state.chmod(0o755)
    munge_dir = state / "munge"
    munge_dir.mkdir(exist_ok=True)
    shutil.chown(munge_dir, "munge", "munge")
    munge_dir.chmod(0o700)
    made = not MUNGE_RUN.exists()
    if made:
        MUNGE_RUN.mkdir(mode=0o755)
        shutil.chown(MUNGE_RUN, "munge", "munge")
    pids = {}
    write_pids(state, pids, made)
    CONF.parent.mkdir(parents=True, exist_ok=True)
    CONF.write_text(slurm_conf(state, node, line))

    log = state / "log"
    munged = [
        "setpriv", "--reuid=munge", "--regid=munge", "--init-groups",
        "munged", "-F", f"--key-file={MUNGE_KEY}", f"--socket={MUNGE_RUN}/munge.socket.2",
        f"--pid-file={munge_dir}/munged.pid", f"--log-file={munge_dir}/munged.log",
        f"--seed-file={munge_dir}/munged.seed",
    ]  # fmt: skip
    commands = {
        "munged": munged,
        "slurmctld": ["slurmctld", "-D", "-i"],
        "slurmd": ["slurmd", "-D"],
    }
    ready = {
        "munged": (lambda: run(["munge", "-n"], 10).returncode == 0, "munge answers"),
        "slurmctld": (lambda: run(["scontrol", "ping"], 10).returncode == 0, "slurmctld up"),
        "slurmd": (lambda: node_state(node) == "idle", f"node {node} idle"),
    }
    try:
        for name in ORDER:
            proc = spawn(commands[name], log / f"{name}.out")
            pids[name] = proc.pid
            write_pids(state, pids, made)
            check, what = ready[name]
            wait_for(check, what, IDLE_TIMEOUT_S, proc, name, log / f"{name}.out")
    except BaseException:
        down(state, quiet=True)
        raise
    print(f"up: {describe(pids)}; node {node} idle; state in {state}")


def describe(pids: dict[str, int]) -> str:
    return ", ".join(f"{n} pid {pids[n]}" for n in ORDER if n in pids)


# --------------------------------------------------------------------------- down


def session_members(sids: set[int]) -> list[int]:
    """Pids of live processes in one of the sessions ``sids`` (the daemons' own sessions,
    so children such as slurmstepd are found without matching any name)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) in sids:  # state, ppid, pgrp, session
            out.append(int(entry.name))
    return out


def socket_holders(folder: Path) -> list[int]:
    """Pids holding a unix socket inside ``folder``: slurmd and each job's slurmstepd (which
    leaves slurmd's session), found by the socket they listen on in our spool, not by name."""
    prefix = f"{folder}/"
    inodes = set()
    for row in Path("/proc/net/unix").read_text().splitlines()[1:]:
        cols = row.split()
        if len(cols) >= 8 and cols[7].startswith(prefix):
            inodes.add(f"socket:[{cols[6]}]")
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            links = {os.readlink(fd) for fd in (entry / "fd").iterdir()}
        except OSError:
            continue
        if links & inodes:
            out.append(int(entry.name))
    return out


def session_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


def stop(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout`` s."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if not Path(f"/proc/{pid}").exists() or _zombie(pid):
                return
            time.sleep(0.1)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def down(state: Path, quiet: bool = False) -> None:
    """Cancel the cluster's jobs, stop the recorded daemons and anything left in their
    sessions, and remove the conf (ours only), munge's run folder (if we made it) and the
    state folder."""
    need_root("down")
    pids = read_pids(state)
    ours = {n: p for n, p in pids.items() if alive(p, n)}
    if "slurmctld" in ours and conf_state() == state:
        jobs = run(["squeue", "-h", "-o", "%i"], 10).stdout.split()
        if jobs:
            run(["scancel", *jobs], 10)
            end = time.monotonic() + 15
            while time.monotonic() < end and run(["squeue", "-h", "-o", "%i"], 10).stdout.strip():
                time.sleep(0.5)
    # each job's slurmstepd runs in a session of its own, with the job's processes
    steps = [p for p in socket_holders(state) if p not in ours.values()]
    sessions = set(ours.values()) | {s for s in map(session_of, steps) if s is not None}
    for name in reversed(ORDER):
        if name in ours:
            stop(ours[name])
    for pid in steps + session_members(sessions):
        stop(pid, timeout=5.0)
    if made_run_dir(state) and MUNGE_RUN.exists():
        shutil.rmtree(MUNGE_RUN, ignore_errors=True)
    removed = []
    if conf_state() == state:  # never another state folder's conf
        CONF.unlink()
        removed.append(str(CONF))
    if state.exists():
        shutil.rmtree(state)
        removed.append(str(state))
    if not quiet:
        what = f"stopped {describe(ours)}" if ours else "nothing was running"
        print(f"down: {what}; removed {', '.join(removed) or 'nothing'}")


# --------------------------------------------------------------------------- status


def status(state: Path) -> int:
    pids = read_pids(state)
    live = {n: p for n, p in pids.items() if alive(p, n)}
    if not live:
        print("down" + (f" (stale state in {state}: run down)" if state.exists() else ""))
        return 1
    if len(live) < len(ORDER):
        dead = [n for n in ORDER if n not in live]
        print(f"partly up: {describe(live)}; not running: {', '.join(dead)}")
        return 2
    node, _ = node_line()
    print(f"up: {describe(live)}; node {node} {node_state(node)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("install", "up", "down", "status"))
    parser.add_argument("--state", type=Path, default=DEFAULT_STATE,
                        help=f"private state folder (default {DEFAULT_STATE})")  # fmt: skip
    args = parser.parse_args(argv)
    state = args.state.resolve()
    try:
        if args.command == "install":
            install()
        elif args.command == "up":
            up(state)
        elif args.command == "down":
            down(state)
        else:
            return status(state)
    except Failure as err:
        print(f"local_slurm {args.command}: {err}", file=sys.stderr)
        return 1
    except subprocess.TimeoutExpired as err:
        print(f"local_slurm {args.command}: {err.cmd[0]} timed out", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
