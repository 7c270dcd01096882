"""PostgreSQL 15 (Debian's postgresql-15) as a DB: a single primary `p1`, spoken to with psycopg 3.

The connection speaks the store's client API (get, put, cas, scan, create_table, batch, generate) over
one table per workload, so the bundled register, set, bank, counter and unique-ids workloads run
unchanged; each statement is its own transaction (autocommit), a batch one transaction, all at the run's
isolation level (`--isolation`, default serializable). A single primary is linearizable for these
operations. It runs as the `postgres` user (it refuses root): the daemon manager drops to it just before
exec, and libfaketime, which moves its clock for clock faults, starts as that user (started as root, it
makes a semaphore the postgres user cannot open, and postgres fails). Every backend calls setsid(), so pause and kill reach them through the daemon manager's walk of the
postmaster's descendants (cluster/daemon.py), not through its process group.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from faultline.cluster.base import ClusterSpec, RoleSpec
from faultline.core import Op, Run
from faultline.db.api import FILE_CORRUPTION_FAULTS, LogPattern
from faultline.db.process import Definite, Indeterminate, ProcessDB, common_notes, supported_nemeses
from faultline.dbs.sql import (
    ISOLATION,
    PARTITION_NOTES,
    PARTITIONS,
    OneSQLServer,
    SQLTxnClient,
    ident,
    isolation,
    validate_isolation,
)
from faultline.workloads.common import ApplyOrComplete

ROLE = "postgres"
PORT = 5432
BIN = "/usr/lib/postgresql/15/bin"
USER = "postgres"
# initdb once, trusting connections from the cluster's network and the host (a test cluster, no secrets)
_INITDB = (
    'set -e; d="$1/pgdata"; mkdir -p "$d"; chown postgres:postgres "$d"; chmod 700 "$d"; '
    f'setpriv --reuid={USER} --regid={USER} --init-groups -- {BIN}/initdb -D "$d" -U postgres --auth=trust '
    "--no-sync >/dev/null; "
    'echo "host all all 0.0.0.0/0 trust" >> "$d/pg_hba.conf"'
)


def connect(host: str, timeout_s: float, autocommit: bool, isolation: str | None = None) -> Any:
    """A psycopg connection to the server on `host`, its statements bounded by the op timeout, its
    transactions at `isolation` (one of ISOLATION; None: the server's default, read committed)."""
    import psycopg

    options = f"-c statement_timeout={int(timeout_s * 1000)}"
    if isolation:
        options += f" -c default_transaction_isolation={isolation.replace('-', '_')}"
    return psycopg.connect(
        host=host,
        port=PORT,
        user=USER,
        dbname="postgres",
        autocommit=autocommit,
        connect_timeout=max(1, int(timeout_s)),
        options=options,
    )


class PostgresConnection:
    """One psycopg connection (autocommit), reconnected after an error, with the store's client API over
    tables of (k text primary key, v bigint)."""

    def __init__(self, host: str, timeout_s: float, isolation: str | None = None) -> None:
        self.host, self.timeout, self.isolation = host, timeout_s, isolation
        self.conn: Any = None
        self.sequences = False  # made the sequence generate uses

    def execute(self, sql: str, args: tuple[Any, ...] = (), fetch: bool = False) -> Any:
        """One statement (its own transaction): the rows with `fetch`, else the row count."""
        import psycopg

        self._connect()
        try:
            cur = self.conn.execute(sql, args)
            return cur.fetchall() if fetch else cur.rowcount
        except psycopg.errors.SerializationFailure as exc:
            raise Definite(f"postgres: {exc}") from None
        except psycopg.Error as exc:
            self.close()
            if isinstance(exc, psycopg.errors.DuplicateTable | psycopg.errors.UniqueViolation):
                raise Definite(f"postgres: already exists: {exc}") from None
            raise Indeterminate(f"postgres: {type(exc).__name__}: {exc}") from None

    def _connect(self) -> None:
        """Connects if not connected; a connection refused or timed out sent no statement: Definite."""
        import psycopg

        if self.conn is None:
            try:
                self.conn = connect(self.host, self.timeout, autocommit=True, isolation=self.isolation)
            except psycopg.Error as exc:
                raise Definite(f"postgres: cannot connect: {type(exc).__name__}: {exc}") from None

    def create_table(self, name: str, **_: Any) -> None:
        self.execute(f'CREATE TABLE IF NOT EXISTS "{ident(name)}" (k text PRIMARY KEY, v bigint)')

    def get(self, table: str, key: Any, timeout: float | None = None) -> Any:
        rows = self.execute(f'SELECT v FROM "{ident(table)}" WHERE k = %s', (str(key),), fetch=True)
        return rows[0][0] if rows else None

    def put(self, table: str, key: Any, value: Any, timeout: float | None = None) -> None:
        self.execute(
            f'INSERT INTO "{ident(table)}" (k, v) VALUES (%s, %s) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v',
            (str(key), int(value)),
        )

    def cas(self, table: str, key: Any, expected: Any, new: Any, timeout: float | None = None) -> bool:
        n = self.execute(
            f'UPDATE "{ident(table)}" SET v = %s WHERE k = %s AND v = %s', (int(new), str(key), int(expected))
        )
        return bool(n == 1)

    def batch(
        self, table: str, rows: list[tuple[Any, ...]], timeout: float | None = None
    ) -> list[tuple[bool, None]]:
        """Rows `("put", key, value)` and `("cas", key, expected, new)` in one transaction: all apply, or
        none does (a cas that finds another value rolls it back). (applied, None) per row. An error before
        COMMIT was sent is definite (the transaction aborted); one during COMMIT is not."""
        import psycopg

        t = ident(table)
        committing = False
        self._connect()
        try:
            with self.conn.transaction() as tx:
                applied = all(self._row(t, r) for r in rows)
                if not applied:
                    raise psycopg.Rollback(tx)
                committing = True
            return [(applied, None) for _ in rows]
        except psycopg.Error as exc:
            self.close()
            if committing and not isinstance(exc, psycopg.errors.SerializationFailure):
                raise Indeterminate(f"postgres: commit: {type(exc).__name__}: {exc}") from None
            raise Definite(f"postgres: aborted: {type(exc).__name__}: {exc}") from None

    def _row(self, t: str, row: tuple[Any, ...]) -> bool:
        """One row of a batch inside its transaction: a put always applies; a cas when the value matches."""
        if row[0] == "put":
            self.conn.execute(
                f'INSERT INTO "{t}" (k, v) VALUES (%s, %s) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v',
                (str(row[1]), int(row[2])),
            )
            return True
        _, key, expected, new = row
        cur = self.conn.execute(
            f'UPDATE "{t}" SET v = %s WHERE k = %s AND v = %s', (int(new), str(key), int(expected))
        )
        return bool(cur.rowcount == 1)

    def generate(self, table: str, timeout: float | None = None) -> int:
        """The next value of the table's sequence (made on first use): never the same twice."""
        seq = ident(f"{table}_seq")
        if not self.sequences:  # a concurrent CREATE may fail (definite): this generate is then `fail`
            self.execute(f'CREATE SEQUENCE IF NOT EXISTS "{seq}"')
            self.sequences = True
        return int(self.execute(f"SELECT nextval('\"{seq}\"')", fetch=True)[0][0])

    def scan(self, table: str, timeout: float | None = None) -> list[tuple[str, Any]]:
        return [(k, v) for k, v in self.execute(f'SELECT k, v FROM "{ident(table)}"', fetch=True)]

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            finally:
                self.conn = None


# PostgreSQL's synchronous_commit values that matter on a single server (docs/disk.md)
SYNC_COMMIT = ("on", "off", "local")


def _create_table(test: Run, table: str, columns: str) -> None:
    """A workload's table, made once at setup on the one server (`table` already an identifier)."""
    conn = PostgresConnection(test.backend.address(test.backend.nodes()[0]), float(test.spec.setup_timeout_s))
    try:
        conn.execute(f'CREATE TABLE IF NOT EXISTS "{table}" ({columns})')
    except Definite:
        pass  # made by a concurrent setup
    finally:
        conn.close()


class PostgresTxnClient(SQLTxnClient):
    """Transactions of micro-ops at the run's isolation level (`--isolation`, default serializable), as
    Jepsen's PostgreSQL tests run them: a key is a row; long-fork's micro-ops are rw-register's;
    list-append appends with `UPDATE ... SET v = v ||`
    and inserts the row when it is missing; rw-register writes by upsert; reads select the row.

    A transaction PostgreSQL aborted (a serialization failure, a deadlock, a duplicate insert, a statement
    timeout, a connection lost before COMMIT) is `fail`: nothing of it happened. Only a COMMIT whose answer
    never came is `info` (dbs/sql.py)."""

    def setup(self, test: Run) -> None:
        column = "bigint[]" if self.kind == "list-append" else "bigint"
        _create_table(test, self._table(test), f"k bigint PRIMARY KEY, v {column}")

    def connect(self, test: Run) -> Any:
        import psycopg

        conn = connect(
            test.backend.address(test.backend.nodes()[0]), float(test.spec.op_timeout_s), autocommit=False
        )
        conn.isolation_level = psycopg.IsolationLevel[isolation(test).replace("-", "_").upper()]
        return conn

    def driver_errors(self) -> tuple[type[BaseException], ...]:
        import psycopg

        return (psycopg.Error,)

    def aborted(self, exc: BaseException) -> bool:
        import psycopg

        return isinstance(
            exc,
            psycopg.errors.SerializationFailure
            | psycopg.errors.DeadlockDetected
            | psycopg.errors.UniqueViolation
            | psycopg.errors.QueryCanceled,
        )

    def mop(self, mop: list[Any]) -> list[Any]:
        f, k, v = mop
        t = ident(self.table)
        if f == "r":
            row = self.conn.execute(f'SELECT v FROM "{t}" WHERE k = %s', (k,)).fetchone()
            if self.kind == "list-append":
                return [f, k, list(row[0]) if row and row[0] is not None else []]
            return [f, k, row[0] if row else None]
        if f == "append":
            if self.conn.execute(f'UPDATE "{t}" SET v = v || %s::bigint WHERE k = %s', (v, k)).rowcount == 0:
                self.conn.execute(f'INSERT INTO "{t}" (k, v) VALUES (%s, ARRAY[%s::bigint])', (k, v))
            return mop
        if f == "w":
            self.conn.execute(
                f'INSERT INTO "{t}" (k, v) VALUES (%s, %s) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v',
                (k, v),
            )
            return mop
        raise ValueError(f"{self.kind}: unknown micro-op {f!r}")


def _taken(queue_table: str) -> str:
    """The table where a queue's dequeues record what they took, by token (PostgresQueueClient)."""
    return ident(queue_table + "_taken")


class PostgresQueueClient(ApplyOrComplete):
    """A queue in one table (id bigserial, v bigint), each statement its own transaction: enqueue inserts a
    row; dequeue deletes the oldest row no other transaction has locked (`FOR UPDATE SKIP LOCKED`, so
    concurrent dequeues never wait on each other) and returns it; drain deletes every row in one statement.
    An error from a statement that may have committed is `info`, except a dequeue's: each dequeue also
    records what it took under a token of its own (table `<queue>_taken`, in the same statement), so after
    an error the client looks the token up once the server answers again (up to RESOLVE_S: a killed
    server stays down until the nemesis restarts it). Found, the dequeue committed and took that element
    (`ok`); not found, it stays `info`, since a transaction cut off from its client may still be running.
    Without this, a kill on a dequeue's commit leaves an element a correct PostgreSQL did dequeue looking
    lost, and the checker can only say unknown."""

    RESOLVE_S = 30.0

    def __init__(self, conn: PostgresConnection | None = None, table: str = "") -> None:
        self.conn, self.table = conn, table

    def _table(self, test: Run) -> str:
        from faultline.workloads.common import run_name

        return ident(run_name(test, "queue"))

    def setup(self, test: Run) -> None:
        _create_table(test, self._table(test), "id bigserial PRIMARY KEY, v bigint")
        _create_table(test, _taken(self._table(test)), "token text PRIMARY KEY, v bigint")

    def open(self, test: Run, node: str) -> PostgresQueueClient:
        conn = PostgresConnection(
            test.backend.address(test.backend.nodes()[0]), float(test.spec.op_timeout_s), isolation(test)
        )
        return PostgresQueueClient(conn, self._table(test))

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def _apply(self, op: Op) -> Op:
        assert self.conn is not None
        t = self.table
        if op["f"] == "enqueue":
            self.conn.execute(f'INSERT INTO "{t}" (v) VALUES (%s)', (int(op["value"]),))
            return {**op, "type": "ok"}
        if op["f"] == "dequeue":
            token = uuid.uuid4().hex
            try:
                rows = self.conn.execute(
                    f'WITH d AS (DELETE FROM "{t}" WHERE id = (SELECT id FROM "{t}" ORDER BY id FOR UPDATE SKIP '
                    f'LOCKED LIMIT 1) RETURNING v) INSERT INTO "{_taken(t)}" (token, v) SELECT %s, v FROM d RETURNING v',
                    (token,),
                    fetch=True,
                )
            except Indeterminate:
                taken = self._taken_by(token)
                if taken is None:
                    raise
                return {**op, "type": "ok", "value": taken}
            if not rows:
                return {**op, "type": "fail", "error": "empty"}
            return {**op, "type": "ok", "value": int(rows[0][0])}
        if op["f"] == "drain":
            rows = self.conn.execute(f'DELETE FROM "{t}" RETURNING v', fetch=True)
            return {**op, "type": "ok", "value": sorted(int(r[0]) for r in rows)}
        raise ValueError(f"queue: unknown op {op['f']!r}")

    def _taken_by(self, token: str) -> int | None:
        """The element the dequeue with `token` took, if it committed; None when the lookup finds no row or
        the server does not answer within RESOLVE_S."""
        assert self.conn is not None
        deadline = time.monotonic() + self.RESOLVE_S
        while time.monotonic() < deadline:
            try:
                rows = self.conn.execute(
                    f'SELECT v FROM "{_taken(self.table)}" WHERE token = %s', (token,), fetch=True
                )
            except (Definite, Indeterminate):
                time.sleep(0.2)
                continue
            return int(rows[0][0]) if rows else None
        return None


# The server logs to stderr as "<time> <zone> [<pid>] <LEVEL>:  <message>" (PostgreSQL 15's default
# log_line_prefix '%m [%p] '). PANIC stops every session and the postmaster; a backend that dies of a
# signal is reported by the postmaster as "... (PID n) was terminated by signal N: <name>"; a page whose
# header or checksum is damaged is "invalid page in block N of relation PATH" (ERRCODE_DATA_CORRUPTED).
LOG_PATTERNS = [
    LogPattern("panic", r"\bPANIC:\s", "PostgreSQL panicked (a PANIC stops the whole server)"),
    LogPattern(
        "backend-crash",
        r"was terminated by signal \d+: (?:Segmentation fault|Aborted|Bus error|"
        r"Illegal instruction|Floating point exception)",
        "a server process crashed",
    ),
    LogPattern(
        "invalid-page",
        r"invalid page in block \d+ of relation",
        "PostgreSQL read a damaged data page",
        expected_under=FILE_CORRUPTION_FAULTS,
    ),
]


class PostgresDB(OneSQLServer, ProcessDB):
    """One PostgreSQL 15 server, p1."""

    connection = PostgresConnection
    name = "postgres"
    workloads = frozenset(
        {
            "register",
            "set",
            "list-append",
            "rw-register",
            "queue",
            "bank",
            "counter",
            "unique-ids",
            "long-fork",
        }
    )
    options = {
        "isolation": f"the transactions' isolation level: {', '.join(ISOLATION)} (default serializable)",
        "synchronous_commit": f"{', '.join(SYNC_COMMIT)} (default on); with off a commit is acknowledged "
        "before its WAL is flushed, and a crash may lose it",
    }
    nemeses = supported_nemeses(clock=True) - set(PARTITIONS) | FILE_CORRUPTION_FAULTS
    nemesis_notes = {**common_notes(None), **PARTITION_NOTES}
    packages = ("postgresql-15",)
    data_dirs = {ROLE: ("{dir}/pgdata",)}
    data_files = {ROLE: ("{dir}/pgdata/pg_wal/0000*", "{dir}/pgdata/base/*/[0-9]*")}

    def log_patterns(self) -> list[LogPattern]:
        return list(LOG_PATTERNS)

    def validate(self, opts: Mapping[str, Any]) -> None:
        validate_isolation(opts)
        sync = opts.get("synchronous_commit", "on")
        if sync not in SYNC_COMMIT:
            raise ValueError(f"synchronous_commit must be one of {', '.join(SYNC_COMMIT)}, not {sync!r}")

    def client(self, workload: str) -> Any:
        """Transactions and queues need their own client; register and set use the bundled ones over
        `connector`."""
        if workload == "queue":
            return PostgresQueueClient()
        return (
            PostgresTxnClient(workload) if workload in ("list-append", "rw-register", "long-fork") else None
        )

    def cluster_spec(self, name: str, opts: Mapping[str, Any]) -> ClusterSpec:
        self.validate(opts)
        role = RoleSpec(
            ROLE,
            1,
            "p",
            PORT,
            argv=[
                f"{BIN}/postgres",
                "-D",
                "{dir}/pgdata",
                "-c",
                "listen_addresses=*",
                "-c",
                "unix_socket_directories=/tmp",
                "-c",
                "fsync=on",
                "-c",
                f"synchronous_commit={opts.get('synchronous_commit', 'on')}",
            ],
            prepare=["sh", "-c", _INITDB, "sh", "{dir}"],
            prepare_unless="{dir}/pgdata/PG_VERSION",
            user=USER,
        )
        return ClusterSpec.from_mapping(
            {
                "name": name,
                "roles": [role],
                "packages": list(self.packages),
                "db": self.name,
                "faketime": bool(opts.get("clock")),
            }
        )
