"""The harness under fault injection: `faultline run` interrupted at every phase, on Docker.

Twenty seeded cases send SIGTERM, SIGINT once, twice or three times, or SIGKILL, at a phase of a run of
etcd under partitions, kills, pauses and packet faults: while the cluster comes up, during setup, while
each kind of fault is being applied, during the heal, the final reads, and the end (checking and
teardown). After each one:

- no container or network of the run is left (a per-run cluster is always torn down; after SIGKILL,
  which cannot heal, `faultline cluster down` cleans up, and one case shows `--all` does);
- where the cluster was asked to stay up (`--leave-cluster-running`), nothing is left of any fault: no
  paused or stopped process, no rule, no qdisc, no clock offset (the backend's residue check);
- the history, if the run got as far as writing one, is one `faultline analyze` can read, and a run that
  was cut short says so (exit 2 from `run`, never a traceback).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Where to interrupt: a phase the run announces on stderr, or a fault of that kind being applied.
PHASES = (
    "cluster",
    "setup",
    "fault:start-partition",
    "fault:start-kill",
    "fault:start-pause",
    "fault:start-packet",
    "heal",
    "final",
    "healing",
)
PLANS = (("SIGTERM",), ("SIGINT",), ("SIGINT", "SIGINT"), ("SIGINT", "SIGINT", "SIGINT"), ("SIGKILL",))


@dataclass(frozen=True)
class Case:
    seed: int
    phase: str
    plan: tuple[str, ...]
    leave_running: bool
    nemesis: str = "partition,kill,pause,packet"

    @property
    def id(self) -> str:
        return f"{self.seed:02d}-{self.phase.removeprefix('fault:')}-{'+'.join(self.plan)}"


def cases(n: int = 20) -> list[Case]:
    """Every phase at least twice, every signal plan at least three times, in a fixed order."""
    out = []
    for i in range(n):
        plan = PLANS[(i * 3) % len(PLANS)]  # each pass over the phases pairs them with other plans
        out.append(
            Case(i + 1, PHASES[i % len(PHASES)], plan, leave_running=i % 3 == 1 and plan != ("SIGKILL",))
        )
    return out


class Watched:
    """A `faultline run` subprocess whose stderr lines are collected as they come."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[str] = []
        self.out = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip())

    def saw_phase(self, phase: str) -> bool:
        return any(ln.startswith(f"faultline run: {phase}") for ln in self.lines)


