"""file-corrupt: damage a data file of one node or a minority, after Jepsen's nemesis/file.

The files are those the DB names (db.api.DataFiles.data_files, globs by role, most telling first): the
fault damages a file of the first glob that matches on the node (the write-ahead log, while it has one).
Kinds (db.api.FILE_CORRUPTION_KINDS): `bitflip` flips 1-3 random bits, `truncate` cuts up to 1 KiB off
the end of the file's data, `zero` overwrites 1-64 bytes with zeros, and `rollback` copies back a copy
of the file taken by an earlier rollback op (the first one on a node takes the copy). Offsets fall in the
file's data (before its trailing zeros: a preallocated log is mostly zeros). Mode `stopped` kills the
node's DB, damages the file and starts it again, which makes the DB read what was damaged (a DB that then
refuses to start has found the damage: the completion says so, and the node stays down); `running`
damages it under the live process.

The nodes hit are drawn once, at the first op, from the run's nemesis rng: a fixed minority of each role,
so that damage never piles up on a majority of replicas, which no DB need survive. An op's `targets` (a
role the DB names, or all) and `subset` choose among them: `minority` hits each, `one` always the same one
of the target (so `file-<kind>`, which uses `one` only, damages one node of each role at most: a replica
group smaller than its role, like the store's three replicas of a tablet over five tablet servers, then
never loses two replicas to damage). Everything is planned on the controller
(`plan`, from the seeded rng) and carried out on the node by nemesis/filedamage.py through the backend,
and each completion records node, file, kind and offsets, so the run replays from its history.

The option `file_glob` (`--nemesis-opt file_glob=GLOB`, a campaign's `nemesis_opt = {file_glob = ...}`)
names the files instead of the DB's globs: a glob relative to each of the node's data directories
(db.api.DataFiles.data_dirs), or an absolute one on the node. It is checked when the test is built
(`check_file_glob`), and again once the DB is set up (`setup`): a glob that matches no file on any node
the fault may damage refuses the run (UsageError, exit 254) before the first fault.
"""

from __future__ import annotations

import json
import posixpath
import random
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from faultline import gen
from faultline.core import Op, Run
from faultline.core.errors import UsageError
from faultline.db.api import FILE_CORRUPTION_KINDS, DataFiles, Kill
from faultline.db.nodes import backend, role_nodes, targets_of
from faultline.nemesis import filedamage
from faultline.nemesis.api import NemesisPackage
from faultline.nemesis.base import NemesisError, Seeded, bring_back, done, log, pick_subset

MODES = ("running", "stopped")
MAX_FLIPS = 3
MAX_ZERO = 64
MAX_CUT = 1024
EXEC_TIMEOUT_S = 60.0
SNAPSHOT_DIR = "corrupt-snapshots"
NO_FILE = "no data file with data on this node yet"
FILE_GLOB = "file_glob"


def check_file_glob(value: Any) -> str | None:
    """Why `value` is no file_glob (None: it is one): a non-empty glob of files, one line, and when
    relative one that stays inside the data directories (no `..`)."""
    if not isinstance(value, str) or not value.strip():
        return f"a glob of files (relative to the node's data directories, or absolute), not {value!r}"
    if any(c in value for c in "\0\n\r"):
        return f"one line of text without NUL, not {value!r}"
    if value.endswith("/"):
        return f"a glob of files, not of directories (it ends with '/'): {value!r}"
    if not value.startswith("/") and ".." in value.split("/"):
        return f"a relative glob stays inside the data directories (no '..'): {value!r}"
    return None


def plan(kind: str, data_end: int, rng: random.Random) -> dict[str, Any]:
    """The damage of `kind` to a file whose data ends at byte `data_end` (> 0), drawn from `rng`: what
    filedamage.apply carries out, and what the history records."""
    if data_end <= 0:
        raise ValueError("a file with no data cannot be damaged")
    if kind == "bitflip":
        n = min(rng.randint(1, MAX_FLIPS), data_end)
        return {"flips": sorted([off, rng.randrange(8)] for off in rng.sample(range(data_end), n))}
    if kind == "zero":
        length = rng.randint(1, min(MAX_ZERO, data_end))
        return {"zero": [rng.randrange(data_end - length + 1), length]}
    if kind == "truncate":
        return {"truncate": data_end - rng.randint(1, min(MAX_CUT, data_end))}
    raise ValueError(f"unknown damage kind {kind!r}; valid: bitflip, zero, truncate")


def damage_bytes(data: bytes, damage: Mapping[str, Any]) -> bytes:
    """`data` as filedamage.apply leaves a file holding it (the same damage, in memory)."""
    out = bytearray(data)
    for off, bit in damage.get("flips", []):
        if off < len(out):
            out[off] ^= 1 << bit
    if "zero" in damage:
        start, length = damage["zero"]
        out[start : start + length] = bytes(len(out[start : start + length]))
    if "truncate" in damage:
        del out[int(damage["truncate"]) :]
    return bytes(out)


