"""Generic daemon management that runs *on a node*: `python3 -m faultline.cluster.daemon start|stop|kill|pause|...`.

Every backend (docker exec, `ip netns exec`, SSH) manages processes the same way by running this module
on the node, so there is one implementation of "argv + env + log file + pid file" instead of three shell
dialects. Standard library only: it runs in the node image and on bare hosts.

Layout under `--dir D`: `D/logs/NAME.log` (stdout and stderr, appended), `D/run/NAME.pid` ("pid starttime",
so a recycled pid is never mistaken for ours). Each daemon leads its own session, and a signal goes to its
whole process tree: its process group and every descendant found through /proc, since some daemons put
their children in sessions of their own (PostgreSQL's backends call setsid(), so a signal to the
postmaster's group alone leaves them serving, writing and fsyncing after a "kill"). With
`--faketime FILE` the daemon runs under libfaketime reading its offset from FILE; only the wall clock
moves (monotonic clocks stay real, so timeouts keep working).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TypedDict

FAKETIME_LIBS = (
    "/usr/lib/*/faketime/libfaketimeMT.so.1",
    "/usr/lib/*/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
)


def _pidfile(d: Path, name: str) -> Path:
    return d / "run" / f"{name}.pid"


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state, ppid, ...), or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw.rsplit(")", 1)[1].split()


def _starttime(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[19] if fields else None


def _state(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[0] if fields else None


def _alive(pid: int, start: str) -> bool:
    """`pid` is the process that started at `start` (not a recycled pid) and is neither a zombie nor dead."""
    fields = _stat(pid)
    return fields is not None and fields[19] == start and fields[0] not in ("Z", "X")


def read_pid(d: Path, name: str) -> int | None:
    """The daemon's pid if it is alive (not a zombie, not a recycled pid), else None."""
    try:
        pid_s, start = _pidfile(d, name).read_text().split()
        pid = int(pid_s)
    except (OSError, ValueError):
        return None
    return pid if _alive(pid, start) else None


def status(d: Path, name: str) -> str:
    pid = read_pid(d, name)
    if pid is None:
        return "stopped"
    return "paused" if _state(pid) == "T" else "running"


def faketime_lib() -> str | None:
    for pattern in FAKETIME_LIBS:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[0]
    return None


class _UserArgs(TypedDict, total=False):
    user: int
    group: int
    extra_groups: list[int]


def _as_user(user: str | None) -> _UserArgs:
    """Popen arguments that drop to `user` (its uid, primary gid and groups) just before exec."""
    if not user:
        return {}
    import pwd

    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": os.getgrouplist(user, entry.pw_gid)}


def start(
    d: Path,
    name: str,
    argv: list[str],
    env: dict[str, str],
    faketime: str | None,
    cwd: str | None,
    user: str | None = None,
) -> int:
    if read_pid(d, name) is not None:
        print(f"{name}: already running")
        return 0
    (d / "logs").mkdir(parents=True, exist_ok=True)
    (d / "run").mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ)
    full_env.update(env)
    if faketime:
        lib = faketime_lib()
        if lib is None:
            print("libfaketime is not installed on this node", file=sys.stderr)
            return 3
        ft = Path(faketime)
        ft.parent.mkdir(parents=True, exist_ok=True)
        if not ft.exists():
            ft.write_text("+0\n")
        full_env.update(
            {
                "LD_PRELOAD": lib,
                "FAKETIME_TIMESTAMP_FILE": str(ft),
                "FAKETIME_DONT_FAKE_MONOTONIC": "1",
                "FAKETIME_CACHE_DURATION": "1",
                "FAKETIME_DONT_RESET": "1",
            }
        )
    log = open(d / "logs" / f"{name}.log", "ab")  # noqa: SIM115 (handed to the child)
    log.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%S')} start {argv!r}\n".encode())
    log.flush()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
            **_as_user(user),
        )
    except (OSError, KeyError) as exc:
        print(f"{name}: cannot start {argv[0]}: {exc}", file=sys.stderr)
        return 4
    finally:
        log.close()
    start_s = _starttime(proc.pid) or "0"
    _pidfile(d, name).write_text(f"{proc.pid} {start_s}\n")
    # a daemon that dies at once (bad flag, port taken) is reported now, not discovered later
    deadline = time.monotonic() + 0.4
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            print(
                f"{name}: exited at once with {proc.returncode}:\n" + "\n".join(_this_start(d, name)),
                file=sys.stderr,
            )
            return 5
        time.sleep(0.05)
    print(f"{name}: started pid {proc.pid}")
    return 0


