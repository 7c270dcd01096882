"""The write-ahead log, consensus metadata, and simulated power loss (docs/consensus.md)."""

from faultline.node.log.cmeta import CmetaCorruption, ConsensusMetadata
from faultline.node.log.durable import atomic_write, fsync_dir, note_synced
from faultline.node.log.power_loss import CutReport, cut_to_synced
from faultline.node.log.wal import RecoveryReport, Wal, WalClosed, WalCorruption, WalStats, encode_entry

__all__ = [
    "CmetaCorruption",
    "ConsensusMetadata",
    "CutReport",
    "RecoveryReport",
    "Wal",
    "WalClosed",
    "WalCorruption",
    "WalStats",
    "atomic_write",
    "cut_to_synced",
    "encode_entry",
    "fsync_dir",
    "note_synced",
]
