"""The runner: one test's lifecycle and the guarantee to heal. The generator interpreter it drives is in
controller/interpreter.py; checking and publishing the history is controller/analysis.py.

Lifecycle, a method of `RunPhases` each: `up` (the cluster up, or reused) -> `setup` (the DB, the nemesis
and the clients; workers open clients) -> `main` (client and nemesis generators for the time limit) ->
`heal` (the nemesis final generator and `heal`: network, processes, clocks, flags, crash points; never
data) -> `repair` (the nemesis repair generator: an operator's repairs, each an op recorded with its
reason) -> `quiet` (a quiet period) -> `final` (the workload's final phase, e.g. final reads) -> clients
closed -> `analyze` (node logs collected, checkers, results, plots and report in the store).

Whatever happens after the cluster is up (a stop signal, a crashed client, a crashed nemesis, a bug in a
generator), the `finally` path lets the fault in flight finish, heals the cluster, keeps the history
written so far, checks what it has and marks the run as cut short. SIGINT, SIGTERM and SIGHUP count
alike: a second one abandons outstanding operations and the final phase and skips the checkers, but still
heals and tears down; a third gives up healing, and results.json names what was not healed. A user's
mistake that only the running cluster shows (a UsageError raised at setup: a file glob that matches no
file) takes the same path, then is raised again once the cluster is down: the CLI prints its one line and
exits 254.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import queue
import random
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faultline import gen
from faultline.controller.analysis import NodeLogCheck, check, node_log_check, write_outputs
from faultline.controller.interpreter import STOP_SIGNALS, CutShort, Interpreter, Interrupts, Worker
from faultline.controller.recorder import Recorder
from faultline.core import Op, Run, TestSpec
from faultline.core.errors import UsageError
from faultline.gen import NEMESIS, Context
from faultline.nemesis.api import NemesisPackage
from faultline.workloads.api import Workload

log = logging.getLogger("faultline.runner")


@dataclass
class Outcome:
    """What a run ended with. `valid` is True / False / "unknown"."""

    valid: Any
    results: dict[str, Any]
    run_dir: Path | None
    cut_short: str | None
    ops: int


class FaultTracker:
    """The faults currently active, from the nemesis ops seen (for progress and the summary)."""

    def __init__(self) -> None:
        self.active: dict[str, str] = {}
        self.in_flight: str | None = None
        self.count = 0

    def __call__(self, op: Op) -> None:
        f = str(op.get("f", ""))
        if op["type"] == "invoke":
            self.in_flight = f
            return
        self.in_flight = None
        if op["type"] != "ok" and not f.startswith("stop-"):
            return
        if f.startswith("start-"):
            self.count += 1
            self.active[f[len("start-") :]] = _short(op.get("value"))
        elif f.startswith("stop-"):
            self.active.pop(f[len("stop-") :], None)
        elif f in ("heal", "heal-all"):
            self.active.clear()

    def describe(self) -> str:
        parts = [f"{k} {v}".strip() for k, v in sorted(self.active.items())]
        if self.in_flight and not self.in_flight.startswith(("start-", "stop-")):
            parts.append(f"{self.in_flight}…")
        return ", ".join(parts) or "none"


def _short(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, dict):  # the nemesis completions: say what was hit, briefly
        if v.get("groups"):
            return f"{v.get('shape', '')} " + "|".join(",".join(g) for g in v["groups"])
        if v.get("nodes"):
            return ",".join(map(str, v["nodes"]))
        if v.get("offsets"):
            return " ".join(f"{n}{o:+.1f}s" for n, o in v["offsets"].items())
    s = v if isinstance(v, str) else str(v)
    return s if len(s) <= 40 else s[:37] + "…"


def run_test(
    test: Run,
    workload: Workload,
    nemesis_pkg: NemesisPackage,
    run_dir: Any | None,
    *,
    progress: Any | None = None,
    install_signals: bool = True,
) -> Outcome:
    """Runs one test end to end: `test` is its spec with the live handles (controller.testspec.start_run),
    `run_dir` a results.store.RunDir (or None for a dry in-memory run)."""
    return RunPhases(test, workload, nemesis_pkg, run_dir, progress, install_signals).run()


class RunPhases:
    """One run, a method per phase: `up`, `setup`, `main`, `heal`, `repair`, `quiet`, `final` while the
    cluster runs the test (`_run_and_heal`, whose one `finally` heals), then `analyze` on what was
    recorded. What the phases learn (the cluster is up, the nemesis is set up, the clients, why the run
    was cut short) are fields, read by the heal and the analysis whichever phase the run stopped in."""

    def __init__(
        self,
        test: Run,
        workload: Workload,
        nemesis_pkg: NemesisPackage,
        run_dir: Any | None,
        progress: Any | None,
        install_signals: bool,
    ) -> None:
        self.test, self.spec, self.backend = test, test.spec, test.backend
        self.workload, self.nemesis_pkg = workload, nemesis_pkg
        self.run_dir, self.progress, self.install_signals = run_dir, progress, install_signals
        self.interrupts = Interrupts()
        self.old_handlers: dict[int, Any] = {}
        self.recorder = Recorder(run_dir.history_path if run_dir is not None else None)
        test.recorder = self.recorder
        self.faults = FaultTracker()
        self.cut_short: str | None = None
        # a user's mistake found once the cluster is up (raised after teardown)
        self.refused: UsageError | None = None
        self.results: dict[str, Any] = {}
        self.not_healed: list[str] = []
        self.workers: dict[Any, Worker] = {}
        self.clients: dict[int, Any] = {}
        self.client_proto: Any = None
        self.client_nodes: list[str] = []
        self.nemesis = nemesis_pkg.nemesis
        self.cluster_up = False
        self.nemesis_ready = False
        self.completions: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.interp: Interpreter | None = None

    def run(self) -> Outcome:
        if self.install_signals and threading.current_thread() is threading.main_thread():
            self.old_handlers = {sig: signal.signal(sig, self.interrupts.handler) for sig in STOP_SIGNALS}
        log_handler = _attach_log(self.run_dir)
        try:
            self._run_and_heal()
            # Everything below works on what was recorded; it runs whether or not the run was cut short.
            self.analyze()
        finally:
            if self.progress is not None:
                self.progress.stop()
            for sig, handler in self.old_handlers.items():
                signal.signal(sig, handler)
            _detach_log(log_handler)
        if self.refused is not None:
            # healed, recorded and torn down above: the CLI prints its one line and exits 254
            raise self.refused
        return Outcome(
            self.results.get("valid", "unknown"),
            self.results,
            getattr(self.run_dir, "path", None),
            self.cut_short,
            len(self.recorder.ops),
        )

    def _run_and_heal(self) -> None:
        """The phases on the cluster; whatever stops them, the cluster is healed (the one `finally`)."""
        try:
            self.up()
            self.setup()
            self.main()
            self.heal()
            self.repair()
            self.quiet()
            self.final()
        except CutShort as exc:
            self.cut_short = str(exc)
        except BaseException as exc:  # a bug or a setup failure: record why, then still heal and check
            self._failed(exc)
        finally:
            self._stop_and_heal()

    def _phase(self, name: str) -> None:
        _phase(self.progress, name, self.recorder)

    # ------------------------------------------------------------------ the phases on the cluster
    def up(self) -> None:
        self._phase("cluster")
        if not self.spec.reuse_cluster:
            self.backend.up(self.spec.cluster_spec)
        self.cluster_up = True

    def setup(self) -> None:
        """The DB, the nemesis and the clients set up; a worker per client thread and one for the nemesis."""
        test = self.test
        self._phase("setup")
        setup_db(test)
        self.nemesis = self.nemesis.setup(test) or self.nemesis
        self.nemesis_ready = True
        self.client_proto = client_for(test, self.workload)
        self.client_proto.setup(test)
        self.client_nodes = test.db.client_nodes(test)
        self._start_workers()
        self.recorder.restart_clock()
        ctx = Context.initial(self.spec.concurrency, random.Random(self.spec.seed), nemesis=True)
        self.interp = Interpreter(
            self.recorder, self.workers, self.completions, ctx, self.interrupts, on_nemesis=self.faults
        )
        if self.progress is not None:
            self.progress.attach(self.recorder, self.faults)

    def _start_workers(self) -> None:
        test, nemesis = self.test, self.nemesis
        for t in range(self.spec.concurrency):
            self._open_client(t)
            self.workers[t] = Worker(
                t,
                functools.partial(self._invoke, t),
                self.completions,
                functools.partial(self._open_client, t),
            )
        self.workers[NEMESIS] = Worker(NEMESIS, lambda op: nemesis.invoke(test, op), self.completions)
        for w in self.workers.values():
            w.start()

    def _open_client(self, thread: int) -> Any:
        """A client for a worker thread (again after a crashed one: the old one is closed first)."""
        old = self.clients.get(thread)
        if old is not None:
            try:
                old.close()
            except Exception:
                pass
        nodes = self.client_nodes
        self.clients[thread] = self.client_proto.open(self.test, nodes[thread % len(nodes)])
        return self.clients[thread]

    def _invoke(self, thread: int, op: Op) -> Op:
        return self.clients[thread].invoke(self.test, op)

    def _interp(self) -> Interpreter:
        assert self.interp is not None  # made by `setup`, before any phase that runs generators
        return self.interp

    def main(self) -> None:
        """The client and nemesis generators for the time limit."""
        limit = self.spec.time_limit
        main = gen.any_of(
            gen.clients(gen.time_limit(limit, self.workload.generator)),
            gen.nemesis(gen.time_limit(limit, self.nemesis_pkg.generator)),
        )
        self._phase("main")
        # a safety net only: a nemesis op in flight at the limit (a master replacement) may take minutes
        self._interp().run(main, "main", hard_limit_s=limit + self.spec.op_timeout_s + 600)

    def heal(self) -> None:
        """The nemesis's final generator, then its heal."""
        self._phase("heal")
        self._interp().run(gen.nemesis(self.nemesis_pkg.final_generator), "heal", hard_limit_s=600)
        self.nemesis.heal(self.test)

    def repair(self) -> None:
        """An operator's repairs (the nemesis's repair generator), each an op recorded with its reason."""
        if self.nemesis_pkg.repair_generator is not None:
            self._phase("repair")
            self._interp().run(gen.nemesis(self.nemesis_pkg.repair_generator), "repair", hard_limit_s=900)

    def quiet(self) -> None:
        """The settling time before the final reads."""
        if self.spec.quiet_period > 0:
            self._phase("quiet")
            _sleep_interruptibly(self.spec.quiet_period, self.interrupts)

    def final(self) -> None:
        """The workload's final phase (e.g. final reads)."""
        final = self.workload.final_generator
        if final is not None:
            self._phase("final")
            self._interp().run(gen.clients(final), "final", hard_limit_s=self.spec.final_time_limit)

    def _failed(self, exc: BaseException) -> None:
        """Why a phase raised, as the run's `cut_short`."""
        self.cut_short = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, UsageError) and self.interp is None:
            # a user's mistake found at setup (a nemesis option that matches no file): the run is refused
            self.refused, self.cut_short = exc, f"refused: {exc}"
        log.error("run failed: %s", self.cut_short if self.refused else traceback.format_exc())
        if isinstance(exc, KeyboardInterrupt):
            self.interrupts.count = max(self.interrupts.count, 2)
            self.cut_short = self.interrupts.why()

    def _stop_and_heal(self) -> None:
        self._phase("healing")
        self.not_healed = _stop_and_heal(
            self.test,
            self.nemesis if self.nemesis_ready else None,
            self.interp,
            self.workers,
            self.interrupts,
            self.cluster_up,
        )
        if not self.interrupts.abort:
            for c in self.clients.values():
                _guard("client close", c.close)
        self.recorder.close()

    # ------------------------------------------------------------------ after the run
    def analyze(self) -> None:
        """Node logs collected, the checkers' verdict, results, plots and report written; the cluster
        goes down meanwhile."""
        interp, interrupts, run_dir = self.interp, self.interrupts, self.run_dir
        if self.cut_short is None and interp is not None and interp.crash:
            self.cut_short = interp.crash
        if self.cluster_up and run_dir is not None and not interrupts.abort:
            _collect_logs(self.backend, run_dir)
        _phase(self.progress, "checking")
        logs = node_log_check(self.test.db, run_dir.nodes_dir) if run_dir is not None else None
        results = _check_unless_aborted(self.spec, self.workload, self.recorder.ops, interrupts, logs)
        self.results = results
        if interrupts.stop and (self.cut_short is None or self.cut_short.startswith("interrupted")):
            self.cut_short = interrupts.why()  # with the count of signals, not only the first
        if self.not_healed:
            results["not_healed"] = self.not_healed
        if self.cut_short:
            # The verdict stands for the history that was recorded; `cut_short` says it is partial.
            results["cut_short"] = self.cut_short
        results["faults"] = self.faults.count
        if self.cluster_up:
            # what the faults left behind after healing (rules, paused nodes, clock offsets): must be empty
            results["residue"] = _residue(self.backend)
        self._write_while_tearing_down()

    def _write_while_tearing_down(self) -> None:
        spec, backend = self.spec, self.backend
        teardown = None
        if self.cluster_up and not spec.leave_cluster_running and not spec.reuse_cluster:
            # the cluster is no longer needed: it goes down while the plots and pages are drawn (mostly
            # Docker's time against mostly ours, so the two overlap on two cores)
            teardown = threading.Thread(target=_guard, args=("cluster down", backend.down), name="teardown")
            teardown.start()
        try:
            if self.run_dir is not None:
                _phase(self.progress, "writing")
                write_outputs(self.run_dir, spec, self.recorder.ops, self.results)
        finally:
            if teardown is not None:
                _phase(self.progress, "teardown")
                teardown.join()


