"""The replicated key-value state machine of one tablet.

A log entry's payload is JSON: `{"t": "write", "ops": [[kind, key, value, expected], ...]}`
(one atomic batch), `{"t": "schema", "v": N}` (alter) or `{"t": "noop"}`. Keys and values are
type-tagged (see node/server/values.py) so ints and strings never collide. Applying is
deterministic: every replica that applies the same entries holds the same rows.
"""

from __future__ import annotations

import bisect
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

from faultline.node.server.values import Scalar, decode_key, encode_key, sort_key

PUT, DELETE, CAS = "put", "delete", "cas"
KINDS = ("write", "schema")  # what a replica writes to its log (noop: an empty payload)

log = logging.getLogger("faultline.tablet")


@dataclass
class Op:
    """One row operation. For CAS, `expected`/`value` None mean "no row" / "delete the row"."""

    kind: str
    key: Scalar
    value: Scalar | None = None
    expected: Scalar | None = None


@dataclass
class OpResult:
    ok: bool
    previous: Scalar | None


def _tag(v: Scalar | None) -> str | None:
    return None if v is None else encode_key(v)


def encode_write(ops: list[Op], schema_version: int = 0) -> bytes:
    return json.dumps(
        {
            "t": "write",
            "sv": schema_version,
            "ops": [[o.kind, _tag(o.key), _tag(o.value), _tag(o.expected)] for o in ops],
        },
        separators=(",", ":"),
    ).encode()


def encode_schema(version: int) -> bytes:
    return json.dumps({"t": "schema", "v": version}).encode()


def decode_entry(payload: bytes) -> dict[str, Any]:
    if not payload:
        return {"t": "noop"}
    try:
        return json.loads(payload)
    except ValueError:
        return {"t": "noop"}


class TabletState:
    """Rows in a dict plus a sorted key index for scans; guarded by a lock for readers."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.rows: dict[str, str] = {}  # tagged key -> tagged value
        self._sorted: list[tuple[tuple[int, Any], str]] = []
        self.applied_index = 0
        self.applied_term = 0
        self.schema_version = 0
        self.results: dict[int, list[OpResult]] = {}  # index -> results, kept briefly for waiters

    # ------------------------------------------------------------------ apply
    def apply(self, index: int, term: int, payload: bytes) -> list[OpResult] | None:
        """Apply the committed entry at `index`; entries at or below applied_index are skipped."""
        with self.lock:
            if index <= self.applied_index:
                return None
            entry = decode_entry(payload)
            if payload and entry.get("t") not in KINDS:
                # every replica wrote this entry as a write or a schema change: the log handed up damaged data
                log.error(
                    "damaged log entry %d (term %d, %d bytes) is not a valid write; skipping it",
                    index,
                    term,
                    len(payload),
                )
            out: list[OpResult] | None = None
            if entry.get("t") == "write":
                out = self._apply_batch(entry["ops"])
            elif entry.get("t") == "schema":
                self.schema_version = max(self.schema_version, int(entry["v"]))
            self.applied_index = index
            self.applied_term = term
            return out

    def _apply_batch(self, ops: list[list]) -> list[OpResult]:
        """All or nothing: if any CAS in the batch fails, no op of the batch is applied.

        Ops see the effects of earlier ops of the same batch. On failure, the failing CAS has
        ok=False and every other op reports ok=False too (not applied)."""
        overlay: dict[str, str | None] = {}
        results: list[OpResult] = []
        failed = False
        for kind, key, value, expected in ops:
            prev = overlay[key] if key in overlay else self.rows.get(key)
            prev_v = None if prev is None else decode_key(prev)
            if kind == CAS and prev != expected:
                failed = True
                results.append(OpResult(False, prev_v))
                continue
            overlay[key] = None if kind == DELETE else value
            results.append(OpResult(True, prev_v))
        if failed:
            return [OpResult(False, r.previous) for r in results]
        for key, new in overlay.items():
            prev = self.rows.get(key)
            if new is None:
                if prev is not None:
                    del self.rows[key]
                    self._unindex(key)
            else:
                if prev is None:
                    self._index(key)
                self.rows[key] = new
        return results

    def items(self) -> list[tuple[Scalar, Scalar]]:
        """Every row, in key order (the master rebuilds its caches from this)."""
        return self.scan(None, None, limit=10**9)

    def _index(self, key: str) -> None:
        sk = sort_key(decode_key(key))
        bisect.insort(self._sorted, (sk, key))

    def _unindex(self, key: str) -> None:
        sk = sort_key(decode_key(key))
        i = bisect.bisect_left(self._sorted, (sk, key))
        if i < len(self._sorted) and self._sorted[i][1] == key:
            del self._sorted[i]

    # ------------------------------------------------------------------ read
    def get(self, key: Scalar) -> Scalar | None:
        with self.lock:
            v = self.rows.get(encode_key(key))
            return None if v is None else decode_key(v)

    def scan(
        self, start: Scalar | None, end: Scalar | None, limit: int = 1_000_000
    ) -> list[tuple[Scalar, Scalar]]:
        with self.lock:
            lo = 0 if start is None else bisect.bisect_left(self._sorted, (sort_key(start), ""))
            out = []
            for sk, key in self._sorted[lo:]:
                if end is not None and sk >= sort_key(end):
                    break
                out.append((decode_key(key), decode_key(self.rows[key])))
                if len(out) >= limit:
                    break
            return out

    # ------------------------------------------------------------------ snapshots (tablet copy)
    def snapshot(self) -> tuple[bytes, int, int]:
        with self.lock:
            data = json.dumps(
                {"rows": self.rows, "schema_version": self.schema_version}, separators=(",", ":")
            ).encode()
            return data, self.applied_index, self.applied_term

    def restore(self, data: bytes, index: int, term: int) -> None:
        snap: dict[str, Any] = json.loads(data) if data else {"rows": {}, "schema_version": 0}
        with self.lock:
            self.rows = dict(snap["rows"])
            self._sorted = sorted((sort_key(decode_key(k)), k) for k in self.rows)
            self.schema_version = int(snap.get("schema_version", 0))
            self.applied_index = index
            self.applied_term = term
