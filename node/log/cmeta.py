"""Consensus metadata: current term, voted-for and the committed configuration, in one small file.

Written atomically (node.log.durable.atomic_write); a CRC guards the content so a damaged file is a
clear error at start, never a silently reset term (which would allow a second vote in a term).
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

from faultline.node.consensus.types import HardState, MemberType, Peer, RaftConfig
from faultline.node.log.durable import atomic_write

MAGIC = b"FLCMETA1\n"


class CmetaCorruption(Exception):
    """The cmeta file exists but cannot be trusted; the replica must not start from it."""


def config_to_json(c: RaftConfig) -> dict:
    return {
        "opid_index": c.opid_index,
        "peers": [
            {"uuid": p.uuid, "address": p.address, "member_type": p.member_type.value, "promote": p.promote}
            for p in c.peers
        ],
    }


def config_from_json(d: dict) -> RaftConfig:
    return RaftConfig(
        tuple(
            Peer(
                p["uuid"],
                p.get("address", ""),
                MemberType(p.get("member_type", "VOTER")),
                bool(p.get("promote", False)),
            )
            for p in d["peers"]
        ),
        int(d.get("opid_index", -1)),
    )


@dataclass(frozen=True)
class ConsensusMetadata:
    term: int
    voted_for: str | None
    committed_config: RaftConfig

    @property
    def hard_state(self) -> HardState:
        return HardState(self.term, self.voted_for)

    def to_bytes(self) -> bytes:
        body = json.dumps(
            {
                "term": self.term,
                "voted_for": self.voted_for,
                "committed_config": config_to_json(self.committed_config),
            },
            sort_keys=True,
        ).encode()
        return MAGIC + body + b"\n" + f"{zlib.crc32(body):08x}\n".encode()

    @staticmethod
    def from_bytes(data: bytes, where: str = "cmeta") -> ConsensusMetadata:
        if not data.startswith(MAGIC):
            raise CmetaCorruption(f"{where}: bad header (empty or not a cmeta file, {len(data)} bytes)")
        try:
            body, crc, tail = data[len(MAGIC) :].split(b"\n")
            if tail != b"" or int(crc, 16) != zlib.crc32(body):
                raise ValueError("checksum mismatch")
            d = json.loads(body)
            return ConsensusMetadata(int(d["term"]), d["voted_for"], config_from_json(d["committed_config"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise CmetaCorruption(f"{where}: corrupt ({exc})") from None

    def save(self, path: str | os.PathLike, fsync: bool = True) -> None:
        """Atomic replace: temporary file, fsync, rename, fsync the directory (no fsync if fsync=False)."""
        atomic_write(path, self.to_bytes(), fsync=fsync)

    @staticmethod
    def load(path: str | os.PathLike) -> ConsensusMetadata:
        """Raises FileNotFoundError if absent, CmetaCorruption if damaged."""
        p = Path(path)
        return ConsensusMetadata.from_bytes(p.read_bytes(), str(p))