def _stop_and_heal(
    test: Run,
    nemesis: Any,
    interp: Interpreter | None,
    workers: dict[Any, Worker],
    interrupts: Interrupts,
    cluster_up: bool,
) -> list[str]:
    """Stops the workers, lets the fault in flight finish, then heals; returns the heal steps skipped.

    The heal must come after the last fault: a pause or a strobe still being applied when the heal runs
    would land after it. So the nemesis worker is told to stop and joined first (bounded; not at all once
    the user gives up); if it is still busy, the heal runs anyway and runs again when the fault
    completes. Every heal is idempotent. After a third stop signal the remaining steps are skipped and
    named, so the run says what was not healed."""
    spec = test.spec
    if interp is not None and not interrupts.abort:
        interp.drain(spec.op_timeout_s + 5)
    for w in workers.values():
        w.inbox.put(None)
    fault_worker = workers.get(NEMESIS)
    _join(fault_worker, 10.0 if interrupts.abort else spec.op_timeout_s + 60, interrupts)
    skipped: list[str] = []

    def heal_all() -> None:
        if nemesis is not None:
            _step("nemesis heal", lambda: nemesis.heal(test), interrupts, skipped)
        if cluster_up:
            _step("network heal", test.backend.heal_network, interrupts, skipped)

    heal_all()
    if fault_worker is not None and fault_worker.is_alive():
        log.warning("a fault was still being applied at the heal; healing again once it completes")
        _join(fault_worker, 120.0, interrupts)
        if not fault_worker.is_alive():
            skipped.clear()
            heal_all()
        else:
            skipped.append("a fault still being applied after the heal")
    return skipped