class NemesisWatch:
    """Follows the run's history as it grows (reading only what is new) and says whether the last nemesis
    entry is the invocation of a fault: that fault is being applied."""

    def __init__(self, store: Path) -> None:
        self.store, self.offset, self.last = store, 0, None

    def in_flight(self, f: str) -> bool:
        found = list(self.store.glob("*/2*/history.jsonl"))
        if not found:
            return False
        with found[0].open("rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.splitlines():
            if b'"nemesis"' in line:
                self.last = json.loads(line)
        return self.last is not None and self.last["type"] == "invoke" and self.last["f"] == f


def wait_for(pred: Callable[[], bool], timeout_s: float, step_s: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step_s)
    return False


def cluster_objects(name: str) -> list[str]:
    import docker

    from faultline.cluster.docker_backend import labelled_containers

    client = docker.from_env()
    label = f"org.faultline.cluster={name}"
    return [c.name for c in labelled_containers(client, label)] + [
        n.name for n in client.networks.list(filters={"label": label})
    ]


def faultline(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "faultline", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def residue_of(name: str) -> list[str]:
    from faultline.cluster.docker_backend import DockerBackend

    return list(DockerBackend.attach(name).residue())


def interrupt(case: Case, tmp: Path, clean_with_all: bool) -> list[str]:
    """Runs one case; returns the problems found (empty: the guarantee held)."""
    name = f"flint-{uuid.uuid4().hex[:6]}"
    store = tmp / case.id
    argv = [
        sys.executable,
        "-m",
        "faultline",
        "run",
        "--db",
        "etcd",
        "--workload",
        "set",
        "--nemesis",
        case.nemesis,
        "--nemesis-interval",
        "1",
        "--time-limit",
        "8",
        "--seed",
        str(case.seed),
        "--cluster-name",
        name,
        "--store",
        str(store),
    ]
    if case.leave_running:
        argv.append("--leave-cluster-running")
    run = Watched(argv)
    problems: list[str] = []
    try:
        if case.phase.startswith("fault:"):
            f = case.phase.removeprefix("fault:")
            watch = NemesisWatch(store)
            # a fault applied between two looks is missed; the heal right after it is the next best moment
            reached = wait_for(lambda: watch.in_flight(f) or run.saw_phase("heal"), 150)
        else:
            reached = wait_for(lambda: run.saw_phase(case.phase), 120)
        if not reached or run.proc.poll() is not None:
            problems.append(f"never reached {case.phase} (exit {run.proc.poll()}): {run.lines[-5:]}")
        for i, sig in enumerate(case.plan):
            if i:
                time.sleep(0.3)
            if run.proc.poll() is None:
                run.proc.send_signal(getattr(signal, sig))
        code = run.proc.wait(timeout=600)
        if "Traceback" in "\n".join(run.lines):
            problems.append("a traceback on stderr: " + " | ".join(run.lines[-8:]))
        killed = case.plan == ("SIGKILL",)
        if not killed and code not in (0, 1, 2):
            problems.append(f"exit {code}")
        if case.leave_running and not killed and case.plan != ("SIGINT",) * 3 and cluster_objects(name):
            left = residue_of(name)
            if left:
                problems.append(f"residue on a cluster left running: {left}")
        if killed or case.leave_running:
            # `--all` removes every Faultline cluster: shown once, when no one else's cluster is up
            every = clean_with_all and not other_clusters(name)
            down = faultline("cluster", "down", *(["--all"] if every else ["--name", name]))
            if down.returncode != 0 and "is up" not in down.stderr:  # nothing left to remove is fine
                problems.append(f"cluster down failed: {down.stderr.strip()[-300:]}")
        left = cluster_objects(name)
        if left:
            problems.append(f"left on Docker: {left}")
        layers = disk_layers_of(name)
        if layers:
            problems.append(f"disk layers left: {layers}")
        for hist in store.glob("*/2*/history.jsonl"):
            ana = faultline("analyze", str(hist.parent), timeout=300)
            if ana.returncode not in (0, 1, 2) or "Traceback" in ana.stderr:
                problems.append(f"analyze exit {ana.returncode}: {ana.stderr.strip()[-300:]}")
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
        faultline("cluster", "down", "--name", name)
    return problems


def disk_layers_of(name: str) -> list[str]:
    """The run's disk layer mounts, processes and folders still on this machine."""
    from faultline.cluster import disklayer

    root = disklayer.layer_root("docker", name)
    return (
        [m for m in disklayer.leftovers() if str(root) in m]
        + disklayer.residue("docker", name)
        + ([str(root)] if root.exists() else [])
    )


def other_clusters(name: str) -> set[str]:
    """Faultline clusters on Docker other than `name` (`down --all` would remove them too)."""
    import docker

    from faultline.cluster.docker_backend import labelled_containers

    found = {
        c.labels.get("org.faultline.cluster", "")
        for c in labelled_containers(docker.from_env(), "org.faultline.cluster")
    }
    return found - {name, ""}


@pytest.mark.docker
@pytest.mark.timeout(2400)
def test_interruptions_at_every_phase_leave_nothing_behind(tmp_path: Path) -> None:
    all_cases = cases(int(os.environ.get("FAULTLINE_INTERRUPTIONS", "20")))
    last_kill = max(i for i, c in enumerate(all_cases) if c.plan == ("SIGKILL",))
    # The cases are independent runs on clusters of their own, mostly waiting on Docker and on their
    # phases: a few at a time. The case that shows `down --all` runs last and alone (with another
    # cluster up, `--all` would remove it too, so it would fall back to `--name`).
    alone = all_cases[last_kill]
    with ThreadPoolExecutor(int(os.environ.get("FAULTLINE_INTERRUPTIONS_AT_ONCE", "3"))) as pool:
        found = dict(
            zip(
                [c.id for c in all_cases if c is not alone],
                pool.map(
                    lambda c: interrupt(c, tmp_path, clean_with_all=False),
                    [c for c in all_cases if c is not alone],
                ),
                strict=True,
            )
        )
    found[alone.id] = interrupt(alone, tmp_path, clean_with_all=True)
    failures = {case: problems for case, problems in found.items() if problems}
    assert not failures, json.dumps(failures, indent=1)


# A run with a disk fault: its disk layers (mounted on the host before the containers exist) are gone
# after a SIGKILL while the layer drops writes (then `cluster down`) and after SIGINT while the cluster
# comes up.
DISK_CASES = [
    Case(31, "fault:lose-unfsynced", ("SIGKILL",), False, "lose-unfsynced,kill"),
    Case(32, "cluster", ("SIGINT",), False, "lose-unfsynced"),
]


@pytest.mark.docker
@pytest.mark.root
@pytest.mark.timeout(900)
@pytest.mark.parametrize("case", DISK_CASES, ids=[c.id for c in DISK_CASES])
def test_interrupted_runs_with_disk_faults_leave_no_disk_layer(tmp_path: Path, case: Case) -> None:
    problems = interrupt(case, tmp_path, clean_with_all=False)
    assert not problems, problems


def test_the_cases_cover_every_phase_and_signal_plan() -> None:
    all_cases = cases()
    assert len(all_cases) >= 20
    assert {c.phase for c in all_cases} == set(PHASES) and {c.plan for c in all_cases} == set(PLANS)
    assert all(sum(c.phase == p for c in all_cases) >= 2 for p in PHASES)
    assert any(c.leave_running for c in all_cases)
