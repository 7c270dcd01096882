"""The MariaDB DB's client without a server: which errors prove a transaction rolled back (`fail`) and which
leave it in doubt (`info`), the SQL each micro-op sends, and what a run refuses before anything starts."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest
from spec_refusals import assert_refused

from faultline.controller import testspec
from faultline.db.process import Definite, Indeterminate
from faultline.dbs import get_db, loadable
from faultline.dbs.mariadb import MariaDBConnection, MariaDBTxnClient, aborted, parse_list, session_sql

DEADLOCK = pymysql.err.OperationalError(
    1213, "Deadlock found when trying to get lock; try restarting transaction"
)
LOCK_WAIT = pymysql.err.OperationalError(1205, "Lock wait timeout exceeded; try restarting transaction")
LOST = pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")
GONE = pymysql.err.OperationalError(2006, "MySQL server has gone away")


class FakeCursor:
    """Records each statement; answers reads from `rows`, raises `fail_on` for the statement that matches."""

    def __init__(self, conn: FakeConn) -> None:
        self.conn = conn

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def execute(self, sql: str, args: tuple[Any, ...] = ()) -> int:
        self.conn.sent.append((sql, args))
        for needle, exc in self.conn.fail_on.items():
            if needle in sql:
                raise exc
        return self.conn.matched

    def fetchone(self) -> Any:
        return self.conn.rows.pop(0) if self.conn.rows else None

    def fetchall(self) -> list[Any]:
        rows, self.conn.rows = self.conn.rows, []
        return rows


class FakeConn:
    def __init__(
        self,
        rows: list[Any] | None = None,
        fail_on: dict[str, Exception] | None = None,
        commit_error: Exception | None = None,
        matched: int = 1,
    ) -> None:
        self.rows, self.fail_on, self.commit_error, self.matched = (
            rows or [],
            fail_on or {},
            commit_error,
            matched,
        )
        self.sent: list[tuple[str, tuple[Any, ...]]] = []
        self.committed = self.rolled_back = self.closed = False

    def cursor(self) -> FakeCursor:
        return FakeCursor(self)

    def begin(self) -> None:
        self.sent.append(("BEGIN", ()))

    def commit(self) -> None:
        if self.commit_error:
            raise self.commit_error
        self.committed = True

    def rollback(self) -> None:
        self.rolled_back = True

    def close(self) -> None:
        self.closed = True


def _txn(kind: str, conn: FakeConn) -> MariaDBTxnClient:
    return MariaDBTxnClient(kind, conn, "txn_list_append")


OP = {"type": "invoke", "f": "txn", "process": 0, "value": [["r", 1, None], ["append", 1, 3]]}


def test_the_server_error_numbers_that_prove_a_rollback() -> None:
    assert aborted(DEADLOCK) and aborted(LOCK_WAIT)
    assert aborted(pymysql.err.IntegrityError(1062, "Duplicate entry '1' for key 'PRIMARY'"))
    assert aborted(pymysql.err.OperationalError(1020, "Record has changed since last read in table 't'"))
    assert not aborted(LOST) and not aborted(GONE) and not aborted(ValueError("x"))


def test_a_transaction_reads_and_appends_in_one_upsert_then_commits() -> None:
    conn = FakeConn(rows=[("1,2",)])
    done = _txn("list-append", conn).invoke(None, OP)  # type: ignore[arg-type]
    assert done["type"] == "ok" and done["value"] == [["r", 1, [1, 2]], ["append", 1, 3]] and conn.committed
    (read, _), (append, args) = conn.sent
    assert read == "SELECT v FROM `txn_list_append` WHERE k = %s"
    assert "ON DUPLICATE KEY UPDATE v = CONCAT(v, ',', VALUES(v))" in append and args == (1, "3")


def test_rw_register_writes_by_upsert_and_reads_a_missing_row_as_none() -> None:
    conn = FakeConn()
    op = {**OP, "value": [["r", 4, None], ["w", 4, 7]]}
    done = MariaDBTxnClient("rw-register", conn, "t").invoke(None, op)  # type: ignore[arg-type]
    assert done["value"] == [["r", 4, None], ["w", 4, 7]]
    assert conn.sent[1] == (
        "INSERT INTO `t` (k, v) VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = VALUES(v)",
        (4, 7),
    )


@pytest.mark.parametrize(
    ("fail_on", "commit_error", "expected"),
    [
        ({"SELECT": DEADLOCK}, None, "fail"),  # InnoDB rolled the transaction back (expected at SERIALIZABLE)
        ({"INSERT": LOCK_WAIT}, None, "fail"),  # the statement waited too long; closing rolls back the rest
        ({"INSERT": LOST}, None, "fail"),  # lost before COMMIT was sent: the server rolls back
        ({}, LOST, "info"),  # COMMIT sent, its answer lost: it may have committed
        ({}, GONE, "info"),
        ({}, DEADLOCK, "fail"),  # the server answered COMMIT with a rollback
    ],
)
def test_a_failed_transaction_is_fail_unless_its_commit_is_in_doubt(
    fail_on: dict[str, Exception], commit_error: Exception | None, expected: str
) -> None:
    conn = FakeConn(rows=[("1",)], fail_on=fail_on, commit_error=commit_error)
    client = _txn("list-append", conn)
    done = client.invoke(None, OP)  # type: ignore[arg-type]
    assert done["type"] == expected and done["error"], done
    assert conn.closed and client.conn is None  # reconnects for the next transaction


def test_list_values_are_comma_separated_integers() -> None:
    assert parse_list(None) == [] and parse_list("") == [] and parse_list("5,10,3") == [5, 10, 3]


@pytest.mark.parametrize(
    ("level", "sql"),
    [
        ("serializable", "SERIALIZABLE"),
        ("repeatable-read", "REPEATABLE-READ"),
        ("read-committed", "READ-COMMITTED"),
    ],
)
def test_each_connection_sets_its_isolation_and_a_lock_wait_shorter_than_the_op_timeout(
    level: str, sql: str
) -> None:
    assert session_sql(level, 5.0) == (
        f"SET SESSION innodb_lock_wait_timeout = 3, SESSION tx_isolation = '{sql}'"
    )
    assert session_sql(None, 1.0) == "SET SESSION innodb_lock_wait_timeout = 1"


def _kv(conn: FakeConn) -> MariaDBConnection:
    kv = MariaDBConnection("m1", 5.0)
    kv.conn = conn
    return kv


def test_a_bank_batch_commits_both_cas_rows_or_rolls_back() -> None:
    rows = [("cas", "a0", 20, 15), ("cas", "a1", 20, 25)]
    conn = FakeConn(matched=1)
    assert _kv(conn).batch("bank", rows) == [(True, None), (True, None)] and conn.committed
    assert conn.sent[1] == ("UPDATE `bank` SET v = %s WHERE k = %s AND v = %s", (15, "a0", 20))
    stale = FakeConn(matched=0)
    assert _kv(stale).batch("bank", rows) == [(False, None), (False, None)]
    assert stale.rolled_back and not stale.committed


def test_a_batch_error_is_definite_before_commit_and_in_doubt_during_it() -> None:
    rows = [("put", "a0", 1)]
    with pytest.raises(Definite):
        _kv(FakeConn(fail_on={"INSERT": LOST})).batch("bank", rows)
    with pytest.raises(Indeterminate):
        _kv(FakeConn(commit_error=LOST)).batch("bank", rows)
    with pytest.raises(Definite):
        _kv(FakeConn(commit_error=DEADLOCK)).batch("bank", rows)


def test_a_single_statement_write_in_doubt_is_indeterminate() -> None:
    with pytest.raises(Indeterminate):
        _kv(FakeConn(fail_on={"INSERT": LOST})).put("register", 1, 2)
    with pytest.raises(Definite):
        _kv(FakeConn(fail_on={"UPDATE": LOCK_WAIT})).cas("register", 1, 2, 3)


def test_the_run_takes_mariadbs_levels_and_refuses_what_one_node_cannot_do() -> None:
    spec = testspec.build_test({"db": "mariadb", "workload": "list-append", "isolation": "repeatable-read"})
    assert spec.db_opts == {"isolation": "repeatable-read"}
    assert spec.cluster_spec["roles"][0]["user"] == "mysql"
    assert_refused("isolation must be one of", db="mariadb", workload="list-append", isolation="snapshot")
    assert_refused("no peers", db="mariadb", workload="register", nemesis="partition")
    assert_refused("no client for workload 'queue'", db="mariadb", workload="queue")


def test_every_db_image_takes_mariadb_server() -> None:
    assert "mariadb" in [db.name for db in loadable()]
    assert "mariadb-server" in get_db("mariadb").cluster_spec("image", {}).packages