def _join(worker: Worker | None, timeout_s: float, interrupts: Interrupts) -> None:
    """Waits for a worker thread to finish, bounded, and not once the user gives up."""
    if worker is None or not worker.is_alive():
        return
    deadline = time.monotonic() + timeout_s
    while worker.is_alive() and time.monotonic() < deadline and not interrupts.give_up:
        worker.join(0.1)


def _step(what: str, fn: Callable[[], Any], interrupts: Interrupts, skipped: list[str]) -> None:
    """One heal step: skipped (and named) once the user gave up, or when it failed."""
    if interrupts.give_up or not _guard(what, fn):
        skipped.append(what)


def _check_unless_aborted(
    spec: TestSpec,
    workload: Workload,
    ops: list[Op],
    interrupts: Interrupts,
    logs: NodeLogCheck | None = None,
) -> dict[str, Any]:
    """The checkers' verdict; after a second stop signal none is computed (`faultline analyze` can), and a
    third one during the check stops it."""
    if interrupts.abort:
        return {
            "valid": "unknown",
            "skipped": f"{interrupts.why()}: checking skipped; run `faultline analyze`",
        }
    interrupts.interruptible = True
    try:
        return check(spec, workload, ops, logs)
    except KeyboardInterrupt:
        return {
            "valid": "unknown",
            "skipped": f"{interrupts.why()}: checking stopped; run `faultline analyze`",
        }
    finally:
        interrupts.interruptible = False


