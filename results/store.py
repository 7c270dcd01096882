"""The run store: one directory per run, `latest` links, and an index of runs.

Layout (docs/results.md)::

    STORE/<test-name>/<YYYYMMDDTHHMMSS.fffZ>/   test.json history.jsonl results.json history.parquet report.html ...
    STORE/latest -> <test-name>/<stamp>          STORE/<test-name>/latest -> <stamp>
    STORE/index.jsonl                            one summary line per finished run (appended, last line wins)
    STORE/campaign.json, STORE/campaign.shard-I-of-N.json   a campaign's progress (controller/campaign.py)

The index exists so that listing a campaign of thousands of runs never opens a history; a run that
crashed before `finish` has no index line, so `Store.runs()` also picks up run directories the index
does not know, from their small `test.json`.

Several processes, on one host or on several sharing the store over NFS, may write runs into it at once:
a run directory is claimed by `mkdir` (atomic, also on NFS), so two runs never get the same id, and every
file is written under a temporary name of its own and renamed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from faultline.core import Op

STAMP_RE = re.compile(r"^\d{8}T\d{6}\.\d{3}Z$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
INDEX_NAME = "index.jsonl"
# a campaign's progress: campaign.json, or one file per shard when hosts split it (--shard I/N), so shards
# sharing a store never write the same file
CAMPAIGN_STATE = "campaign.json"
SHARD_STATE_RE = re.compile(r"^campaign\.shard-(\d+)-of-(\d+)\.json$")


class StoreError(Exception):
    """A store or run directory that cannot be used (missing, not a store, bad name)."""


def now_stamp(now: datetime | None = None) -> str:
    """The run directory name: UTC time to the millisecond, sortable as text."""
    now = now or datetime.now(UTC)
    return now.strftime("%Y%m%dT%H%M%S.") + f"{now.microsecond // 1000:03d}Z"


def valid_name(name: object) -> bool:
    return isinstance(name, str) and bool(NAME_RE.match(name)) and name not in ("latest",)


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in value.split(",") if v]
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return [str(value)]


def _read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _read_object(path: Path) -> dict[str, Any] | str:
    """A JSON object from `path`, or a short reason why the file is not one (for a run listed as damaged)."""
    try:
        data = _read_json(path)
    except OSError as exc:
        return f"{path.name}: {exc.strerror or exc}"
    except ValueError as exc:
        return f"{path.name} is not valid JSON: {exc}"
    if not isinstance(data, dict):
        return f"{path.name} is not a JSON object"
    return data


def campaign_state_name(shard: tuple[int, int] | None = None) -> str:
    """The progress file of a campaign, or of shard (i, n) of it."""
    return CAMPAIGN_STATE if shard is None else f"campaign.shard-{shard[0]}-of-{shard[1]}.json"


def campaign_state_paths(root: Path | str) -> list[Path]:
    """Every campaign progress file in a store: campaign.json first, then the shards' in order."""
    root = Path(root)
    try:
        shards = sorted(
            (tuple(int(g) for g in m.groups()), p)
            for p in root.iterdir()
            if (m := SHARD_STATE_RE.match(p.name)) and p.is_file()
        )
    except OSError:
        shards = []
    whole = root / CAMPAIGN_STATE
    return ([whole] if whole.is_file() else []) + [p for _, p in shards]


def temp_path(path: Path) -> Path:
    """A temporary name beside `path` that no other writer uses: hosts sharing a store (NFS) may have the
    same pid, and threads of one process share theirs."""
    return path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def _write_json_atomic(path: Path, data: Any) -> None:
    """Readers (the web view, a concurrent score) never see half a file."""
    tmp = temp_path(path)
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True, default=str)
        fh.write("\n")
    os.replace(tmp, path)


def _symlink_atomic(link: Path, target: str) -> None:
    tmp = temp_path(link)
    os.symlink(target, tmp)
    os.replace(tmp, link)


