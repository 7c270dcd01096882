"""MariaDB 10.11 (Debian bookworm's mariadb-server) as a DB: one server `m1`, spoken to with PyMySQL.

The connection speaks the store's client API (get, put, cas, scan, create_table, batch) over one table
per workload in the database `faultline`, so the bundled register, set and bank workloads run unchanged:
each statement is its own transaction (autocommit), a batch one transaction. list-append, rw-register
and long-fork run as transactions at the run's isolation level (`--isolation`, default serializable).
InnoDB's levels differ from PostgreSQL's: at SERIALIZABLE a plain SELECT inside a transaction takes a
shared lock (LOCK IN SHARE MODE), so conflicting transactions deadlock and one is rolled back; REPEATABLE
READ reads from a snapshot but writes act on the latest committed version, so two transactions that read
the same version may both update it (a lost update): it is not snapshot isolation.

mariadbd runs as the `mysql` user (the daemon manager drops to it just before exec), in one process
group, so kill and pause reach it. The data directory is made once (mariadb-install-db) in the prepare
step; every start runs an init file that lets `root` in from any host without a password (a test
cluster, no secrets) and makes the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faultline.cluster.base import ClusterSpec, RoleSpec
from faultline.core import Run
from faultline.db.api import FILE_CORRUPTION_FAULTS, LogPattern
from faultline.db.process import DISK_NEMESES, PROCESS_NEMESES, Definite, Indeterminate, ProcessDB
from faultline.dbs.sql import (
    ISOLATION,
    PARTITION_NOTES,
    PARTITIONS,
    OneSQLServer,
    SQLTxnClient,
    drop_connection,
    ident,
    isolation,
    validate_isolation,
)

ROLE = "mariadb"
PORT = 3306
USER = "mysql"
DATABASE = "faultline"
# the data directory, made once; the init file runs at every start, before the server takes connections
_PREPARE = (
    'set -e; d="$1/mysql"; mkdir -p "$d"; chown mysql:mysql "$d"; '
    'mariadb-install-db --no-defaults --datadir="$d" --user=mysql --skip-test-db --skip-name-resolve >/dev/null; '
    f"printf '%s\\n' 'CREATE DATABASE IF NOT EXISTS {DATABASE};' \"CREATE USER IF NOT EXISTS 'root'@'%';\" "
    '"GRANT ALL ON *.* TO \'root\'@\'%\' WITH GRANT OPTION;" > "$1/init.sql"; chown mysql:mysql "$1/init.sql"'
)

# MariaDB's error numbers (include/mysqld_error.h, errmsg.h) that classify a failed statement
ER_DUP_ENTRY = 1062
ER_TABLE_EXISTS = 1050
ER_LOCK_WAIT_TIMEOUT = (
    1205  # the statement waited innodb_lock_wait_timeout for a row lock and was rolled back
)
ER_LOCK_DEADLOCK = 1213  # InnoDB rolled the whole transaction back (SQLSTATE 40001)
ER_CHECKREAD = 1020  # "Record has changed since last read": the snapshot-isolation conflict of 11.8+
# a transaction that failed with one of these was rolled back by the server: nothing of it happened
ABORTED = frozenset({ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT, ER_CHECKREAD, ER_DUP_ENTRY})

# the values of MariaDB 10.11's tx_isolation (transaction_isolation came in 11.1)
LEVELS = {
    "serializable": "SERIALIZABLE",
    "repeatable-read": "REPEATABLE-READ",
    "read-committed": "READ-COMMITTED",
}


def errno(exc: BaseException) -> int | None:
    """The server's or the client library's error number of a PyMySQL error, None for anything else."""
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def aborted(exc: BaseException) -> bool:
    """True when the error proves the server rolled the statement or transaction back."""
    return errno(exc) in ABORTED


def session_sql(level: str | None, timeout_s: float) -> str:
    """What each connection runs first: its transactions' isolation level, and row-lock waits shorter
    than the op timeout, so a lock wait ends in a definite ER_LOCK_WAIT_TIMEOUT rather than a client
    timeout whose outcome is unknown."""
    wait = max(1, int(timeout_s) - 2)
    sql = f"SET SESSION innodb_lock_wait_timeout = {wait}"
    if level:
        sql += f", SESSION tx_isolation = '{LEVELS[level]}'"
    return sql


def connect(host: str, timeout_s: float, autocommit: bool, level: str | None = None) -> Any:
    """A PyMySQL connection to the server on `host` as root, each read and write bounded by the op
    timeout; UPDATE counts the rows it matched, not those it changed (a cas to the same value applied)."""
    import pymysql
    from pymysql.constants import CLIENT

    t = max(1, int(timeout_s))
    return pymysql.connect(
        host=host,
        port=PORT,
        user="root",
        password="",
        database=DATABASE,
        autocommit=autocommit,
        connect_timeout=t,
        read_timeout=t,
        write_timeout=t,
        client_flag=CLIENT.FOUND_ROWS,
        init_command=session_sql(level, timeout_s),
    )


class MariaDBConnection:
    """One PyMySQL connection (autocommit), reconnected after an error, with the store's client API over
    tables of (k varchar primary key, v bigint)."""

    def __init__(self, host: str, timeout_s: float, level: str | None = None) -> None:
        self.host, self.timeout, self.level = host, timeout_s, level
        self.conn: Any = None

    def _connect(self) -> None:
        """Connects if not connected; a connection that failed sent no statement: Definite."""
        import pymysql

        if self.conn is None:
            try:
                self.conn = connect(self.host, self.timeout, autocommit=True, level=self.level)
            except pymysql.Error as exc:
                raise Definite(f"mariadb: cannot connect: {type(exc).__name__}: {exc}") from None

    def execute(self, sql: str, args: tuple[Any, ...] = (), fetch: bool = False) -> Any:
        """One statement (its own transaction): the rows with `fetch`, else the matched row count."""
        import pymysql

        self._connect()
        try:
            with self.conn.cursor() as cur:
                n = cur.execute(sql, args)
                return list(cur.fetchall()) if fetch else n
        except pymysql.Error as exc:
            self.close()
            if aborted(exc) or errno(exc) == ER_TABLE_EXISTS:
                raise Definite(f"mariadb: {exc}") from None
            raise Indeterminate(f"mariadb: {type(exc).__name__}: {exc}") from None

    def create_table(self, name: str, **_: Any) -> None:
        self.execute(
            f"CREATE TABLE IF NOT EXISTS `{ident(name)}` (k varchar(255) PRIMARY KEY, v bigint) ENGINE=InnoDB"
        )

    def get(self, table: str, key: Any, timeout: float | None = None) -> Any:
        rows = self.execute(f"SELECT v FROM `{ident(table)}` WHERE k = %s", (str(key),), fetch=True)
        return rows[0][0] if rows else None

    def put(self, table: str, key: Any, value: Any, timeout: float | None = None) -> None:
        self.execute(
            f"INSERT INTO `{ident(table)}` (k, v) VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = VALUES(v)",
            (str(key), int(value)),
        )

    def cas(self, table: str, key: Any, expected: Any, new: Any, timeout: float | None = None) -> bool:
        n = self.execute(
            f"UPDATE `{ident(table)}` SET v = %s WHERE k = %s AND v = %s", (int(new), str(key), int(expected))
        )
        return bool(n == 1)

    def batch(
        self, table: str, rows: list[tuple[Any, ...]], timeout: float | None = None
    ) -> list[tuple[bool, None]]:
        """Rows `("put", key, value)` and `("cas", key, expected, new)` in one transaction: all apply, or
        none does (a cas that finds another value rolls it back). (applied, None) per row. An error before
        COMMIT was sent is definite (the server rolls back a transaction whose connection closes); one
        during COMMIT is not, unless the server says it rolled the transaction back."""
        import pymysql

        t = ident(table)
        committing = False
        self._connect()
        try:
            self.conn.begin()
            with self.conn.cursor() as cur:
                applied = all(self._row(cur, t, r) for r in rows)
            if not applied:
                self.conn.rollback()
                return [(False, None) for _ in rows]
            committing = True
            self.conn.commit()
            return [(True, None) for _ in rows]
        except pymysql.Error as exc:
            self.close()
            if committing and not aborted(exc):
                raise Indeterminate(f"mariadb: commit: {type(exc).__name__}: {exc}") from None
            raise Definite(f"mariadb: aborted: {type(exc).__name__}: {exc}") from None

    @staticmethod
    def _row(cur: Any, t: str, row: tuple[Any, ...]) -> bool:
        """One row of a batch inside its transaction: a put always applies; a cas when the value matches
        (UPDATE reads the latest committed row and locks it, at every isolation level)."""
        if row[0] == "put":
            cur.execute(
                f"INSERT INTO `{t}` (k, v) VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = VALUES(v)",
                (str(row[1]), int(row[2])),
            )
            return True
        _, key, expected, new = row
        return bool(
            cur.execute(
                f"UPDATE `{t}` SET v = %s WHERE k = %s AND v = %s", (int(new), str(key), int(expected))
            )
            == 1
        )

    def scan(self, table: str, timeout: float | None = None) -> list[tuple[str, Any]]:
        return [(k, v) for k, v in self.execute(f"SELECT k, v FROM `{ident(table)}`", fetch=True)]

    def close(self) -> None:
        drop_connection(self)


def parse_list(text: str | None) -> list[int]:
    """A list-append row's value, stored as comma-separated integers ('' or NULL: empty)."""
    return [int(x) for x in text.split(",")] if text else []


