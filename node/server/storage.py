"""A replica's durable state: consensus metadata (node.log's cmeta), its WAL, and a snapshot.

`ReplicaStorage.persist(ready)` does what `Ready` asks, in order: truncate, append, save cmeta,
sync (one fsync for everything the core produced since the last call: group commit). With
`fsync=False` (the `no-fsync` bug, Kudu's default) nothing is synced, and node.log's power-loss
simulation can cut the files back to what an fsync would have kept.

The WAL here is a single append-only file of checksummed JSON records; a torn tail (the record a
crash cut in half) is dropped on load.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import zlib
from pathlib import Path

from node.consensus import Entry, HardState, PersistentState, RaftConfig, Ready
from node.log.cmeta import CmetaCorruption, ConsensusMetadata
from node.log.durable import atomic_write, note_removed, note_synced
from node.server.codec import entry_from_dict, entry_to_dict
from node.server.fs import FsLayout

log = logging.getLogger("node.storage")

__all__ = ["CmetaCorruption", "ReplicaStorage"]


class ReplicaStorage:
    """WAL + cmeta + snapshot of one tablet replica under a node's data directory."""

    def __init__(self, layout: FsLayout, tablet_id: str, fsync: bool = True) -> None:
        self.layout = layout
        self.tablet_id = tablet_id
        self.fsync = fsync
        self.wal_dir = layout.wal_dir(tablet_id)
        self.wal_path = self.wal_dir / "wal"
        self.cmeta_path = layout.cmeta(tablet_id)
        self.snapshot_path = layout.snapshot(tablet_id)
        self.entries: list[Entry] = []   # the log as persisted, for tablet copy sources
        self.log_start = 1
        self.prev_term = 0
        self._f = None
        self.cmeta: ConsensusMetadata | None = None

    # ------------------------------------------------------------------ create / load
    def create(self, config: RaftConfig, term: int = 0, snapshot: bytes | None = None,
               snapshot_index: int = 0, snapshot_term: int = 0, entries: list[Entry] | None = None) -> None:
        """Write a fresh replica: cmeta, optional snapshot, and a WAL holding `entries`."""
        self.wal_dir.mkdir(parents=True, exist_ok=True)
        self.cmeta_path.parent.mkdir(parents=True, exist_ok=True)
        self.snapshot_path.parent.mkdir(parents=True, exist_ok=True)
        if snapshot is not None:
            atomic_write(self.snapshot_path, json.dumps(
                {"index": snapshot_index, "term": snapshot_term, "data": snapshot.decode()}).encode(),
                fsync=True)
        elif self.snapshot_path.exists():
            self.snapshot_path.unlink()
        if self.wal_path.exists():
            self.wal_path.unlink()
        self.log_start, self.prev_term = snapshot_index + 1, snapshot_term
        with open(self.wal_path, "wb") as f:
            f.write(self._record({"start": self.log_start, "prev_term": self.prev_term}))
            for e in entries or []:
                f.write(self._record({"e": entry_to_dict(e)}))
            f.flush()
            os.fsync(f.fileno())
            note_synced(self.wal_path, f.tell())
        self.entries = list(entries or [])
        self.cmeta = ConsensusMetadata(term, None, config)
        self.cmeta.save(self.cmeta_path, fsync=True)

    def load(self, initial_config: RaftConfig) -> tuple[PersistentState, bytes | None, int, int]:
        """Read everything back: (state for the core, snapshot data, snapshot index, snapshot term).

        A missing cmeta (lost to a power cut with fsync off) starts from term 0 and the config the
        replica was created with. A corrupt cmeta raises CmetaCorruption: never guess a term."""
        try:
            self.cmeta = ConsensusMetadata.load(self.cmeta_path)
        except FileNotFoundError:
            log.warning("%s: no cmeta; starting from the initial config", self.tablet_id)
            self.cmeta = ConsensusMetadata(0, None, initial_config)
        snap, snap_index, snap_term = None, 0, 0
        if self.snapshot_path.exists():
            d = json.loads(self.snapshot_path.read_bytes())
            snap, snap_index, snap_term = d["data"].encode(), int(d["index"]), int(d["term"])
        self.log_start, self.prev_term = snap_index + 1, snap_term
        entries: list[Entry] = []
        good_len = 0
        if self.wal_path.exists():
            with open(self.wal_path, "rb") as f:
                data = f.read()
            pos = 0
            while pos < len(data):
                nl = data.find(b"\n", pos)
                if nl < 0:
                    break
                line = data[pos:nl]
                crc, _, body = line.partition(b" ")
                try:
                    if int(crc, 16) != zlib.crc32(body):
                        break
                    rec = json.loads(body)
                except ValueError:
                    break
                if "start" in rec:
                    self.log_start, self.prev_term = int(rec["start"]), int(rec["prev_term"])
                elif "t" in rec:
                    cut = int(rec["t"])
                    entries = [e for e in entries if e.index < cut]
                else:
                    e = entry_from_dict(rec["e"])
                    entries = [x for x in entries if x.index < e.index]
                    entries.append(e)
                pos = nl + 1
                good_len = pos
            if good_len < len(data):
                log.warning("%s: dropping %d bytes of torn WAL tail", self.tablet_id, len(data) - good_len)
                os.truncate(self.wal_path, good_len)
        entries = [e for e in entries if e.index >= self.log_start]
        if snap_index and (self.log_start != snap_index + 1):
            self.log_start, self.prev_term = snap_index + 1, snap_term
        # keep only a contiguous run starting at log_start
        contiguous: list[Entry] = []
        for e in entries:
            if e.index != self.log_start + len(contiguous):
                break
            contiguous.append(e)
        self.entries = contiguous
        state = PersistentState(self.cmeta.hard_state, self.cmeta.committed_config, tuple(contiguous),
                                self.log_start, self.prev_term, snap_index)
        return state, snap, snap_index, snap_term

    # ------------------------------------------------------------------ write path
    @staticmethod
    def _record(rec: dict) -> bytes:
        body = json.dumps(rec, separators=(",", ":")).encode()
        return f"{zlib.crc32(body):08x} ".encode() + body + b"\n"

    def persist(self, rd: Ready) -> None:
        """Truncate, append, save cmeta, then one sync: what Ready requires before sending."""
        if rd.truncate_from is None and not rd.entries and rd.hard_state is None and rd.committed_config is None:
            return
        if rd.truncate_from is not None or rd.entries:
            if self._f is None:
                self._f = open(self.wal_path, "ab")  # noqa: SIM115 - kept open across calls
            buf = bytearray()
            if rd.truncate_from is not None:
                buf += self._record({"t": rd.truncate_from})
                self.entries = [e for e in self.entries if e.index < rd.truncate_from]
            for e in rd.entries:
                buf += self._record({"e": entry_to_dict(e)})
            self.entries = [e for e in self.entries if not rd.entries or e.index < rd.entries[0].index]
            self.entries.extend(rd.entries)
            self._f.write(buf)
            self._f.flush()
            if self.fsync:
                os.fsync(self._f.fileno())
                note_synced(self.wal_path, self._f.tell())
        if rd.hard_state is not None or rd.committed_config is not None:
            assert self.cmeta is not None
            hs = rd.hard_state or self.cmeta.hard_state
            cfg = rd.committed_config or self.cmeta.committed_config
            self.cmeta = ConsensusMetadata(hs.term, hs.voted_for, cfg)
            self.cmeta.save(self.cmeta_path, fsync=self.fsync)

    def save_cmeta(self, hard_state: HardState, config: RaftConfig) -> None:
        self.cmeta = ConsensusMetadata(hard_state.term, hard_state.voted_for, config)
        self.cmeta.save(self.cmeta_path, fsync=True)

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def destroy_data(self, keep_cmeta: bool) -> None:
        """Remove the WAL and snapshot (and the cmeta unless tombstoning)."""
        self.close()
        if self.wal_dir.exists():
            shutil.rmtree(self.wal_dir, ignore_errors=True)
        for p in [self.snapshot_path] + ([] if keep_cmeta else [self.cmeta_path]):
            if p.exists():
                p.unlink()
                if p == self.cmeta_path:
                    note_removed(p)
        self.entries = []


def read_cmeta(layout: FsLayout, tablet_id: str) -> ConsensusMetadata:
    """For the tools: the replica's cmeta, or FileNotFoundError / CmetaCorruption."""
    return ConsensusMetadata.load(layout.cmeta(tablet_id))


def cmeta_path(layout: FsLayout, tablet_id: str) -> Path:
    return layout.cmeta(tablet_id)