def setup_db(test: Run) -> None:
    """The DB's setup on every node at once (each waits until its node serves); every failure is named."""
    from concurrent.futures import ThreadPoolExecutor

    nodes = list(test.backend.nodes())
    if not nodes:
        return
    errors: list[str] = []

    def one(node: str) -> None:
        try:
            test.db.setup(test, node)
        except Exception as exc:
            errors.append(str(exc))

    with ThreadPoolExecutor(max_workers=min(8, len(nodes))) as pool:
        list(pool.map(one, nodes))
    if errors:
        raise DBSetupFailed("\n".join(sorted(errors)))


class DBSetupFailed(RuntimeError):
    """The DB did not come up on some node; the message holds each node's error and log tail."""


def client_for(test: Run, workload: Workload) -> Any:
    """The DB's client for the workload, else the workload's own client (the key-value API through the DB's
    connector)."""
    own = getattr(test.db, "client", None)
    client = own(test.spec.workload) if callable(own) else None
    return client if client is not None else workload.client


def _collect_logs(backend: Any, run_dir: Any) -> None:
    """Each node's logs and data, copied into the run directory's nodes/."""
    try:
        backend.collect(run_dir.nodes_dir)
    except Exception as exc:
        log.warning("collecting node files failed: %s", exc)


def _residue(backend: Any) -> list[str] | str:
    """Partition rules, paused or stopped node processes and clock offsets left on the cluster."""
    try:
        return list(backend.residue())
    except Exception as exc:
        return f"could not verify: {type(exc).__name__}: {exc}"