class MariaDBTxnClient(SQLTxnClient):
    """Transactions of micro-ops at the run's isolation level: a key is a row of (k bigint, v); list-append
    keeps a list as comma-separated text and appends with one upsert (`INSERT ... ON DUPLICATE KEY UPDATE
    v = CONCAT(v, ',', x)`); rw-register (and long-fork's write-once keys) write by upsert; reads select
    the row. A deadlock, a lock wait timeout or a duplicate key rolls the transaction back: `fail`."""

    def setup(self, test: Run) -> None:
        column = "text" if self.kind == "list-append" else "bigint"
        _create_table(test, self._table(test), f"k bigint PRIMARY KEY, v {column}")

    def connect(self, test: Run) -> Any:
        return connect(
            test.backend.address(test.backend.nodes()[0]),
            float(test.spec.op_timeout_s),
            autocommit=False,
            level=isolation(test),
        )

    def driver_errors(self) -> tuple[type[BaseException], ...]:
        import pymysql

        return (pymysql.Error,)

    def aborted(self, exc: BaseException) -> bool:
        return aborted(exc)

    def mop(self, mop: list[Any]) -> list[Any]:
        f, k, v = mop
        t = ident(self.table)
        with self.conn.cursor() as cur:
            if f == "r":
                cur.execute(f"SELECT v FROM `{t}` WHERE k = %s", (k,))
                row = cur.fetchone()
                if self.kind == "list-append":
                    return [f, k, parse_list(row[0] if row else None)]
                return [f, k, row[0] if row else None]
            if f == "append":
                cur.execute(
                    f"INSERT INTO `{t}` (k, v) VALUES (%s, %s) "
                    "ON DUPLICATE KEY UPDATE v = CONCAT(v, ',', VALUES(v))",
                    (k, str(int(v))),
                )
                return mop
            if f == "w":
                cur.execute(
                    f"INSERT INTO `{t}` (k, v) VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = VALUES(v)",
                    (k, int(v)),
                )
                return mop
        raise ValueError(f"{self.kind}: unknown micro-op {f!r}")


