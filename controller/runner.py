"""The runner: one test's lifecycle, workers, the generator interpreter, and the guarantee to heal.

Lifecycle: cluster up (or reuse) -> nemesis and client setup -> workers open clients -> the main phase
(client and nemesis generators for the time limit) -> the nemesis final generator and `heal` -> a quiet
period -> the workload's final phase (e.g. final reads) -> clients closed -> node logs collected ->
checkers -> results, plots and report in the store.

Whatever happens after the cluster is up (Ctrl-C, a crashed client, a crashed nemesis, a bug in a
generator), the `finally` path heals the cluster, keeps the history written so far, checks what it has
and marks the run as cut short. A second Ctrl-C abandons outstanding operations and the final phase and
skips the checkers, but still heals.
"""

from __future__ import annotations

import logging
import queue
import random
import signal
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultline import gen
from faultline.gen import NEMESIS, NS, Context, Pending
from faultline.controller.recorder import Recorder

log = logging.getLogger("faultline.runner")
Op = dict[str, Any]

# Keys of the test dict that hold live objects; everything else is plain data and goes to test.json.
RUNTIME_KEYS = frozenset({"backend", "remote", "connect", "recorder", "run_dir", "dns", "state"})


class CutShort(Exception):
    """Raised inside the interpreter when the run must stop early; the message says why."""


@dataclass
class Interrupts:
    """Counts Ctrl-C: the first asks for a clean stop, the second for an immediate one."""

    count: int = 0
    event: threading.Event = field(default_factory=threading.Event)

    def handler(self, signum: int, frame: Any) -> None:
        self.count += 1
        self.event.set()
        if self.count >= 3:
            raise KeyboardInterrupt  # a third Ctrl-C while healing: the user insists

    @property
    def stop(self) -> bool:
        return self.count >= 1

    @property
    def abort(self) -> bool:
        return self.count >= 2


@dataclass
class Outcome:
    """What a run ended with. `valid` is True / False / "unknown"."""

    valid: Any
    results: dict[str, Any]
    run_dir: Path | None
    cut_short: str | None
    ops: int


class Worker(threading.Thread):
    """One thread of the generator: runs its client (or the nemesis) on the ops it is handed."""

    def __init__(self, thread: Any, invoke: Callable[[Op], Op], completions: queue.Queue[Any],
                 reopen: Callable[[], None] | None = None) -> None:
        super().__init__(name=f"worker-{thread}", daemon=True)
        self.thread_id = thread
        self.invoke = invoke
        self.completions = completions
        self.inbox: queue.Queue[Op | None] = queue.Queue()
        self.reopen = reopen

    def run(self) -> None:
        while True:
            op = self.inbox.get()
            if op is None:
                return
            try:
                done = self.invoke(op)
                if not isinstance(done, dict) or done.get("type") not in ("ok", "fail", "info"):
                    raise TypeError(f"invoke returned {done!r}, not an op with type ok/fail/info")
                self.completions.put((self.thread_id, op, done, None))
            except BaseException as exc:  # a crash of the client or nemesis: reported, run cut short
                crash = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                log.error("thread %s crashed on %s: %s", self.thread_id, op.get("f"), traceback.format_exc())
                self.completions.put((self.thread_id, op, {**op, "type": "info", "error": crash}, crash))
                continue
            if done.get("type") == "info" and self.reopen is not None:
                try:
                    self.reopen()
                except Exception as exc:
                    log.warning("thread %s: reopening its client failed: %s", self.thread_id, exc)


def _strip(op: Op) -> Op:
    return {k: v for k, v in op.items() if k not in ("index", "time")}