def pick_file(listing: Sequence[Sequence[Sequence[Any]]], rng: random.Random) -> tuple[str, int] | None:
    """A file with data from the first glob that has one (its path and data end), or None."""
    for files in listing:
        with_data = [(str(p), int(end)) for p, _size, end in files if int(end) > 0]
        if with_data:
            return rng.choice(with_data)
    return None


def declared_files(db: Any) -> str | None:
    """Why `db` cannot take a disk fault (None: it can): it declares no data files."""
    files = getattr(db, "data_files", None) if isinstance(db, DataFiles) else None
    if not files or not any(files.values()):
        return f"the {db.name} DB declares no data files (db.api.DataFiles.data_files) for a disk fault to damage"
    return None


class FileCorruptNemesis(Seeded):
    """`f` (file-corrupt, or file-<kind>) {kind, mode, subset, targets}: damages one data file on one node
    or on each of a fixed minority; heal starts every node it stopped."""

    salt = "file-corrupt"

    def __init__(self, f: str) -> None:
        self.fs = frozenset({f})
        self.doomed: list[str] | None = None  # the fixed minority of each role hit (drawn at the first op)
        self.snapshots: dict[str, tuple[str, str]] = {}  # node -> (file, its copy)
        self.stopped: set[str] = set()
        self.lock = threading.Lock()

    def setup(self, test: Run) -> FileCorruptNemesis:
        """The run's rng; with a user's file_glob, the refusal of a glob that matches no file on any node
        the fault may damage (the DB is set up by now, so its files exist)."""
        super().setup(test)
        pattern = self._user_glob(test)
        if pattern is not None:
            b = backend(test)
            nodes = [n for role in sorted(self._role_globs(test)) for n in b.nodes(role)]
            if not any(
                any(files)
                for n in nodes
                for files in self._run(test, n, {"op": "list", "globs": self._globs(test, n)})
            ):
                raise UsageError(
                    f"--nemesis-opt {FILE_GLOB}={pattern} matches no file on any of "
                    f"{', '.join(nodes) or 'the nodes'} (relative globs start at each data "
                    "directory, db.api.DataFiles.data_dirs)"
                )
        return self

    @staticmethod
    def _user_glob(test: Run) -> str | None:
        """The file_glob the user gave (None: the DB's own globs)."""
        opts = getattr(test.spec, "nemesis_opts", None) or {}
        return str(opts[FILE_GLOB]) if opts.get(FILE_GLOB) else None

    def _role_globs(self, test: Run) -> dict[str, tuple[str, ...]]:
        """role -> the templates of the files the fault may damage: the DB's data_files, or the user's
        file_glob under each of the role's data_dirs (absolute: as given)."""
        db = cast(DataFiles, test.db)
        pattern = self._user_glob(test)
        if pattern is None:
            return {role: tuple(globs) for role, globs in db.data_files.items() if globs}
        if pattern.startswith("/"):
            return {role: (pattern,) for role, dirs in db.data_dirs.items() if dirs}
        return {role: tuple(dirs) for role, dirs in db.data_dirs.items() if dirs}

    def invoke(self, test: Run, op: Op) -> Op:
        v = op.get("value") or {}
        kind, mode = str(v.get("kind", "bitflip")), str(v.get("mode", "stopped"))
        targets, subset = targets_of(test, v), str(v.get("subset", "one"))
        if kind not in FILE_CORRUPTION_KINDS or mode not in MODES:
            return done(op, kind="fail", error=f"unknown kind {kind!r} or mode {mode!r}")
        aimed = set(role_nodes(test, targets))
        pool = [n for n in self._doomed(test) if n in aimed]
        victims = pool[:1] if subset == "one" else sorted(pool)
        hits = [self._one(test, n, kind, mode) for n in victims]
        return done(op, {"kind": kind, "mode": mode, "targets": targets, "subset": subset, "damage": hits})

    def _doomed(self, test: Run) -> list[str]:
        """The nodes this fault may damage, drawn at its first op: a minority of each role with data files."""
        if self.doomed is None:
            b = backend(test)
            roles = self._role_globs(test)
            picks = [pick_subset(b.nodes(role), "minority", self.rng) for role in sorted(roles)]
            for p in picks:
                self.rng.shuffle(p)
            # the first of each role first: `one` always hits the same node of a target
            self.doomed = [p[i] for i in range(max(map(len, picks), default=0)) for p in picks if i < len(p)]
        return self.doomed

    def _one(self, test: Run, node: str, kind: str, mode: str) -> dict[str, Any]:
        """Damages one file on `node` (stopping the DB around it in mode `stopped`); what was done."""
        if kind == "rollback" and node not in self.snapshots:
            return {"node": node, **self._snapshot(test, node)}
        target = None if kind == "rollback" else self._pick(test, node)
        if kind != "rollback" and target is None:
            return {"node": node, "file": None, "note": NO_FILE}
        if mode == "stopped":
            with self.lock:
                self.stopped.add(node)  # before the kill: a crash in between still gets healed
            cast(Kill, test.db).kill(test, node)
        try:
            if target is None:
                path, copy = self.snapshots.pop(node)
                out = {
                    "file": path,
                    "step": "restore",
                    "copy": copy,
                    **self._run(test, node, {"op": "restore", "path": path, "from": copy}),
                }
            else:
                damage = plan(kind, target[1], self.rng)
                out = {
                    "file": target[0],
                    "data_end": target[1],
                    **damage,
                    **self._run(test, node, {"op": "damage", "path": target[0], "damage": damage}),
                }
        finally:
            refused = self._start(test, node) if mode == "stopped" else None
        return {"node": node, **out, **({"start_refused": refused} if refused else {})}

    def _snapshot(self, test: Run, node: str) -> dict[str, Any]:
        """The first rollback op on a node: a copy of one data file, which a later one copies back."""
        target = self._pick(test, node)
        if target is None:
            return {"file": None, "note": NO_FILE}
        copy = str(Path(backend(test).node_dir(node)) / SNAPSHOT_DIR / Path(target[0]).name)
        res = self._run(test, node, {"op": "snapshot", "path": target[0], "to": copy})
        self.snapshots[node] = (target[0], copy)
        return {"file": target[0], "step": "snapshot", "copy": copy, "size": res["size_after"]}

    def _pick(self, test: Run, node: str) -> tuple[str, int] | None:
        """A file of the node's data files to damage (pick_file), listed on the node; None: none has data."""
        return pick_file(self._run(test, node, {"op": "list", "globs": self._globs(test, node)}), self.rng)

    def _globs(self, test: Run, node: str) -> list[str]:
        """The node's data file globs (its role's, filled in for the node; a user's relative file_glob
        joined to each data directory, the directory filled in first so the glob itself is never read as
        a template)."""
        b = backend(test)
        pattern = self._user_glob(test)
        for role, templates in self._role_globs(test).items():
            if node not in b.nodes(role):
                continue
            if pattern is None:
                return b.expand(node, list(templates))
            if pattern.startswith("/"):
                return [pattern]
            return [posixpath.join(d, pattern) for d in b.expand(node, list(templates))]
        return []

    def _run(self, test: Run, node: str, req: Mapping[str, Any]) -> Any:
        """One filedamage request on the node, through the backend; its JSON answer."""
        b = backend(test)
        python = b.expand(node, ["{python}"])[0]
        source = Path(filedamage.__file__).read_text(encoding="utf-8")
        rc, out, err = b.remote.exec(node, [python, "-c", source, json.dumps(req)], EXEC_TIMEOUT_S)
        if rc != 0:
            tail = (err.strip().splitlines() or ["no output"])[-1]
            raise NemesisError(f"file-corrupt {req.get('op')} on {node} failed (exit {rc}): {tail}")
        return json.loads(out.strip().splitlines()[-1])

    def _start(self, test: Run, node: str) -> str | None:
        """Starts the DB this op stopped; None, or the last line of why it did not start. A DB that refuses
        to start on a damaged file has found the damage: it stays down, and heal leaves it there."""
        try:
            cast(Kill, test.db).start(test, node)
        except Exception as exc:
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            log.info("%s did not start again after its file was damaged: %s", node, lines[-1])
            return lines[-1][:300]
        finally:
            with self.lock:
                self.stopped.discard(node)
        return None

    def heal(self, test: Run) -> None:
        bring_back(
            self.stopped,
            self.lock,
            lambda n: cast(Kill, test.db).start(test, n),
            "start again after file-corrupt",
        )


def file_corrupt_package(
    f: str,
    kinds: Sequence[str],
    modes: Sequence[str],
    subsets: Sequence[str],
    interval_s: float,
    targets: Sequence[str],
) -> NemesisPackage:
    """One damage every interval, its kind, mode and subset drawn from `kinds`, `modes` and `subsets`,
    aimed at a target drawn from `targets` (the DB's roles, or all its nodes)."""

    def value(ctx: gen.Context) -> Op:
        return {
            "f": f,
            "value": {
                "kind": ctx.rng.choice(list(kinds)),
                "mode": ctx.rng.choice(list(modes)),
                "subset": ctx.rng.choice(list(subsets)),
                "targets": ctx.rng.choice(list(targets)),
            },
        }

    sched = gen.cycle(gen.seq(gen.sleep(interval_s), gen.limit(1, gen.repeat(value))))
    return NemesisPackage(nemesis=FileCorruptNemesis(f), generator=sched)