@dataclass
class RunInfo:
    """One line of the index: what a run was and how it ended, without its history."""

    run_id: str  # "<test-name>/<stamp>", also the run's path relative to the store
    test_name: str
    stamp: str
    workload: str | None = None
    nemesis: list[str] = field(default_factory=list)
    bugs: list[str] = field(default_factory=list)
    seed: int | None = None
    verdict: bool | str | None = None  # True / False / "unknown"; None if the run never finished
    duration_s: float | None = None
    ops: int | None = None  # history lines
    start_time: str | None = None
    status: str = (
        "finished"  # finished | incomplete (no results.json) | damaged (unreadable test/results.json)
    )
    problem: str | None = None  # why a damaged run is damaged

    @property
    def nemesis_label(self) -> str:
        return ",".join(self.nemesis) if self.nemesis else "none"

    @property
    def bug_label(self) -> str:
        return ",".join(self.bugs) if self.bugs else "none"

    @property
    def verdict_label(self) -> str:
        if self.verdict is True:
            return "valid"
        if self.verdict is False:
            return "invalid"
        if self.verdict is None:
            return "unchecked" if self.status != "damaged" else "damaged"
        return "unknown"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class RunDir:
    """One run's directory and the files in it; `finish` is the single place a run becomes complete."""

    def __init__(self, path: Path | str, store: Store | None = None) -> None:
        self.path = Path(path)
        self.store = store

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # paths ---------------------------------------------------------------------------------------
    @property
    def test_path(self) -> Path:
        return self.path / "test.json"

    @property
    def history_path(self) -> Path:
        return self.path / "history.jsonl"

    @property
    def results_path(self) -> Path:
        return self.path / "results.json"

    @property
    def parquet_path(self) -> Path:
        return self.path / "history.parquet"

    @property
    def report_path(self) -> Path:
        return self.path / "report.html"

    @property
    def timeline_path(self) -> Path:
        return self.path / "timeline.html"

    @property
    def counterexample_path(self) -> Path:
        return self.path / "counterexample.html"

    @property
    def plots_dir(self) -> Path:
        return self.path / "plots"

    @property
    def nodes_dir(self) -> Path:
        return self.path / "nodes"

    @property
    def log_path(self) -> Path:
        return self.path / "faultline.log"

    @property
    def run_id(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}"

    # contents ------------------------------------------------------------------------------------
    def load_test(self) -> dict[str, Any]:
        return _read_json(self.test_path)

    def load_results(self) -> dict[str, Any] | None:
        if not self.results_path.exists():
            return None
        return _read_json(self.results_path)

    def history(self) -> list[Op]:
        """The ops: from history.parquet when it is at least as new as history.jsonl, else from the JSONL
        (a truncated last line, as a crashed run leaves, is dropped with a warning)."""
        from faultline.history import parquet

        if self.parquet_is_fresh():
            return parquet.read_history_parquet(self.parquet_path)
        return parquet.read_jsonl(self.history_path).ops

    def parquet_is_fresh(self) -> bool:
        if not self.parquet_path.exists():
            return False
        if not self.history_path.exists():
            return True
        return self.parquet_path.stat().st_mtime_ns >= self.history_path.stat().st_mtime_ns

    def ensure_parquet(self) -> Path:
        """Writes history.parquet for a run that lacks one (old or crashed runs); returns its path."""
        from faultline.history import parquet

        if not self.parquet_is_fresh():
            if not self.history_path.exists():
                raise StoreError(f"{self.path}: no history.jsonl")
            parquet.write_history_parquet(self.history_path, self.parquet_path)
        return self.parquet_path

    def info(self) -> RunInfo:
        """The index line for this run, from test.json and results.json (never the history)."""
        info = RunInfo(run_id=self.run_id, test_name=self.path.parent.name, stamp=self.path.name)
        test = _read_object(self.test_path)
        if isinstance(test, str):
            info.status, info.problem = "damaged", test
            return info
        workload = test.get("workload")
        info.workload = workload if isinstance(workload, str) or workload is None else str(workload)
        info.nemesis = _as_list(test.get("nemesis"))
        info.bugs = _as_list(test.get("bugs"))
        seed = test.get("seed")
        info.seed = seed if isinstance(seed, int) else None
        start = test.get("start_time")
        info.start_time = start if isinstance(start, str) else None
        results = _read_object(self.results_path) if self.results_path.exists() else None
        if isinstance(results, str):
            info.status, info.problem = "damaged", results
        elif results is None:
            info.status = "incomplete"
        else:
            valid = results.get("valid", "unknown")
            info.verdict = valid if valid in (True, False) else "unknown"
            if results.get("unchecked") is True:  # e.g. synthetic runs: nothing has checked them yet
                info.verdict = None
            meta = results.get("_run", {}) if isinstance(results.get("_run"), dict) else {}
            duration, ops = meta.get("duration_s"), meta.get("ops")
            info.duration_s = (
                duration if isinstance(duration, int | float) and not isinstance(duration, bool) else None
            )
            info.ops = ops if isinstance(ops, int) and not isinstance(ops, bool) else None
        return info

    def finish(self, results: Mapping[str, Any]) -> RunInfo:
        """Ends a run: results.json, history.parquet and the store index; nothing else.

        `results` is the checkers' output (`valid` plus one entry per checker). Run facts that the index
        needs (duration, op count) are added under `_run` so listing runs never opens a history. The
        report and the other pages are the caller's to publish (`results.publish.publish`), so storing a
        verdict never waits on, or fails with, drawing it.
        """
        from faultline.history import parquet

        data = dict(results)
        data.setdefault("valid", "unknown")
        meta: dict[str, Any] = {}
        if self.history_path.exists():
            stats = parquet.write_history_parquet(self.history_path, self.parquet_path)
            meta = {"ops": stats.rows, "duration_s": stats.duration_s, "dropped_lines": stats.dropped_lines}
        data["_run"] = {**(data.get("_run") or {}), **meta, "finished": datetime.now(UTC).isoformat()}
        _write_json_atomic(self.results_path, data)
        info = self.info()
        if self.store is not None:
            self.store.record(info)
        return info


