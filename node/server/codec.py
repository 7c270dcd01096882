"""Raft messages, entries and configs of node/consensus to and from bytes and plain dicts.

The consensus core speaks frozen dataclasses; the transport and the storage need bytes. JSON
keeps the wire format readable in logs and the tools' output; payloads travel base64-encoded.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from faultline.node.consensus import (
    AppendRequest,
    AppendResponse,
    Entry,
    EntryType,
    HardState,
    InstallSnapshot,
    Message,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from faultline.node.log.cmeta import config_from_json as config_from_dict
from faultline.node.log.cmeta import config_to_json as config_to_dict

_MSG_TYPES: dict[str, type] = {
    "vreq": VoteRequest,
    "vresp": VoteResponse,
    "areq": AppendRequest,
    "aresp": AppendResponse,
    "tnow": TimeoutNow,
    "snap": InstallSnapshot,
}
_MSG_TAGS = {v: k for k, v in _MSG_TYPES.items()}


def entry_to_dict(e: Entry) -> dict[str, Any]:
    d: dict[str, Any] = {"term": e.term, "index": e.index, "type": e.type.value}
    if e.payload:
        d["payload"] = base64.b64encode(e.payload).decode()
    if e.config is not None:
        d["config"] = config_to_dict(e.config)
    return d


def entry_from_dict(d: dict[str, Any]) -> Entry:
    return Entry(
        int(d["term"]),
        int(d["index"]),
        EntryType(d["type"]),
        base64.b64decode(d["payload"]) if d.get("payload") else b"",
        config_from_dict(d["config"]) if d.get("config") else None,
    )


def encode_entry(e: Entry) -> bytes:
    return json.dumps(entry_to_dict(e), separators=(",", ":")).encode()


def decode_entry(b: bytes) -> Entry:
    return entry_from_dict(json.loads(b))


def hard_state_to_dict(h: HardState) -> dict[str, Any]:
    return {"term": h.term, "voted_for": h.voted_for}


def encode_message(m: Message) -> bytes:
    d: dict[str, Any] = {"_t": _MSG_TAGS[type(m)]}
    for k, v in m.__dict__.items():
        if k == "entries":
            v = [entry_to_dict(e) for e in v]
        elif k == "config":
            v = config_to_dict(v)
        elif k == "data":
            v = base64.b64encode(v).decode()
        d[k] = v
    return json.dumps(d, separators=(",", ":")).encode()


def decode_message(b: bytes) -> Message:
    d = json.loads(b)
    cls = _MSG_TYPES[d.pop("_t")]
    if "entries" in d:
        d["entries"] = tuple(entry_from_dict(e) for e in d["entries"])
    if "config" in d:
        d["config"] = config_from_dict(d["config"])
    if "data" in d:
        d["data"] = base64.b64decode(d["data"])
    return cls(**d)