class Interpreter:
    """Drives a generator against live workers with the real clock, recording every op."""

    def __init__(self, test: dict[str, Any], recorder: Recorder, workers: Mapping[Any, Worker],
                 completions: queue.Queue[Any], ctx: Context, interrupts: Interrupts,
                 on_nemesis: Callable[[Op], None] | None = None) -> None:
        self.test = test
        self.recorder = recorder
        self.workers = workers
        self.completions = completions
        self.ctx = ctx
        self.interrupts = interrupts
        self.outstanding: dict[Any, Op] = {}
        self.crash: str | None = None
        self.on_nemesis = on_nemesis

    def _complete(self, item: tuple[Any, Op, Op, str | None], g: gen.Gen | None) -> gen.Gen | None:
        thread, inv, done, crash = item
        out = {**_strip(done), "process": inv["process"], "f": done.get("f", inv["f"])}
        if "key" in inv:
            out.setdefault("key", inv["key"])
        rec = self.recorder.record(out)
        self.outstanding.pop(thread, None)
        self.ctx = self.ctx.at(self.recorder.now()).freed(thread)
        if g is not None:
            g = g.update(self.ctx, rec)
        if rec["type"] == "info" and isinstance(thread, int):
            self.ctx = self.ctx.with_retired(thread)
        if thread == NEMESIS and self.on_nemesis:
            self.on_nemesis(rec)
        if crash is not None and self.crash is None:
            who = "nemesis" if thread == NEMESIS else f"client (process {inv['process']})"
            self.crash = f"{who} crashed on {inv['f']}: {crash}"
        return g

    def drain(self, timeout_s: float) -> bool:
        """Waits (bounded) for outstanding ops; True if none is left."""
        deadline = time.monotonic() + timeout_s
        while self.outstanding and time.monotonic() < deadline and not self.interrupts.abort:
            try:
                item = self.completions.get(timeout=0.05)
            except queue.Empty:
                continue
            self._complete(item, None)
        return not self.outstanding

    def run(self, g: gen.Gen, phase: str, hard_limit_s: float) -> None:
        """Runs `g` until it is exhausted, the hard limit passes, or a stop is requested."""
        deadline = time.monotonic() + hard_limit_s
        while True:
            if self.interrupts.stop:
                raise CutShort("interrupted (Ctrl-C)")
            if self.crash:
                raise CutShort(self.crash)
            if time.monotonic() > deadline:
                raise CutShort(f"the {phase} phase overran its {hard_limit_s:.0f} s limit")
            # completions first: they free threads and may change what the generator wants
            try:
                while True:
                    g = self._complete(self.completions.get_nowait(), g)  # type: ignore[assignment]
            except queue.Empty:
                pass
            now = self.recorder.now()
            self.ctx = self.ctx.at(now)
            ans = g.op(self.ctx)
            if ans is None:
                if not self.outstanding:
                    return
                wait_ns: int | None = None
            else:
                o, g2 = ans
                if isinstance(o, Pending):
                    g = g2
                    wait_ns = None if o.until is None else max(0, o.until - now)
                elif o["time"] > now:
                    wait_ns = o["time"] - now  # not due yet: wait, then ask again (the answer may change)
                else:
                    thread = self.ctx.thread_of(o["process"])
                    if thread is None or thread not in self.ctx.free:
                        raise RuntimeError(f"generator produced an op for a busy or unknown process: {o}")
                    rec = self.recorder.record(_strip(o))
                    self.ctx = self.ctx.busy(thread)
                    g = g2.update(self.ctx, rec)
                    self.outstanding[thread] = rec
                    if thread == NEMESIS and self.on_nemesis:
                        self.on_nemesis(rec)
                    self.workers[thread].inbox.put(dict(rec))
                    continue
            timeout = 0.1 if wait_ns is None else min(0.1, wait_ns / NS)
            try:
                item = self.completions.get(timeout=max(0.0005, timeout))
            except queue.Empty:
                continue
            g = self._complete(item, g)  # type: ignore[assignment]


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
            self.active[f[len("start-"):]] = _short(op.get("value"))
        elif f.startswith("stop-"):
            self.active.pop(f[len("stop-"):], None)
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


