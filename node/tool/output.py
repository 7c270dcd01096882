"""The admin tools' `--json` output: how each listing tool prints it and the one parser that reads it back.

The text output is for people and may change; nemeses, scripts and the in-memory fake cluster use the
JSON form through these functions, so the format is defined once. Each document is one JSON object on
one line, keys sorted. Kept free of grpc and protobuf imports so that callers outside the node (nemeses,
the fake) can import it cheaply.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, NotRequired, TypedDict


class MasterRow(TypedDict):
    """One master in the masters' Raft config (`master list`)."""

    uuid: str
    addr: str
    role: str  # LEADER, FOLLOWER, LEARNER, ...
    voter: bool


class ReplicaRow(TypedDict):
    """One replica of a tablet as the leader master places it (`table list --tablets`)."""

    uuid: str
    addr: str
    role: str  # LEADER, FOLLOWER, LEARNER, UNKNOWN
    voter: bool


class TabletRow(TypedDict):
    tablet_id: str
    partition: int
    state: str  # CREATING, RUNNING, DELETED
    replicas: list[ReplicaRow]


class TableRow(TypedDict):
    name: str
    tablets: NotRequired[list[TabletRow]]  # only with `--tablets`


class LocalReplicaRow(TypedDict):
    """One replica in a stopped server's data directory (`local_replica list`)."""

    tablet_id: str
    state: str  # RUNNING, COPYING, TOMBSTONED
    table: str


class RemoteReplicaRow(TypedDict):
    """One replica of a running server, as that server sees it (`remote_replica list`)."""

    tablet_id: str
    table: str
    state: str
    role: str
    term: int
    leader_uuid: str
    commit_index: int
    last_index: int
    config_index: int
    voters: list[str]
    non_voters: list[str]


def dumps(doc: dict[str, Any]) -> str:
    """One line, sorted keys: the shape every `--json` listing prints."""
    return json.dumps(doc, sort_keys=True) + "\n"


def parse(out: str, key: str) -> list[Any]:
    """The list under `key` in a tool's `--json` output: the only parser of that output.

    Reads the last non-empty line when the whole text is not one JSON document, so stray lines printed
    ahead of it (e.g. by a remote shell) do no harm. Raises ValueError when there is no such document."""
    text = out.strip()
    try:
        doc = json.loads(text)
    except ValueError:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if not lines:
            raise ValueError("empty tool output; expected a JSON document") from None
        doc = json.loads(lines[-1])
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        raise ValueError(f"tool output has no {key!r} list: {text[-200:]!r}")
    return doc[key]


# ---------------------------------------------------------------------- master list
def format_master_list(rows: Iterable[MasterRow], as_json: bool = False) -> str:
    """`{"masters": [{"uuid", "addr", "role", "voter"}, ...]}`; text: `UUID ADDR ROLE [(non-voter)]` lines."""
    rows = list(rows)
    if as_json:
        return dumps({"masters": rows})
    return "".join(
        f"{m['uuid']} {m['addr']} {m['role']}{'' if m['voter'] else ' (non-voter)'}\n" for m in rows
    )


def _member(m: Any) -> MasterRow:
    """One Raft member as both listings print it (a master, or a tablet's replica)."""
    return MasterRow(
        uuid=str(m["uuid"]), addr=str(m["addr"]), role=str(m["role"]).upper(), voter=bool(m["voter"])
    )


def parse_master_list(out: str) -> list[MasterRow]:
    """The masters from `master list --json`."""
    return [_member(m) for m in parse(out, "masters")]


# ---------------------------------------------------------------------- table list
def format_table_list(tables: Sequence[TableRow], as_json: bool = False) -> str:
    """`{"tables": [{"name", "tablets"?: [{"tablet_id", "partition", "state", "replicas": [{"uuid", "addr",
    "role", "voter"}]}]}]}`; text: the table name, then `  TABLET pN STATE UUID:ROLE ...` per tablet."""
    if as_json:
        return dumps({"tables": list(tables)})
    lines = []
    for t in tables:
        lines.append(t["name"])
        for tab in t.get("tablets", []):
            reps = " ".join(f"{r['uuid']}:{r['role']}" for r in tab["replicas"])
            lines.append(f"  {tab['tablet_id']} p{tab['partition']} {tab['state']} {reps}")
    return "".join(f"{ln}\n" for ln in lines)


def parse_table_list(out: str) -> list[TableRow]:
    """The tables (with their tablets, when asked with `--tablets`) from `table list --json`."""
    tables: list[TableRow] = []
    for t in parse(out, "tables"):
        row = TableRow(name=str(t["name"]))
        if "tablets" in t:
            row["tablets"] = [
                TabletRow(
                    tablet_id=str(tab["tablet_id"]),
                    partition=int(tab["partition"]),
                    state=str(tab["state"]),
                    replicas=[ReplicaRow(**_member(r)) for r in tab["replicas"]],
                )
                for tab in t["tablets"]
            ]
        tables.append(row)
    return tables


# ---------------------------------------------------------------------- replica lists
def format_local_replicas(rows: Iterable[LocalReplicaRow], as_json: bool = False) -> str:
    """`{"replicas": [{"tablet_id", "state", "table"}]}`; text: `TABLET STATE TABLE` lines."""
    rows = list(rows)
    if as_json:
        return dumps({"replicas": rows})
    return "".join(f"{r['tablet_id']} {r['state']} {r['table']}\n" for r in rows)


def parse_local_replicas(out: str) -> list[LocalReplicaRow]:
    """The replicas from `local_replica list --json`."""
    return [
        LocalReplicaRow(tablet_id=str(r["tablet_id"]), state=str(r["state"]), table=str(r["table"]))
        for r in parse(out, "replicas")
    ]


def format_remote_replicas(rows: Iterable[RemoteReplicaRow], as_json: bool = False) -> str:
    """`{"replicas": [{"tablet_id", "table", "state", "role", "term", "leader_uuid", "commit_index",
    "last_index", "config_index", "voters", "non_voters"}]}`; text: one line per replica, uuids shortened."""
    rows = list(rows)
    if as_json:
        return dumps({"replicas": rows})
    return "".join(
        f"{r['tablet_id']} {r['state']} {r['role']} term={r['term']} commit={r['commit_index']} "
        f"table={r['table']} voters={','.join(u[:8] for u in r['voters'])}\n"
        for r in rows
    )


def parse_remote_replicas(out: str) -> list[RemoteReplicaRow]:
    """The replicas from `remote_replica list --json`."""
    return [
        RemoteReplicaRow(
            tablet_id=str(r["tablet_id"]),
            table=str(r["table"]),
            state=str(r["state"]),
            role=str(r["role"]),
            term=int(r["term"]),
            leader_uuid=str(r["leader_uuid"]),
            commit_index=int(r["commit_index"]),
            last_index=int(r["last_index"]),
            config_index=int(r["config_index"]),
            voters=[str(u) for u in r["voters"]],
            non_voters=[str(u) for u in r["non_voters"]],
        )
        for r in parse(out, "replicas")
    ]


__all__ = [
    "LocalReplicaRow",
    "MasterRow",
    "RemoteReplicaRow",
    "ReplicaRow",
    "TableRow",
    "TabletRow",
    "dumps",
    "format_local_replicas",
    "format_master_list",
    "format_remote_replicas",
    "format_table_list",
    "parse",
    "parse_local_replicas",
    "parse_master_list",
    "parse_remote_replicas",
    "parse_table_list",
]