def _create_table(test: Run, table: str, columns: str) -> None:
    """A workload's table, made once at setup on the one server (`table` already an identifier)."""
    conn = MariaDBConnection(test.backend.address(test.backend.nodes()[0]), float(test.spec.setup_timeout_s))
    try:
        conn.execute(f"CREATE TABLE IF NOT EXISTS `{table}` ({columns}) ENGINE=InnoDB")
    finally:
        conn.close()


# mariadbd logs to stderr as "<date> <time> <thread> [<Level>] <message>". A fatal signal is reported by
# its handler as "[ERROR] <program> got signal N ;" (sql/signal_handler.cc); a failed InnoDB assertion as
# "InnoDB: Assertion failure in file F line N" then "InnoDB: Failing assertion: ..." (ut0dbg.cc); a
# condition InnoDB cannot go on from as "[FATAL] InnoDB: ..." (ib::fatal); damage it finds as "[ERROR]
# InnoDB: Corrupted page [page id: ...]", "... File '<f>' is corrupted", "... Table <t> is corrupted." and
# the like (the strings of 10.11.19's mariadbd).
LOG_PATTERNS = [
    LogPattern(
        "fatal-signal", r"\[ERROR\] \S*(?:mysqld|mariadbd) got signal \d+", "mariadbd crashed on a signal"
    ),
    LogPattern(
        "innodb-assertion",
        r"InnoDB: (?:Assertion failure in file|Failing assertion: )",
        "an InnoDB invariant failed (the server stops)",
    ),
    LogPattern("innodb-fatal", r"\[FATAL\] InnoDB: ", "InnoDB hit a condition it cannot go on from"),
    LogPattern(
        "corruption",
        r"\[ERROR\] InnoDB: (?:Corrupted page|Apparent corruption|.*\bis (?:marked as )?"
        r"corrupted\b)",
        "InnoDB found damaged data",
    ),
]