def plain_test(test: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-able part of the test (what test.json holds)."""
    return {k: v for k, v in test.items() if k not in RUNTIME_KEYS}


def run_test(
    test: dict[str, Any],
    backend: Any,
    workload: Mapping[str, Any],
    nemesis_pkg: Mapping[str, Any],
    run_dir: Any | None,
    *,
    progress: Any | None = None,
    install_signals: bool = True,
) -> Outcome:
    """Runs one test end to end. `run_dir` is a results.store.RunDir (or None for a dry in-memory run)."""
    interrupts = Interrupts()
    old_handler = None
    if install_signals and threading.current_thread() is threading.main_thread():
        old_handler = signal.signal(signal.SIGINT, interrupts.handler)
    history_path = run_dir.history_path if run_dir is not None else None
    recorder = Recorder(history_path)
    test["recorder"] = recorder
    test["backend"] = backend
    test["remote"] = getattr(backend, "remote", None)
    test.setdefault("state", {})
    faults = FaultTracker()
    cut_short: str | None = None
    results: dict[str, Any] = {}
    workers: dict[Any, Worker] = {}
    clients: dict[int, Any] = {}
    nemesis = nemesis_pkg["nemesis"]
    cluster_up = False
    nemesis_ready = False
    completions: queue.Queue[Any] = queue.Queue()
    rng = random.Random(test["seed"])
    concurrency = int(test["concurrency"])
    interp: Interpreter | None = None
    log_handler = _attach_log(run_dir)
    try:
        _phase(progress, "cluster")
        if not test.get("reuse_cluster"):
            backend.up(test["cluster_spec"])
        cluster_up = True
        test["dns"] = dict(test.get("dns") or {})
        _phase(progress, "setup")
        nemesis = nemesis.setup(test) or nemesis
        nemesis_ready = True
        client_proto = workload["client"]
        setup = getattr(client_proto, "setup", None)
        if setup is not None:
            setup(test)
        nodes = [n for n in backend.nodes() if not n.startswith("m")] or list(backend.nodes())

        def opener(thread: int) -> Callable[[], Any]:
            def open_client() -> Any:
                old = clients.get(thread)
                if old is not None:
                    try:
                        old.close()
                    except Exception:
                        pass
                clients[thread] = client_proto.open(test, nodes[thread % len(nodes)])
                return clients[thread]
            return open_client

        for t in range(concurrency):
            reopen = opener(t)
            reopen()
            workers[t] = Worker(t, lambda op, t=t: clients[t].invoke(test, op), completions, reopen)
        workers[NEMESIS] = Worker(NEMESIS, lambda op: nemesis.invoke(test, op), completions)
        for w in workers.values():
            w.start()
        recorder.restart_clock()
        ctx = Context.initial(concurrency, rng, nemesis=True)
        interp = Interpreter(test, recorder, workers, completions, ctx, interrupts, on_nemesis=faults)
        if progress is not None:
            progress.attach(recorder, faults, test)
        limit = float(test["time_limit"])
        main = gen.any_of(
            gen.clients(gen.time_limit(limit, workload["generator"])),
            gen.nemesis(gen.time_limit(limit, nemesis_pkg.get("generator"))),
        )
        _phase(progress, "main")
        # a safety net only: a nemesis op in flight at the limit (a master replacement) may take minutes
        interp.run(main, "main", hard_limit_s=limit + float(test.get("op_timeout_s", 60)) + 600)
        _phase(progress, "heal")
        interp.run(gen.nemesis(nemesis_pkg.get("final_generator")), "heal", hard_limit_s=600)
        nemesis.heal(test)
        _phase(progress, "quiet")
        _sleep_interruptibly(float(test.get("quiet_period", 5)), interrupts)
        final = workload.get("final_generator")
        if final is not None:
            _phase(progress, "final")
            interp.run(gen.clients(final), "final", hard_limit_s=float(test.get("final_time_limit", 120)))
    except CutShort as exc:
        cut_short = str(exc)
    except BaseException as exc:  # a bug or a setup failure: record why, then still heal and check
        cut_short = f"{type(exc).__name__}: {exc}"
        log.error("run failed: %s", traceback.format_exc())
        if isinstance(exc, KeyboardInterrupt):
            interrupts.count = max(interrupts.count, 2)
    finally:
        _phase(progress, "healing")
        if interp is not None and not interrupts.abort:
            interp.drain(float(test.get("op_timeout_s", 60)) + 5)
        if nemesis_ready:
            _guard("nemesis heal", lambda: nemesis.heal(test))
        if cluster_up and hasattr(backend, "heal_network"):
            _guard("network heal", backend.heal_network)
        for w in workers.values():
            w.inbox.put(None)
        if not interrupts.abort:
            for c in clients.values():
                _guard("client close", c.close)
        if progress is not None:
            progress.stop()
        recorder.close()
    # Everything below works on what was recorded; it runs whether or not the run was cut short.
    try:
        if cut_short is None and interp is not None and interp.crash:
            cut_short = interp.crash
        if cluster_up and run_dir is not None and not interrupts.abort:
            _collect_logs(backend, run_dir)
        if interrupts.abort:
            results = {"valid": "unknown", "skipped": "aborted with a second Ctrl-C; run `faultline analyze`"}
        else:
            results = check(test, workload, recorder.ops)
        if cut_short:
            # The verdict stands for the history that was recorded; `cut_short` says it is partial.
            results["cut_short"] = cut_short
        results["faults"] = faults.count
        if cluster_up:
            # what the faults left behind after healing (rules, paused nodes, clock offsets): must be empty
            results["residue"] = _residue(backend)
        if run_dir is not None:
            write_outputs(run_dir, test, recorder.ops, results)
        if cluster_up and not test.get("leave_cluster_running") and not test.get("reuse_cluster"):
            _guard("cluster down", backend.down)
    finally:
        if old_handler is not None:
            signal.signal(signal.SIGINT, old_handler)
        _detach_log(log_handler)
    return Outcome(results.get("valid", "unknown"), results, getattr(run_dir, "path", None), cut_short,
                   len(recorder.ops))


def check(test: Mapping[str, Any], workload: Mapping[str, Any], history: list[Op]) -> dict[str, Any]:
    """The workload's checker decides the verdict; the generic ones (stats, availability) are evidence.

    Availability and op counts describe a run; they do not say whether the system was correct, so they
    never turn a verdict invalid. A run in which no client op succeeded proves nothing: "unknown".
    """
    from faultline.checkers.api import Compose

    opts = {"time_limit": float(test.get("check_time_limit", 120))}
    plain = plain_test(test)
    results = Compose({"workload": Guarded(workload["checker"])}).check(plain, history, opts)
    for name, c in _generic_checkers().items():
        results[name] = Guarded(c).check(plain, history, opts)
    if results.get("valid") is True and not any(o.get("type") == "ok" and o.get("process") != "nemesis"
                                                for o in history):
        results["valid"] = "unknown"
        results["note"] = "no client operation succeeded"
    return results


class Guarded:
    """A checker that crashes gives `unknown` with the error, so the other checkers' evidence survives."""

    def __init__(self, checker: Any) -> None:
        self.checker = checker

    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return self.checker.check(test, history, opts)
        except Exception as exc:
            log.error("checker %r crashed: %s", self.checker, traceback.format_exc())
            return {"valid": "unknown", "error": f"checker crashed: {type(exc).__name__}: {exc}"}


def _generic_checkers() -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        from faultline.checkers.stats import Stats

        out["stats"] = Stats()
    except ImportError:
        pass
    try:
        from faultline.checkers.availability import Availability

        out["availability"] = Availability()
    except ImportError:
        pass
    return out


def write_outputs(run_dir: Any, test: Mapping[str, Any], history: list[Op], results: dict[str, Any]) -> None:
    """Plots and timeline (where the checkers package offers them), then results and report via the store."""
    try:
        from faultline.checkers.perf import write_plots

        write_plots(history, run_dir.plots_dir, test=plain_test(test))
    except ImportError:
        pass
    except Exception as exc:
        log.warning("plots not written: %s", exc)
    try:
        from faultline.checkers.timeline import write_timeline

        write_timeline(history, run_dir.timeline_path, test=plain_test(test))
    except ImportError:
        pass
    except Exception as exc:
        log.warning("timeline not written: %s", exc)
    try:
        run_dir.finish(results)
    except ImportError as exc:  # the report module is optional in a partial installation
        log.warning("report not written: %s", exc)
        run_dir.finish(results, report=False)


def _collect_logs(backend: Any, run_dir: Any) -> None:
    if hasattr(backend, "collect"):  # the real backends copy each node's logs and data
        try:
            backend.collect(run_dir.nodes_dir)
            return
        except Exception as exc:
            log.warning("collecting node files failed: %s", exc)
    try:
        nodes = backend.nodes()
    except Exception as exc:
        log.warning("cannot list nodes for logs: %s", exc)
        return
    for node in nodes:
        try:
            text = backend.logs(node)
        except Exception as exc:
            text = f"(logs unavailable: {exc})\n"
        d = Path(run_dir.nodes_dir) / node
        d.mkdir(parents=True, exist_ok=True)
        (d / "node.log").write_text(text if isinstance(text, str) else str(text), encoding="utf-8")


def _residue(backend: Any) -> list[str] | str:
    """Partition rules, paused or stopped node processes and clock offsets left on the cluster."""
    try:
        if hasattr(backend, "residue"):
            return list(backend.residue())
        out: list[str] = []
        for n in backend.nodes():
            if hasattr(backend, "_blocked") and backend._blocked(n):
                out.append(f"{n}: partition rules against {sorted(backend._blocked(n))}")
            if hasattr(backend, "daemon_status"):
                status = backend.daemon_status(n)
                if status != "running":
                    out.append(f"{n}: node process {status}")
            if hasattr(backend, "node_dir"):
                rc, text, _ = backend.remote.exec(n, ["cat", f"{backend.node_dir(n)}/faketime"], 10)
                if rc == 0 and text.strip() and float(text.strip() or 0) != 0:
                    out.append(f"{n}: clock offset {text.strip()}")
        return out
    except Exception as exc:
        return f"could not verify: {type(exc).__name__}: {exc}"


def _guard(what: str, fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception as exc:
        log.error("%s failed: %s", what, traceback.format_exc())
        print(f"faultline run: warning: {what} failed: {exc}", flush=True)


def _sleep_interruptibly(seconds: float, interrupts: Interrupts) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if interrupts.stop:
            raise CutShort("interrupted (Ctrl-C)")
        interrupts.event.wait(min(0.1, max(0.0, deadline - time.monotonic())))


def _phase(progress: Any, name: str) -> None:
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


def run_once(test: dict[str, Any], store_root: str | Path, *, quiet: bool = True,
             install_signals: bool = True) -> Outcome:
    """Builds backend, workload and nemesis for a validated test (controller.testspec.build_test), creates
    the run directory in the store and runs it. The entry point for campaigns and the pytest plugin."""
    from faultline.controller import testspec
    from faultline.nemesis.registry import compose
    from faultline.results.store import Store
    from faultline.workloads.registry import get as get_workload

    test = testspec.stamp(test)
    backend = testspec.make_backend(test)
    workload = get_workload(test["workload"], test.get("workload_opts") or {})
    nemesis_pkg = compose(test["nemesis"], float(test["nemesis_interval"]))
    test["connect"] = testspec.connector(test, backend)
    run_dir = Store(store_root).create_run(test["name"], plain_test(test))
    progress = None
    if not quiet:
        from faultline.controller.progress import Progress

        progress = Progress(float(test["time_limit"]))
    return run_test(test, backend, workload, nemesis_pkg, run_dir, progress=progress,
                    install_signals=install_signals)


def reanalyze(run_path: str | Path) -> dict[str, Any]:
    """Re-runs the workload's checkers on a stored run (also one that was cut short) and rewrites its
    results, plots and report. Returns the new results."""
    from faultline.checkers.history import read_jsonl
    from faultline.results.store import open_run
    from faultline.workloads.registry import get as get_workload

    run = open_run(run_path)
    test = run.load_test()
    history = read_jsonl(run.history_path) if Path(run.history_path).exists() else []
    workload = get_workload(test["workload"], test.get("workload_opts") or {})
    results = check(test, workload, history)
    old = run.load_results() or {}
    if old.get("cut_short"):
        results["cut_short"] = old["cut_short"]
    elif not old:
        results["cut_short"] = "the run did not finish (it had no results before this analysis)"
    results["reanalyzed"] = True
    write_outputs(run, test, history, results)
    return results
