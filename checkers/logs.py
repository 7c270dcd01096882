"""The log checker: lines in the nodes' logs that mean a crash, corrupted data or a broken invariant.

After Jepsen's log-file-pattern checker. Each DB declares its patterns (db.api.LogPatterns); the analysis
layer reads the run's node logs and hands their lines in, so this module reads no files. A match is
invalid unless its pattern is expected under a fault that ran: a DB reporting a checksum error after a
fault corrupted its file has detected the damage, which is what it should do. The history's nemesis ops
say which faults ran: an op whose `f` is the fault's name, or start-<name>, and that did not fail.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from faultline.checkers.ops import pairs
from faultline.core import Op

LINE_CHARS = 300  # a matched line is kept up to this many characters
MAX_LISTED = 200  # matches listed per kind (unexpected, expected); the counts are exact

# the timestamps a line may start with or carry: ISO-like (Python logging, PostgreSQL, etcd's capnslog and
# zap) and Redis's "12 Jan 2024 10:00:00.123"
_ISO = re.compile(r"(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:[.,](\d+))?")
_REDIS = re.compile(
    r"\b(\d{1,2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}) "
    r"(\d{2}:\d{2}:\d{2})(?:\.(\d+))?"
)
_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
    )
}


class Pattern(Protocol):
    """What the checker needs of a pattern (db.api.LogPattern has it)."""

    @property
    def name(self) -> str: ...

    @property
    def regex(self) -> str: ...

    @property
    def meaning(self) -> str: ...

    @property
    def expected_under(self) -> frozenset[str]: ...


# node -> file (relative to the node's directory) -> its lines
NodeLogs = Mapping[str, Mapping[str, Iterable[str]]]


@dataclass
class _Compiled:
    name: str
    regex: re.Pattern[str]
    meaning: str
    expected_under: frozenset[str]


def line_time(line: str) -> str | None:
    """The timestamp a line carries, as ISO 8601 without a zone (the node's own clock), or None."""
    m = _ISO.search(line[:120])
    if m:
        frac = f".{m.group(3)[:6]}" if m.group(3) else ""
        return f"{m.group(1)}T{m.group(2)}{frac}"
    m = _REDIS.search(line[:80])
    if m:
        frac = f".{m.group(5)[:6]}" if m.group(5) else ""
        return f"{m.group(3)}-{_MONTHS[m.group(2)]:02d}-{int(m.group(1)):02d}T{m.group(4)}{frac}"
    return None


def faults_that_ran(history: list[Op]) -> set[str]:
    """The fault names the nemesis ops show ran: each op's `f` and, for start-X, X. An op that failed did
    nothing; an invocation with no completion may have."""
    ran = {p.f for p in pairs(history, nemesis=True) if isinstance(p.f, str) and p.type != "fail"}
    return ran | {f.removeprefix("start-") for f in ran}


class LogPatternChecker:
    """Searches every line of the given node logs for the patterns; a Checker (check(test, history, opts)).

    Valid is True when no line matched a pattern that no fault which ran explains; the result lists each
    match with its node, file, line number, text (truncated) and time when the line carries one."""

    def __init__(self, patterns: Sequence[Pattern], logs: NodeLogs) -> None:
        names = [p.name for p in patterns]
        if len(set(names)) != len(names):
            raise ValueError(f"log patterns have duplicate names: {sorted(names)}")
        self.patterns = [
            _Compiled(p.name, _compile(p), p.meaning, frozenset(p.expected_under)) for p in patterns
        ]
        self.logs = logs

    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        ran = faults_that_ran(history)
        unexpected: list[dict[str, Any]] = []
        expected: list[dict[str, Any]] = []
        counts = {"unexpected": 0, "expected": 0}
        files = lines_read = 0
        for node in sorted(self.logs):
            for path in sorted(self.logs[node]):
                files += 1
                last_time: str | None = None
                last_stamped = ""
                for number, raw in enumerate(self.logs[node][path], 1):
                    lines_read += 1
                    line = raw.rstrip("\r\n")
                    t = line_time(line)
                    if t is not None:
                        last_time, last_stamped = t, line
                    hit = [p for p in self.patterns if p.regex.search(line)]
                    if not hit:
                        continue
                    explained = sorted({f for p in hit for f in p.expected_under & ran})
                    match = {
                        "node": node,
                        "file": path,
                        "line": number,
                        "text": _short(line),
                        "patterns": [p.name for p in hit],
                        "meaning": hit[0].meaning,
                    }
                    if t is not None:
                        match["time"] = t
                    elif last_time is not None:
                        # the line carries no time (a traceback's first line): the log record it belongs to
                        match["after"], match["after_text"] = last_time, _short(last_stamped)
                    kind, out = ("expected", expected) if explained else ("unexpected", unexpected)
                    if explained:
                        match["expected_under"] = explained
                    counts[kind] += 1
                    if len(out) < MAX_LISTED:
                        out.append(match)
        result: dict[str, Any] = {
            "valid": counts["unexpected"] == 0,
            "files": files,
            "lines": lines_read,
            "patterns": [p.name for p in self.patterns],
            "faults_ran": sorted(ran),
            "unexpected_match_count": counts["unexpected"],
            "expected_match_count": counts["expected"],
            "unexpected_matches": unexpected,
            "expected_matches": expected,
        }
        if files == 0:
            result["valid"] = "unknown"
            result["note"] = "no node logs to read (none were collected with this run)"
        return result


def _compile(p: Pattern) -> re.Pattern[str]:
    try:
        return re.compile(p.regex)
    except re.error as exc:
        raise ValueError(f"log pattern {p.name!r}: bad regular expression {p.regex!r}: {exc}") from None


def _short(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + "..."