def _this_start(d: Path, name: str, head: int = 5, tail: int = 10) -> list[str]:
    """What the process wrote since its last start: the first lines (where a bad flag or a missing file is
    usually named, before any usage text) and the last ones."""
    lines = (d / "logs" / f"{name}.log").read_text(errors="replace").splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("--- ") and " start " in ln]
    lines = lines[starts[-1] + 1 :] if starts else lines
    if len(lines) <= head + tail:
        return lines
    return [*lines[:head], f"... ({len(lines) - head - tail} lines)", *lines[-tail:]]


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid`, through /proc's parent links."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))):
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: set[int] = set()
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        if p not in found:
            found.add(p)
            todo.extend(children.get(p, []))
    return found


def _send(pid: int, sig: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        (os.killpg if group else os.kill)(pid, sig)


def _freeze_tree(pid: int) -> dict[int, str]:
    """SIGSTOPs the daemon and every descendant, again until no new one appears (a stopped process forks
    no more; one forked in the moment before is found in the next round). Returns {pid: starttime}."""
    _send(pid, signal.SIGSTOP, group=True)
    tree = {pid: _starttime(pid) or ""}
    for _ in range(20):
        new = _descendants(pid) - set(tree)
        if not new:
            break
        for p in new:
            _send(p, signal.SIGSTOP, group=False)
            tree[p] = _starttime(p) or ""
    return tree


def _signal(d: Path, name: str, sig: int, tree: bool = True) -> int | None:
    """`sig` to the daemon's process group and, with `tree`, to every descendant (SIGSTOP freezes the tree
    round by round, so nothing forked in between escapes). Returns the daemon's pid, None if not running."""
    pid = read_pid(d, name)
    if pid is None:
        return None
    if sig == signal.SIGSTOP and tree:
        _freeze_tree(pid)
        return pid
    _send(pid, sig, group=True)
    for p in _descendants(pid) if tree else ():
        _send(p, sig, group=False)
    return pid


def stop(d: Path, name: str, grace: float) -> int:
    pid = _signal(d, name, signal.SIGCONT)  # a paused daemon cannot handle SIGTERM
    if pid is None:
        print(f"{name}: not running")
        return 0
    _signal(d, name, signal.SIGTERM, tree=False)  # the daemon's own shutdown takes its children down
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if read_pid(d, name) is None:
            print(f"{name}: stopped")
            return 0
        time.sleep(0.05)
    return kill(d, name)


def kill(d: Path, name: str) -> int:
    """SIGKILL to the whole tree, frozen first, then waits until every process of it is gone: a fault that
    follows a kill (dropping unfsynced writes, a restart) must never meet a process still writing."""
    pid = read_pid(d, name)
    if pid is None:
        print(f"{name}: not running")
        return 0
    tree = _freeze_tree(pid)
    _send(pid, signal.SIGKILL, group=True)
    for p in tree:
        _send(p, signal.SIGKILL, group=False)
    deadline = time.monotonic() + 5
    left = dict(tree)
    while left and time.monotonic() < deadline:
        left = {p: s for p, s in left.items() if _alive(p, s)}
        if left:
            time.sleep(0.02)
    if left:
        print(f"{name}: killed, but {len(left)} of its processes are still alive after 5 s: {sorted(left)}")
        return 6
    print(f"{name}: killed")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m faultline.cluster.daemon", description=__doc__.splitlines()[0]
    )
    p.add_argument("action", choices=["start", "stop", "kill", "pause", "resume", "status"])
    p.add_argument("--dir", required=True, type=Path, help="state directory (logs/, run/)")
    p.add_argument("--name", action="append", default=[], help="daemon name (repeatable for status)")
    p.add_argument("--env", action="append", default=[], metavar="K=V")
    p.add_argument("--faketime", help="run under libfaketime with this offset file")
    p.add_argument("--cwd")
    p.add_argument("--prepare", metavar="JSON_ARGV", help="start: run this command first (JSON list), once")
    p.add_argument("--prepare-unless", metavar="PATH", help="start: skip --prepare when PATH exists")
    p.add_argument("--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL on stop")
    p.add_argument("--user", help="start: run the command as this user")
    p.epilog = "start: the command to run follows `--`"
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, cmd = argv[:cut], argv[cut + 1 :]
    a = p.parse_args(argv)
    a.argv = cmd
    names = a.name or []
    if a.action == "status":
        run_dir = a.dir / "run"
        if not names and run_dir.is_dir():
            names = sorted(f.stem for f in run_dir.glob("*.pid"))
        print(json.dumps({n: status(a.dir, n) for n in names}))
        return 0
    if len(names) != 1:
        p.error("exactly one --name")
    name = names[0]
    if a.action == "start":
        if not a.argv:
            p.error("start needs a command after --")
        env = dict(kv.split("=", 1) for kv in a.env)
        if (
            a.prepare
            and read_pid(a.dir, name) is None
            and not (a.prepare_unless and Path(a.prepare_unless).exists())
        ):
            prep = subprocess.run(
                json.loads(a.prepare),
                env={**os.environ, **env},
                capture_output=True,
                text=True,
                cwd=a.cwd,
                timeout=120,
            )
            if prep.returncode != 0:
                print(
                    f"{name}: prepare step failed ({prep.returncode}): {(prep.stderr or prep.stdout).strip()}",
                    file=sys.stderr,
                )
                return 9
        return start(a.dir, name, a.argv, env, a.faketime, a.cwd, a.user)
    if a.action == "stop":
        return stop(a.dir, name, a.grace)
    if a.action == "kill":
        return kill(a.dir, name)
    sig = signal.SIGSTOP if a.action == "pause" else signal.SIGCONT
    pid = _signal(a.dir, name, sig)
    print(f"{name}: {'not running' if pid is None else a.action + 'd'}")
    return 0 if pid is not None else 7


if __name__ == "__main__":
    sys.exit(main())
