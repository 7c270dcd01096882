"""PostgreSQL 15 (Debian's postgresql-15) as a DB: a single primary `p1`, spoken to with psycopg 3.

The connection speaks the store's client API (get, put, cas, scan, create_table) over one table per
workload, so the bundled register and set workloads run unchanged; each statement is its own transaction
(autocommit). A single primary is linearizable for these operations. It runs as the `postgres` user (it
refuses root): the daemon manager drops to it just before exec, so pause and kill reach the postmaster
and its backends (one process group), and libfaketime, which moves its clock for clock faults, starts
as that user (started as root, it makes a semaphore the postgres user cannot open, and postgres fails).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from faultline.cluster.base import ClusterSpec, RoleSpec
from faultline.core import Run
from faultline.dbs.base import Definite, Indeterminate, ProcessDB, common_notes, supported_nemeses

ROLE = "postgres"
PORT = 5432
BIN = "/usr/lib/postgresql/15/bin"
USER = "postgres"
# initdb once, trusting connections from the cluster's network and the host (a test cluster, no secrets)
_INITDB = (
    'set -e; d="$1/pgdata"; mkdir -p "$d"; chown postgres:postgres "$d"; chmod 700 "$d"; '
    f'setpriv --reuid={USER} --regid={USER} --init-groups -- {BIN}/initdb -D "$d" -U postgres --auth=trust '
    '--no-sync >/dev/null; '
    'echo "host all all 0.0.0.0/0 trust" >> "$d/pg_hba.conf"'
)


class PostgresConnection:
    """One psycopg connection (autocommit), reconnected after an error, with the store's client API over
    tables of (k text primary key, v bigint)."""

    def __init__(self, host: str, timeout_s: float) -> None:
        self.host, self.timeout = host, timeout_s
        self.conn: Any = None

    def _exec(self, sql: str, args: tuple = (), fetch: bool = False) -> Any:
        import psycopg

        try:
            if self.conn is None:
                self.conn = psycopg.connect(host=self.host, port=PORT, user=USER, dbname="postgres", autocommit=True,
                                            connect_timeout=max(1, int(self.timeout)),
                                            options=f"-c statement_timeout={int(self.timeout * 1000)}")
            cur = self.conn.execute(sql, args)
            return cur.fetchall() if fetch else cur.rowcount
        except psycopg.errors.SerializationFailure as exc:
            raise Definite(f"postgres: {exc}") from None
        except psycopg.Error as exc:
            self.close()
            if isinstance(exc, psycopg.errors.DuplicateTable | psycopg.errors.UniqueViolation):
                raise Definite(f"postgres: already exists: {exc}") from None
            raise Indeterminate(f"postgres: {type(exc).__name__}: {exc}") from None

    def create_table(self, name: str, **_: Any) -> None:
        self._exec(f'CREATE TABLE IF NOT EXISTS "{_ident(name)}" (k text PRIMARY KEY, v bigint)')

    def get(self, table: str, key: Any, timeout: float | None = None) -> Any:
        rows = self._exec(f'SELECT v FROM "{_ident(table)}" WHERE k = %s', (str(key),), fetch=True)
        return rows[0][0] if rows else None

    def put(self, table: str, key: Any, value: Any, timeout: float | None = None) -> None:
        self._exec(f'INSERT INTO "{_ident(table)}" (k, v) VALUES (%s, %s) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v',
                   (str(key), int(value)))

    def cas(self, table: str, key: Any, expected: Any, new: Any, timeout: float | None = None) -> bool:
        n = self._exec(f'UPDATE "{_ident(table)}" SET v = %s WHERE k = %s AND v = %s', (int(new), str(key), int(expected)))
        return n == 1

    def scan(self, table: str, timeout: float | None = None) -> list[tuple[str, Any]]:
        return [(k, v) for k, v in self._exec(f'SELECT k, v FROM "{_ident(table)}"', fetch=True)]

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            finally:
                self.conn = None


def _ident(name: str) -> str:
    """A table name the workloads make (letters, digits, '-'), refused otherwise: never spliced raw into SQL."""
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"not a table name: {name!r}")
    return name


class PostgresDB(ProcessDB):
    """One PostgreSQL 15 server, p1."""

    name = "postgres"
    workloads = frozenset({"register", "set"})
    nemeses = supported_nemeses(clock=True) - {"partition", "partition-one", "partition-halves",
                                               "partition-majority", "partition-ring", "partition-bridge",
                                               "partition-primary"}
    nemesis_notes = {**common_notes(None), **{p: "a single-node DB has no peers to be cut off from" for p in (
        "partition", "partition-one", "partition-halves", "partition-majority", "partition-ring",
        "partition-bridge", "partition-primary")}}
    packages = ("postgresql-15",)
    clock_by_faketime = True

    def cluster_spec(self, name: str, opts: Mapping[str, Any]) -> ClusterSpec:
        self.validate(opts)
        role = RoleSpec(ROLE, 1, "p", PORT,
                        argv=[f"{BIN}/postgres", "-D", "{dir}/pgdata", "-c", "listen_addresses=*",
                              "-c", "unix_socket_directories=/tmp", "-c", "fsync=on"],
                        prepare=["sh", "-c", _INITDB, "sh", "{dir}"], prepare_unless="{dir}/pgdata/PG_VERSION",
                        user=USER)
        return ClusterSpec.from_mapping({"name": name, "roles": [role], "packages": list(self.packages),
                                         "db": self.name, "faketime": bool(opts.get("clock"))})

    def ready(self, test: Run, node: str) -> bool:
        conn = PostgresConnection(test.backend.address(node), 2.0)
        try:
            return conn._exec("SELECT 1", fetch=True) == [(1,)]
        finally:
            conn.close()

    def primaries(self, test: Run) -> list[str]:
        return test.backend.nodes()[:1]

    def connector(self, test: Run) -> Callable[[], Any]:
        timeout = float(test.spec.op_timeout_s)
        return lambda: PostgresConnection(test.backend.address(test.backend.nodes()[0]), timeout)
