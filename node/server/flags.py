"""Runtime flags of one server process: what an operator or a test changes while the server runs, the way
Kudu's `set_flag` does. They live in memory only, so a restart brings back the defaults (a fault armed
on a process is gone once that process died of it).

- `enable_leader_failure_detection`: when false, no replica of this server starts an election on its
  own; elections happen only when asked (RunLeaderElection). Kudu's integration tests turn it off to
  decide who campaigns and when.
- `consensus_max_batch_entries`: entries per AppendRequest a leader sends (Kudu bounds its batches by
  bytes, `consensus_max_batch_size_bytes`); a small batch makes a follower catch up over many round trips.
- `fault_crash_after_vote_fraction`: the chance that the process crashes right after it granted a vote
  (the grant is persisted, as far as the store persists it, and handed to the network first).
- `fault_crash_after_append_fraction`: the same, right after it acknowledged an AppendRequest that
  carried entries (they are persisted first).
  Crash points of this kind are how Kudu's tests hit the moments between two steps of a protocol.
- `fault_crash_tablet`: when set, the crash points fire only for this tablet's replica (a server hosts
  many, and any of them acknowledges entries all the time).
"""

from __future__ import annotations

from dataclasses import dataclass, fields


class FlagError(ValueError):
    """An unknown flag or a value of the wrong type; the message names the valid choices."""


def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise FlagError(f"expected true or false, got {text!r}")


def _parse_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise FlagError(f"expected a whole number of at least 1, got {text!r}") from None
    if value < 1:
        raise FlagError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _parse_fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise FlagError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise FlagError(f"expected a number between 0 and 1, got {text!r}")
    return value


def _text(value: bool | int | float | str) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass
class RuntimeFlags:
    enable_leader_failure_detection: bool = True
    consensus_max_batch_entries: int = 64
    fault_crash_after_vote_fraction: float = 0.0
    fault_crash_after_append_fraction: float = 0.0
    fault_crash_tablet: str = ""

    def as_text(self) -> dict[str, str]:
        """Every flag in the text form `set` takes and returns (what SetFlag carries)."""
        return {f.name: _text(getattr(self, f.name)) for f in fields(self)}

    def set(self, name: str, text: str) -> str:
        """Sets flag `name` from its text form; returns the old value as text."""
        names = [f.name for f in fields(self)]
        if name not in names:
            raise FlagError(f"unknown flag {name!r}; valid: {', '.join(names)}")
        old = getattr(self, name)
        if isinstance(old, bool):
            new: bool | int | float | str = _parse_bool(text)
        elif isinstance(old, str):
            new = text.strip()
        elif isinstance(old, int):
            new = _parse_count(text)
        else:
            new = _parse_fraction(text)
        setattr(self, name, new)
        return _text(old)