class MariaDBDB(OneSQLServer, ProcessDB):
    """One MariaDB 10.11 server, m1."""

    connection = MariaDBConnection
    name = "mariadb"
    workloads = frozenset({"register", "set", "list-append", "rw-register", "bank", "long-fork"})
    options = {
        "isolation": f"the transactions' isolation level: {', '.join(ISOLATION)} (default serializable)"
    }
    nemeses = PROCESS_NEMESES - set(PARTITIONS)
    nemesis_notes = {
        **PARTITION_NOTES,
        **{
            f: "not offered for mariadb yet: untried with InnoDB's files"
            for f in (*FILE_CORRUPTION_FAULTS, *DISK_NEMESES)
        },
        "clock": "not offered for mariadb yet: libfaketime under mariadbd is untried",
    }
    packages = ("mariadb-server",)
    data_dirs = {ROLE: ("{dir}/mysql",)}
    data_files = {ROLE: ("{dir}/mysql/ib_logfile0", "{dir}/mysql/ibdata1", f"{{dir}}/mysql/{DATABASE}/*.ibd")}

    def log_patterns(self) -> list[LogPattern]:
        return list(LOG_PATTERNS)

    def validate(self, opts: Mapping[str, Any]) -> None:
        validate_isolation(opts)

    def client(self, workload: str) -> Any:
        """Transactions need their own client; register, set and bank use the bundled ones over
        `connector`."""
        return MariaDBTxnClient(workload) if workload in ("list-append", "rw-register", "long-fork") else None

    def cluster_spec(self, name: str, opts: Mapping[str, Any]) -> ClusterSpec:
        self.validate(opts)
        role = RoleSpec(
            ROLE,
            1,
            "m",
            PORT,
            argv=[
                "/usr/sbin/mariadbd",
                "--no-defaults",
                "--datadir={dir}/mysql",
                f"--port={PORT}",
                "--bind-address=0.0.0.0",
                "--socket=/tmp/mariadbd-{name}.sock",
                "--skip-name-resolve",
                "--init-file={dir}/init.sql",
                "--innodb-flush-log-at-trx-commit=1",
                "--innodb-buffer-pool-size=64M",
                "--max-connections=500",
            ],
            prepare=["sh", "-c", _PREPARE, "sh", "{dir}"],
            prepare_unless="{dir}/init.sql",
            user=USER,
        )
        return ClusterSpec.from_mapping(
            {"name": name, "roles": [role], "packages": list(self.packages), "db": self.name}
        )
