"""What the SQL DBs (PostgreSQL, MariaDB) share: the isolation levels a run names, the table names the
workloads make, and the transaction client whose micro-ops each DB writes in its own dialect.

The client's rule for a failed transaction is the same on every SQL DB: one the DB aborted (a
serialization failure, a deadlock, a lock wait timeout, a duplicate key) or one whose COMMIT was never
sent is `fail`, because nothing of it happened; only a COMMIT whose answer never came is `info`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from faultline.core import Op, Run

ISOLATION = ("read-committed", "repeatable-read", "serializable")

# the partition faults, which a DB of one SQL server does not offer: it has no peers to be cut off from
PARTITIONS = (
    "partition",
    *(f"partition-{k}" for k in ("one", "halves", "majority", "ring", "bridge", "primary")),
)
PARTITION_NOTES = {p: "a single-node DB has no peers to be cut off from" for p in PARTITIONS}


def isolation(test: Run) -> str:
    """The run's isolation level (`--isolation`, default serializable)."""
    return str(test.spec.db_opts.get("isolation", "serializable"))


def validate_isolation(opts: Mapping[str, Any]) -> None:
    """Refuses an isolation level no SQL DB here runs (ValueError, one line)."""
    level = opts.get("isolation", "serializable")
    if level not in ISOLATION:
        raise ValueError(f"isolation must be one of {', '.join(ISOLATION)}, not {level!r}")


def ident(name: str) -> str:
    """A table name the workloads make (letters, digits, '-', '_'), refused otherwise: never spliced raw
    into SQL."""
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"not a table name: {name!r}")
    return name


def drop_connection(holder: Any) -> None:
    """Closes `holder.conn` and forgets it; a driver that refuses to close a connection it already dropped
    after an error (PyMySQL does) has nothing left to close."""
    if holder.conn is not None:
        try:
            holder.conn.close()
        except Exception:
            pass
        finally:
            holder.conn = None


class OneSQLServer:
    """A DB of one SQL server (PostgreSQL's p1, MariaDB's m1): ready when it answers `SELECT 1`, that server
    the primary, and the bundled workloads' connections opened to it at the run's isolation level. Mixed
    in before ProcessDB; `connection(host, timeout_s, isolation=None)` is the DB's store-API connection."""

    connection: Callable[..., Any]

    def ready(self, test: Run, node: str) -> bool:
        conn = self.connection(test.backend.address(node), 2.0)
        try:
            return bool(conn.execute("SELECT 1", fetch=True) == [(1,)])
        finally:
            conn.close()

    def primaries(self, test: Run) -> list[str]:
        return test.backend.nodes()[:1]

    def connector(self, test: Run) -> Callable[[], Any]:
        timeout, level, make = float(test.spec.op_timeout_s), isolation(test), type(self).connection
        return lambda: make(test.backend.address(test.backend.nodes()[0]), timeout, level)


class SQLTxnClient:
    """Transactions of micro-ops (list-append, rw-register, long-fork) at the run's isolation level, one
    connection per worker, reconnected after an error. A subclass says how to connect, how to run one
    micro-op in its dialect, which driver errors there are and which of them prove an abort."""

    def __init__(self, kind: str, conn: Any = None, table: str = "") -> None:
        self.kind, self.conn, self.table = kind, conn, table

    def _table(self, test: Run) -> str:
        """This run's table for the workload (the run tag keeps runs on a reused cluster apart)."""
        tag = test.spec.run_tag
        return ident(f"txn_{self.kind.replace('-', '_')}{'_' + tag if tag else ''}")

    def open(self, test: Run, node: str) -> SQLTxnClient:
        return type(self)(self.kind, None, self._table(test))

    def close(self) -> None:
        drop_connection(self)

    def connect(self, test: Run) -> Any:
        """A connection whose transactions run at the run's isolation level, autocommit off."""
        raise NotImplementedError

    def mop(self, mop: list[Any]) -> list[Any]:
        """One micro-op inside the open transaction, completed (a read gets its value)."""
        raise NotImplementedError

    def driver_errors(self) -> tuple[type[BaseException], ...]:
        """The driver's error classes: anything else is a bug in the client and propagates."""
        raise NotImplementedError

    def aborted(self, exc: BaseException) -> bool:
        """True when the error proves the DB rolled the transaction back, even one raised by COMMIT."""
        raise NotImplementedError

    def invoke(self, test: Run, op: Op) -> Op:
        from faultline.core import ops

        committing = False
        try:
            if self.conn is None:
                self.conn = self.connect(test)
            done = [self.mop(m) for m in op["value"]]
            committing = True
            self.conn.commit()
            return {**op, "type": "ok", "value": done}
        except self.driver_errors() as exc:
            aborted = self.aborted(exc)
            self.close()  # a transaction left open is rolled back when its connection closes
            return ops.completion(op, exc, read_only=False, definite=aborted or not committing)
