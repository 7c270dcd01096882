"""The master's catalog: table and tablet records stored as rows of the system tablet.

Rows (keys are strings, values JSON strings):
    name/<table name>   -> table id          (CAS on it makes name creation/deletion atomic)
    table/<table id>    -> TableRec
    tablet/<tablet id>  -> TabletRec (its Raft config as last reported by its leader)

Every logical operation (create, delete, alter a table) is one batch of row ops, replicated as one
log entry, so a failure leaves either all of it or none (KUDU-495). The leader master's in-memory
caches (`CatalogCache`) are a function of these rows: rebuilt from them on election.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from faultline.node.tablet.state import CAS, PUT, Op

SYS_TABLET = "0" * 32
RUNNING, CREATING, DELETED = "RUNNING", "CREATING", "DELETED"


@dataclass
class TableRec:
    table_id: str
    name: str
    num_tablets: int
    replication: int
    schema_version: int = 1
    state: str = RUNNING
    tablet_ids: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(s: str) -> TableRec:
        return TableRec(**json.loads(s))


@dataclass
class TabletRec:
    tablet_id: str
    table_id: str
    partition: int
    state: str = CREATING
    # Raft config: {"opid_index": int, "peers": [{"uuid", "address", "member_type", "promote"}]}
    config: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(s: str) -> TabletRec:
        return TabletRec(**json.loads(s))

    def peers(self) -> list[dict[str, Any]]:
        return list(self.config.get("peers", []))

    def config_index(self) -> int:
        return int(self.config.get("opid_index", -1))


def table_key(tid: str) -> str:
    return f"table/{tid}"


def tablet_key(tid: str) -> str:
    return f"tablet/{tid}"


def name_key(name: str) -> str:
    return f"name/{name}"


class CatalogCache:
    """Tables by id and by name, tablets by id; deleted tables stay by id but leave the name map."""

    def __init__(self) -> None:
        self.tables: dict[str, TableRec] = {}
        self.by_name: dict[str, str] = {}
        self.tablets: dict[str, TabletRec] = {}
        self.raw: dict[str, str] = {}  # row key -> row value, for CAS expectations

    def clear(self) -> None:
        # fresh maps rather than emptied ones: a caller may still hold the old ones
        self.tables = {}
        self.by_name = {}
        self.tablets = {}
        self.raw = {}

    def load(self, rows: list[tuple[Any, Any]]) -> None:
        self.clear()
        for k, v in rows:
            self._put(str(k), None if v is None else str(v))

    def _put(self, key: str, value: str | None) -> None:
        if value is None:
            self.raw.pop(key, None)
        else:
            self.raw[key] = value
        kind, _, ident = key.partition("/")
        if kind == "name":
            if value is None:
                self.by_name.pop(ident, None)
            else:
                self.by_name[ident] = value
        elif kind == "table" and value is not None:
            self.tables[ident] = TableRec.from_json(value)
        elif kind == "tablet" and value is not None:
            self.tablets[ident] = TabletRec.from_json(value)

    def apply_ops(self, ops: list[Op]) -> None:
        """Mirror a batch that committed successfully on the system tablet."""
        for o in ops:
            self._put(str(o.key), None if o.value is None else str(o.value))

    def table_by_name(self, name: str) -> TableRec | None:
        tid = self.by_name.get(name)
        return self.tables.get(tid) if tid else None

    def put_op(self, key: str, value: str) -> Op:
        """A CAS that writes `value` only if the row still holds what this cache believes."""
        return Op(CAS, key, value, self.raw.get(key))

    def replica_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tablets.values():
            if t.state == DELETED:
                continue
            for p in t.peers():
                out[p["uuid"]] = out.get(p["uuid"], 0) + 1
        return out


__all__ = [
    "CAS",
    "CREATING",
    "DELETED",
    "PUT",
    "RUNNING",
    "SYS_TABLET",
    "CatalogCache",
    "TableRec",
    "TabletRec",
    "name_key",
    "table_key",
    "tablet_key",
]
