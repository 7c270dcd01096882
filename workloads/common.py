"""What the workloads' key-value clients share: connecting through the DB's connector, and turning errors
into completions by faultline.core.ops's rule.

The clients speak a small key-value API (get, put, cas, scan, batch, create_table) that the store's client
library has and that a DB's connector may offer (etcd's and PostgreSQL's do). Only errors that say so
explicitly (a `definite` attribute) are definite; anything unknown on a write is `info`, because calling a
maybe-applied write `fail` makes the checkers report anomalies that did not happen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from faultline import gen
from faultline.core import Op, Run, ops


def is_definite(exc: BaseException) -> bool:
    """True when the error says it proves the operation did not take effect (a `definite` attribute: the
    store's Unavailable, NotFound, AlreadyExists and InvalidArgument errors, db.process.Definite); an error
    marked `indeterminate`, a timeout, or anything unknown on a write is indeterminate."""
    if isinstance(exc, TimeoutError) or getattr(exc, "indeterminate", False):
        return False
    return bool(getattr(exc, "definite", False))


def completion(op: Op, exc: BaseException, *, read_only: bool) -> Op:
    """The completion of `op` that failed with `exc` (faultline.core.ops's rule, with errors that say they
    are definite)."""
    return ops.completion(op, exc, read_only=read_only, definite=is_definite(exc))


def at_rate(g: gen.Gen, opts: Mapping[str, Any]) -> gen.Gen:
    """`g` staggered to the `rate` option (ops per second across all workers), when one is given."""
    return gen.stagger(1.0 / float(opts["rate"]), g) if opts.get("rate") else g


def run_name(test: Run, name: str) -> str:
    """`name` qualified by the run's tag (set by controller.testspec.stamp), if any."""
    tag = test.spec.run_tag
    return f"{name}-{tag}" if tag else name


def connect(test: Run) -> Any:
    """A node client for this test: the runner puts a `connect` callable in the test."""
    factory: Callable[[], Any] | None = test.connect
    if factory is None:
        raise RuntimeError("the test has no `connect` (the runner sets it from the cluster backend)")
    return factory()


class LazyChecker:
    """A checker named in checkers.registry, built when it is used (analysis may run without a cluster,
    and listing workloads should not import every checker)."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        self.name, self.kwargs = name, kwargs

    def build(self) -> Any:
        from faultline.checkers import registry

        return registry.get(self.name, **self.kwargs)

    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        return self.build().check(test, history, opts)

    def __repr__(self) -> str:
        return f"{self.name}({self.kwargs})"


class ApplyOrComplete:
    """Mixin for a client whose `_apply(op)` returns the completed op or raises: the raised error becomes
    the op's completion (a write's: in doubt unless the error says it is definite)."""

    def _apply(self, op: Op) -> Op:
        raise NotImplementedError

    def invoke(self, test: Run, op: Op) -> Op:
        try:
            return self._apply(op)
        except Exception as exc:
            return completion(op, exc, read_only=False)


class KVClient:
    """Base of the row-based workload clients: one node client per worker, a table, and error mapping."""

    table = "faultline"
    read_fs: frozenset[str] = frozenset({"read"})

    def __init__(self, conn: Any = None) -> None:
        self.conn = conn

    def setup(self, test: Run) -> None:
        """Nothing to prepare by default; workloads that need a table make it here."""

    def open(self, test: Run, node: str) -> KVClient:
        return type(self)(connect(test))

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def invoke(self, test: Run, op: Op) -> Op:
        try:
            return self.apply(test, op)
        except Exception as exc:
            return completion(op, exc, read_only=op["f"] in self.read_fs)

    def apply(self, test: Run, op: Op) -> Op:
        raise NotImplementedError

    def tbl(self, test: Run) -> str:
        """This run's table: the run tag keeps runs on a reused cluster from seeing each other's rows."""
        return run_name(test, self.table)

    def setup_write(self, test: Run, write: Callable[[Any], Any]) -> None:
        """Runs `write(conn)` once the table exists, trying again through any error until the setup timeout
        (then the last error is raised). Only for idempotent writes at setup: nothing else runs yet, so a
        write in doubt is simply tried again."""
        import time

        conn = connect(test)
        deadline = time.monotonic() + float(test.spec.setup_timeout_s)
        try:
            while True:
                try:
                    write(conn)
                    return
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        finally:
            conn.close()

    def ensure_table(self, test: Run, **kwargs: Any) -> None:
        """Creates the workload's table once, retrying through transient errors (bounded)."""
        import time

        state = test.state
        if isinstance(state, dict):
            # the nemeses aim leader-isolating faults at the tablets the workload uses
            tables = state.setdefault("tables", [])
            if self.tbl(test) not in tables:
                tables.append(self.tbl(test))
        conn = connect(test)
        deadline = time.monotonic() + float(test.spec.setup_timeout_s)
        last: BaseException | None = None
        try:
            while time.monotonic() < deadline:
                try:
                    conn.create_table(self.tbl(test), **kwargs)
                    return
                except Exception as exc:
                    if "exist" in str(exc).lower() or "already" in type(exc).__name__.lower():
                        return
                    last = exc
                    time.sleep(0.5)
        finally:
            conn.close()
        raise RuntimeError(f"could not create table {self.tbl(test)}: {last}")


class TableClient(KVClient):
    """A row-based client whose whole setup is making its table."""

    def setup(self, test: Run) -> None:
        self.ensure_table(test)


class DBClientOnly:
    """The client of a workload only a DB's own client can run (transactions, queues, locks): a DB with
    no client for it never gets this far (workloads.registry.validate refuses the pairing)."""

    def __init__(self, what: str) -> None:
        self.what = what

    def setup(self, test: Run) -> None:
        raise RuntimeError(f"the {test.db.name} DB has no client for {self.what}")

    def open(self, test: Run, node: str) -> DBClientOnly:
        return self

    def invoke(self, test: Run, op: Op) -> Op:
        return {**op, "type": "fail", "error": f"no client for {self.what}"}

    def close(self) -> None:
        pass
