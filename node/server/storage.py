"""A replica's durable state: its WAL and consensus metadata (both from node/log), and a snapshot.

`ReplicaStorage.persist(ready)` does what `Ready` asks, in order: truncate, append (the WAL's
group commit syncs once for everything queued), save cmeta. With fsync off (`--fsync never` or
the `no-fsync` bug, Kudu's own default) nothing is synced, and node.log's power-loss simulation
can cut the files back to what an fsync would have kept.

The snapshot file (DIR/snapshots/<tablet>) holds the state machine at the snapshot's index, below which
the WAL starts: written by a tablet copy, by the replica's own periodic snapshots, and by a snapshot the
leader sent (`install_snapshot`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterable

from faultline.node.bugs import BugSet
from faultline.node.consensus import Entry, HardState, PersistentState, RaftConfig, Ready
from faultline.node.log import CmetaCorruption, ConsensusMetadata, Wal, WalCorruption, atomic_write
from faultline.node.log.durable import note_removed
from faultline.node.server.fs import FsLayout

log = logging.getLogger("faultline.node.storage")

__all__ = ["CmetaCorruption", "ReplicaStorage", "WalCorruption"]

WAIT_S = 60.0
# WAL segment size; tests make it tiny to exercise garbage collection
SEGMENT_BYTES = int(os.environ.get("FAULTLINE_WAL_SEGMENT_BYTES", str(8 << 20)))


class ReplicaStorage:
    """WAL + cmeta + snapshot of one tablet replica under a node's data directory."""

    def __init__(
        self, layout: FsLayout, tablet_id: str, fsync: bool = True, bugs: Iterable[str] = ()
    ) -> None:
        self.layout = layout
        self.tablet_id = tablet_id
        self.fsync = fsync
        self.bugs = BugSet(bugs)
        self.wal_dir = layout.wal_dir(tablet_id)
        self.cmeta_path = layout.cmeta(tablet_id)
        self.snapshot_path = layout.snapshot(tablet_id)
        self.wal: Wal | None = None
        self.cmeta: ConsensusMetadata | None = None

    def _open_wal(self, start_index: int, prev_term: int) -> Wal:
        return Wal(
            self.wal_dir,
            fsync="always" if self.fsync else "never",
            bugs=self.bugs,
            start_index=start_index,
            start_prev_term=prev_term,
            segment_size=SEGMENT_BYTES,
        )

    # ------------------------------------------------------------------ create / load
    def create(
        self,
        config: RaftConfig,
        term: int = 0,
        snapshot: bytes | None = None,
        snapshot_index: int = 0,
        snapshot_term: int = 0,
        entries: list[Entry] | None = None,
    ) -> None:
        """Write a fresh replica: optional snapshot, a WAL holding `entries`, then the cmeta."""
        self.close()
        if self.wal_dir.exists():
            shutil.rmtree(self.wal_dir)
        self.cmeta_path.parent.mkdir(parents=True, exist_ok=True)
        self.snapshot_path.parent.mkdir(parents=True, exist_ok=True)
        if snapshot is not None:
            atomic_write(
                self.snapshot_path,
                json.dumps(
                    {"index": snapshot_index, "term": snapshot_term, "data": snapshot.decode()}
                ).encode(),
                fsync=True,
            )
        elif self.snapshot_path.exists():
            self.snapshot_path.unlink()
        wal = Wal(
            self.wal_dir,
            fsync="always",
            start_index=snapshot_index + 1,
            start_prev_term=snapshot_term,
            segment_size=SEGMENT_BYTES,
        )
        try:
            if entries:
                wal.append_sync(list(entries), timeout=WAIT_S)
        finally:
            wal.close()
        self.cmeta = ConsensusMetadata(term, None, config)
        self.cmeta.save(self.cmeta_path, fsync=True)

    def load(self, initial_config: RaftConfig) -> tuple[PersistentState, bytes | None, int, int]:
        """Read everything back: (state for the core, snapshot data, snapshot index, snapshot term).

        A missing cmeta (lost to a power cut with fsync off) starts from term 0 and the config the
        replica was created with. A corrupt cmeta or WAL raises: never guess a term or drop entries."""
        try:
            self.cmeta = ConsensusMetadata.load(self.cmeta_path)
        except FileNotFoundError:
            log.warning("%s: no cmeta; starting from the initial config", self.tablet_id)
            self.cmeta = ConsensusMetadata(0, None, initial_config)
        snap, snap_index, snap_term = None, 0, 0
        if self.snapshot_path.exists():
            d = json.loads(self.snapshot_path.read_bytes())
            snap, snap_index, snap_term = d["data"].encode(), int(d["index"]), int(d["term"])
        self.wal = self._open_wal(snap_index + 1, snap_term)
        entries = self.wal.entries()
        state = PersistentState(
            self.cmeta.hard_state,
            self.cmeta.committed_config,
            tuple(entries),
            self.wal.first_index,
            self.wal.prev_term,
            snap_index,
        )
        return state, snap, snap_index, snap_term

    # ------------------------------------------------------------------ write path
    def persist(self, rd: Ready) -> None:
        """Truncate, append (one sync for the batch), save cmeta: what Ready requires before sending."""
        if self.wal is None:
            raise RuntimeError(f"{self.tablet_id}: storage is not open")
        if rd.truncate_from is not None or rd.entries:
            self.wal.write(rd.truncate_from, rd.entries, timeout=WAIT_S)
        if rd.hard_state is not None or rd.committed_config is not None:
            assert self.cmeta is not None
            hs = rd.hard_state or self.cmeta.hard_state
            cfg = rd.committed_config or self.cmeta.committed_config
            self.cmeta = ConsensusMetadata(hs.term, hs.voted_for, cfg)
            self.cmeta.save(self.cmeta_path, fsync=self.fsync)

    def write_snapshot(self, data: bytes, index: int, term: int) -> None:
        """Persist the state machine at `index`; the WAL below it may then be collected."""
        atomic_write(
            self.snapshot_path,
            json.dumps({"index": index, "term": term, "data": data.decode()}).encode(),
            fsync=self.fsync,
        )

    def install_snapshot(self, data: bytes, index: int, term: int) -> None:
        """Replace the state machine and the log with the leader's snapshot: the snapshot first, then an
        empty WAL starting after it; the same Ready's `persist` then saves the cmeta with the snapshot's
        config. A crash in between restarts from the snapshot with at most a stale log, which the leader
        replaces again."""
        self.close()
        self.snapshot_path.parent.mkdir(parents=True, exist_ok=True)
        self.write_snapshot(data, index, term)
        if self.wal_dir.exists():
            shutil.rmtree(self.wal_dir)
        self.wal = self._open_wal(index + 1, term)

    def gc(self, below_index: int) -> int:
        """Drop closed WAL segments below `below_index`; returns the WAL's new first index."""
        return self.wal.gc(below_index) if self.wal is not None else below_index

    def entries_after(self, index: int) -> list[Entry]:
        """The WAL's entries with index > `index` (a tablet copy source sends these)."""
        if self.wal is None:
            return []
        return self.wal.read_from(max(index + 1, self.wal.first_index))

    def save_cmeta(self, hard_state: HardState, config: RaftConfig) -> None:
        self.cmeta = ConsensusMetadata(hard_state.term, hard_state.voted_for, config)
        self.cmeta.save(self.cmeta_path, fsync=True)

    def close(self) -> None:
        if self.wal is not None:
            self.wal.close()
            self.wal = None

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
