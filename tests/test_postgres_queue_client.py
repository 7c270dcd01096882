"""The PostgreSQL queue client resolves a dequeue in doubt through its token (dbs/postgres.py)."""

from __future__ import annotations

from typing import Any

from faultline.db.process import Definite, Indeterminate
from faultline.dbs.postgres import PostgresQueueClient


class _Conn:
    """Fails the dequeue statement as a killed server does, then answers the lookup with `taken` after
    `down` refused connections."""

    def __init__(self, taken: list[tuple[int]], down: int = 0) -> None:
        self.taken, self.down, self.lookups = taken, down, 0

    def execute(self, sql: str, args: tuple[Any, ...] = (), fetch: bool = False) -> Any:
        if sql.startswith("WITH d AS (DELETE"):
            assert sql.count("_taken") == 1 and len(args) == 1  # the token goes in with the element
            raise Indeterminate("postgres: server closed the connection unexpectedly")
        assert sql.startswith("SELECT v FROM") and "_taken" in sql
        self.lookups += 1
        if self.down:
            self.down -= 1
            raise Definite("postgres: cannot connect")
        return self.taken


def _dequeue(conn: _Conn) -> dict[str, Any]:
    client = PostgresQueueClient(conn, "q")  # type: ignore[arg-type]
    client.RESOLVE_S = 5.0
    return client.invoke(None, {"f": "dequeue", "value": None, "process": 0, "type": "invoke"})  # type: ignore[arg-type]


def test_a_dequeue_in_doubt_that_committed_is_ok_with_its_element_once_the_server_answers():
    conn = _Conn([(42,)], down=2)
    done = _dequeue(conn)
    assert done["type"] == "ok" and done["value"] == 42 and conn.lookups == 3


def test_a_dequeue_in_doubt_whose_token_is_not_found_stays_info():
    done = _dequeue(_Conn([]))
    assert done["type"] == "info"