class Store:
    """A directory of runs; many writers (parallel runs, shards of a campaign on several hosts) may share it."""

    def __init__(self, root: Path | str, *, create: bool = True) -> None:
        self.root = Path(root)
        if not self.root.exists():
            if not create:
                raise StoreError(f"store {self.root} does not exist")
            # another writer (a campaign's other shard) may make it at the same moment
            with contextlib.suppress(FileExistsError):
                self.root.mkdir(parents=True, exist_ok=True)
        if not self.root.is_dir():
            raise StoreError(f"store {self.root} is not a directory")

    @property
    def index_path(self) -> Path:
        return self.root / INDEX_NAME

    def create_run(self, test_name: str, test: Mapping[str, Any], *, stamp: str | None = None) -> RunDir:
        """Makes STORE/<test-name>/<stamp>/, writes test.json and points the `latest` links at it."""
        if not valid_name(test_name):
            raise StoreError(f"bad test name {test_name!r}: use letters, digits and ._+- (max 128)")
        parent = self.root / test_name
        parent.mkdir(parents=True, exist_ok=True)
        when = datetime.now(UTC)
        for _ in range(1000):
            name = stamp or now_stamp(when)
            try:
                (parent / name).mkdir()
                break
            except FileExistsError:
                if stamp is not None:
                    raise StoreError(f"run {test_name}/{stamp} already exists") from None
                when = when.fromtimestamp(when.timestamp() + 0.001, UTC)
        else:  # pragma: no cover - a thousand runs in one millisecond
            raise StoreError(f"no free run directory under {parent}")
        run = RunDir(parent / name, self)
        body = dict(test)
        body.setdefault("name", test_name)
        _write_json_atomic(run.test_path, body)
        _symlink_atomic(parent / "latest", name)
        _symlink_atomic(self.root / "latest", f"{test_name}/{name}")
        return run

    def run_dirs(self) -> Iterator[RunDir]:
        """Every run directory, whatever its state, oldest first."""
        for test_dir in sorted(p for p in self.root.iterdir() if p.is_dir() and not p.is_symlink()):
            if not valid_name(test_dir.name):
                continue
            for run in sorted(test_dir.iterdir()):
                if run.is_dir() and not run.is_symlink() and STAMP_RE.match(run.name):
                    yield RunDir(run, self)

    def record(self, info: RunInfo) -> None:
        """Appends a run's summary to the index (locked, so parallel runs don't interleave lines)."""
        line = json.dumps(info.to_dict(), sort_keys=True) + "\n"
        with open(self.index_path, "a", encoding="utf-8") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                fh.write(line)
                fh.flush()
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def read_index(self) -> dict[str, RunInfo]:
        out: dict[str, RunInfo] = {}
        if not self.index_path.exists():
            return out
        fields = set(RunInfo.__dataclass_fields__)
        with open(self.index_path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    raw = json.loads(line)
                    info = RunInfo(**{k: v for k, v in raw.items() if k in fields})
                except (ValueError, TypeError):
                    continue  # a torn last line from a crash; the run is rediscovered from its directory
                out[info.run_id] = info
        return out

    def runs(self) -> list[RunInfo]:
        """Every run, newest first: index lines for finished runs, test.json for the rest."""
        index = self.read_index()
        out = []
        for run in self.run_dirs():
            info = index.get(run.run_id)
            if info is None or (info.status != "finished" and run.results_path.exists()):
                info = run.info()
            out.append(info)
        out.sort(key=lambda i: (i.stamp, i.run_id), reverse=True)
        return out

    def rebuild_index(self) -> int:
        """Rewrites the index from the run directories (after copying runs in by hand)."""
        infos = [run.info() for run in self.run_dirs()]
        tmp = temp_path(self.index_path)
        with open(tmp, "w", encoding="utf-8") as fh:
            for info in infos:
                fh.write(json.dumps(info.to_dict(), sort_keys=True) + "\n")
        os.replace(tmp, self.index_path)
        return len(infos)

    def run(self, run_id: str) -> RunDir:
        """The run `<test-name>/<stamp>`, refusing any id that would leave the store."""
        parts = run_id.strip("/").split("/")
        if len(parts) != 2 or not valid_name(parts[0]) or not STAMP_RE.match(parts[1]):
            raise StoreError(f"bad run id {run_id!r}")
        path = self.root / parts[0] / parts[1]
        if not path.is_dir():
            raise StoreError(f"no run {run_id} in {self.root}")
        return RunDir(path, self)


def _holds_runs(path: Path) -> bool:
    """A test directory: it holds at least one `<stamp>/` run directory."""
    try:
        return any(STAMP_RE.match(c.name) and c.is_dir() and not c.is_symlink() for c in path.iterdir())
    except OSError:
        return False


def find_stores(root: Path | str, max_dirs: int = 100_000) -> list[Path]:
    """Every store at or below `root`, at any depth (a campaign's store sits inside the main one): the
    directories holding `<test-name>/<stamp>/` runs. Run directories, hidden folders and links are not
    entered, and the walk stops after `max_dirs` directories."""
    found: list[Path] = []
    todo = [Path(root)]
    seen = 0
    while todo and seen < max_dirs:
        here = todo.pop()
        seen += 1
        try:
            children = sorted(
                c
                for c in here.iterdir()
                if c.is_dir() and not c.is_symlink() and not c.name.startswith((".", "_"))
            )
        except OSError:
            continue
        tests = [c for c in children if valid_name(c.name) and _holds_runs(c)]
        if tests:
            found.append(here)
        todo.extend(reversed([c for c in children if c not in tests and not STAMP_RE.match(c.name)]))
    return sorted(found)


def open_run(path: Path | str) -> RunDir:
    """A RunDir for an existing run directory (or a `latest` link); its store is the grandparent."""
    p = Path(path)
    if not p.exists():
        raise StoreError(f"run directory {p} does not exist")
    p = p.resolve()
    if not p.is_dir():
        raise StoreError(f"{p} is not a run directory")
    if not (p / "test.json").exists() and not (p / "history.jsonl").exists():
        raise StoreError(f"{p} is not a run directory (no test.json or history.jsonl)")
    store = None
    if STAMP_RE.match(p.name):
        with contextlib.suppress(StoreError):
            store = Store(p.parent.parent, create=False)
    return RunDir(p, store)