def _guard(what: str, fn: Callable[[], Any]) -> bool:
    """Runs one step of the stop path; a failure, even an interrupt, is reported and the path goes on
    (it must reach teardown). True when the step succeeded."""
    try:
        fn()
        return True
    except BaseException as exc:
        log.error("%s failed: %s", what, traceback.format_exc())
        print(f"faultline run: warning: {what} failed: {exc}", flush=True)
        return False


def _sleep_interruptibly(seconds: float, interrupts: Interrupts) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if interrupts.stop:
            raise CutShort(interrupts.why())
        interrupts.event.wait(min(0.1, max(0.0, deadline - time.monotonic())))


def _phase(progress: Any, name: str, recorder: Recorder | None = None) -> None:
    """A new phase begins: the history of the one before is fsynced (it survives a host crash)."""
    if recorder is not None:
        recorder.sync()
    log.info("phase: %s", name)
    if progress is not None:
        progress.phase(name)


def _attach_log(run_dir: Any) -> logging.Handler | None:
    if run_dir is None:
        return None
    handler = logging.FileHandler(Path(run_dir.path) / "faultline.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(threadName)s: %(message)s"))
    root = logging.getLogger("faultline")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return handler


def _detach_log(handler: logging.Handler | None) -> None:
    if handler is not None:
        logging.getLogger("faultline").removeHandler(handler)
        handler.close()


def run_once(
    spec: TestSpec, store_root: str | Path, *, quiet: bool = True, install_signals: bool = True
) -> Outcome:
    """Builds backend, workload and nemesis for a validated test (controller.testspec.build_test), creates
    the run directory in the store and runs it. The entry point for campaigns and the pytest plugin."""
    from faultline.controller import testspec
    from faultline.nemesis.registry import compose
    from faultline.results.store import Store
    from faultline.workloads.registry import get as get_workload

    spec = testspec.stamp(spec)
    test = testspec.start_run(spec)
    workload = get_workload(spec.workload, test.db, spec.workload_opts)
    nemesis_pkg = compose(list(spec.nemesis), test.db, spec.nemesis_interval)
    if workload.final_generator is None and spec.quiet_period:
        # the quiet period is the settling before the final reads: a workload with none would only idle
        # through it, and test.json says it had none (the availability checker reads it)
        spec = test.spec = dataclasses.replace(spec, quiet_period=0.0)
    run_dir = Store(store_root).create_run(spec.name, spec.to_json())
    progress = None
    if not quiet:
        from faultline.controller.progress import Progress

        progress = Progress(spec.time_limit)
    return run_test(test, workload, nemesis_pkg, run_dir, progress=progress, install_signals=install_signals)
