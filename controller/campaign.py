"""Campaigns: a matrix of runs, each with an expectation, resumable, ending in a scorecard.

A campaign file (TOML) has defaults in `[campaign]` and any number of `[[cell]]` tables; a cell's
`workload`, `nemesis` and `bugs` may also be lists of alternatives (`workloads`, `nemeses`, `bug_sets`),
in which case the cell expands to their product. Every cell runs once per seed and time limit.

    [campaign]
    name = "ci"
    cluster = "docker"
    seeds = [1, 2]
    time_limit = 30

    [[cell]]
    name = "register-partition"
    workload = "register"
    nemesis = ["partition", "kill"]
    expect = "valid"

The whole file is validated before anything starts, against one schema (the key tables and VALUE_RULES
below): an unknown key, workload, nemesis or bug, a value of the wrong type, an empty list of
alternatives, a number that is not finite and positive, or a name that would lead out of the store, is
one error naming the key and what it must be. Progress is kept in
`campaign.json` in the campaign's store after every run, so an interrupted campaign resumes where it
stopped and never repeats a finished run.

N hosts split a campaign with `--shard I/N` (`shard_runs`): each runs a fixed share of the planned runs,
computed from the cells, seeds and time limits alone, and keeps its progress in its own
`campaign.shard-I-of-N.json`, so shards may share one store.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from faultline.checkers.detection import first_anomaly, history_index_times
from faultline.controller.errors import UsageError
from faultline.controller.testspec import DEPRECATED_DB_OPTS, fold_deprecated, warn_deprecated
from faultline.core import TestSpec, inputs
from faultline.results.store import campaign_state_name, campaign_state_paths, temp_path

EXPECTATIONS = ("valid", "invalid")

# key -> (accepted python types, description); shared by [campaign] defaults and [[cell]] tables.
RUN_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "db": (
        (str,),
        "the DB under test: store (default), etcd, redis-sentinel, postgres, nats or package.module:Attribute",
    ),
    "db_opt": ((dict,), "the DB's own options, e.g. {members = 5} for etcd (docs/your-own-db.md)"),
    "nemesis_opt": ((dict,), 'the nemeses\' options, e.g. {file_glob = "pg_wal/0000*"} (docs/disk.md)'),
    "cluster": ((str,), "docker | local | ssh"),
    # deprecated spellings of the store's DB options (read as db_opt, with one line on stderr)
    **{k: ((int,), f"deprecated: db_opt = {{{k} = N}}") for k in DEPRECATED_DB_OPTS},
    "concurrency": ((int,), "client workers"),
    "time_limit": ((int, float), "seconds of workload per run"),
    "time_limits": ((list,), "several time limits, each a run"),
    "seeds": ((list,), "seeds, each a run"),
    "nemesis_interval": ((int, float), "seconds between faults"),
    "quiet_period": ((int, float), "seconds of quiet before the final reads"),
    "rate": ((int, float), "ops/s per worker"),
    "op_timeout": ((int, float), "client operation timeout in seconds (default 5)"),
    "nodes": ((str,), "the ssh backend's hosts file (docs/cluster.md)"),
}
CAMPAIGN_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "name": ((str,), "campaign name"),
    "description": ((str,), "free text"),
    "store": ((str,), "store directory (default store/campaign-NAME)"),
    **RUN_KEYS,
}
CELL_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "name": ((str,), "cell name"),
    "workload": ((str,), "one workload"),
    "workloads": ((list,), "alternatives: one cell per workload"),
    "nemesis": ((list, str), 'nemeses run together, e.g. ["partition", "kill"]'),
    "nemeses": ((list,), "alternatives: one cell per nemesis list"),
    "bugs": ((list,), 'injected bugs, e.g. ["stale-leader-reads"]'),
    "bug_sets": ((list,), "alternatives: one cell per bug list"),
    "expect": ((str,), "valid | invalid"),
    **RUN_KEYS,
}


def _is_list_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and bool(v) and all(check(x) for x in v)


def _is_string_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


# What a value must be beyond its type, for the keys above that have a rule: (check, description).
VALUE_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "name": (
        inputs.is_safe_name,
        "letters, digits, '.', '_', '+' or '-' (it names a directory of the store)",
    ),
    **{k: (inputs.is_positive_int, "a whole number > 0") for k in DEPRECATED_DB_OPTS},
    "concurrency": (inputs.is_positive_int, "a whole number > 0"),
    "time_limit": (inputs.is_positive_number, "a finite number > 0"),
    "time_limits": (_is_list_of(inputs.is_positive_number), "a non-empty list of finite numbers > 0"),
    "seeds": (
        _is_list_of(lambda x: isinstance(x, int) and not isinstance(x, bool)),
        "a non-empty list of integers",
    ),
    "nemesis_interval": (inputs.is_positive_number, "a finite number > 0"),
    "quiet_period": (inputs.is_non_negative_number, "a finite number >= 0"),
    "rate": (inputs.is_positive_number, "a finite number > 0"),
    "op_timeout": (inputs.is_positive_number, "a finite number > 0"),
    "nodes": (lambda v: bool(v.strip()), "the path of a hosts file"),
    "workloads": (_is_list_of(lambda x: isinstance(x, str)), "a non-empty list of workload names"),
    "nemeses": (
        _is_list_of(_is_string_list),
        'a non-empty list of nemesis lists, e.g. [["kill"], ["pause"]]',
    ),
    "bug_sets": (_is_list_of(_is_string_list), 'a non-empty list of bug lists, e.g. [[], ["no-fsync"]]'),
}


@dataclass(frozen=True)
class PlannedRun:
    """One run of a campaign: a cell at one seed and time limit."""

    cell: str
    seed: int
    time_limit: float
    expect: str
    opts: dict[str, Any] = field(hash=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.cell}|seed={self.seed}|t={self.time_limit:g}"


@dataclass
class RunRecord:
    key: str
    cell: str
    seed: int
    time_limit: float
    expect: str
    valid: Any
    expectation_met: bool
    run_dir: str | None
    elapsed_s: float
    cut_short: str | None = None
    time_to_detection_s: float | None = None
    first_anomaly: str | None = None


@dataclass
class Campaign:
    name: str
    store: Path
    runs: list[PlannedRun]
    source: Path
    drawn_seeds: list[int] | None = None  # seeds drawn at random for this invocation (--seeds random:N)
    shard: Shard | None = None  # the share of the campaign this host runs (--shard I/N); None: all of it


MAX_DRAWN_SEEDS = 1000


def draw_seeds(n: int) -> list[int]:
    """`n` distinct fresh seeds from the OS's randomness: seeds nobody tuned a cell on."""
    import secrets

    if not 1 <= n <= MAX_DRAWN_SEEDS:
        raise UsageError(f"--seeds random:N wants N from 1 to {MAX_DRAWN_SEEDS}, not {n}")
    seeds: list[int] = []
    while len(seeds) < n:
        s = 1 + secrets.randbelow(2**31 - 1)
        if s not in seeds:
            seeds.append(s)
    return seeds


def parse_seeds(text: str) -> tuple[list[int], bool]:
    """`--seeds`: `1,2,3` (those seeds), `@FILE` (the seeds listed in FILE) or `random:N` (N drawn now);
    (seeds, drawn)."""
    text = text.strip()
    if text.startswith("random:"):
        count = text[len("random:") :].strip()
        if not count.isdigit():
            raise UsageError(f"--seeds random:N wants a whole number N, got {text!r}")
        return draw_seeds(int(count)), True
    if text.startswith("@"):
        return read_seed_file(text[1:]), False
    return _seed_list(text.split(","), repr(text)), False


def read_seed_file(path: str | Path) -> list[int]:
    """A seed file: integers separated by commas, spaces or newlines; `#` starts a comment. Every host of
    a sharded campaign reads the same file, so all of them plan the same runs."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"--seeds @{path}: cannot read the seed file ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    words = [w for line in text.splitlines() for w in line.split("#", 1)[0].replace(",", " ").split()]
    return _seed_list(words, f"in the seed file {str(path)!r}")


def _seed_list(words: Sequence[str], where: str) -> list[int]:
    try:
        seeds = [int(s) for s in words if s.strip()]
    except ValueError:
        raise UsageError(
            f"--seeds wants integers separated by commas, @FILE or random:N, got {where}"
        ) from None
    if not seeds:
        raise UsageError(f"--seeds is empty ({where})")
    if len(set(seeds)) != len(seeds):
        raise UsageError(f"--seeds lists a seed twice: {where}")
    return seeds


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (1-based): the share of a campaign one of `count` hosts runs."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str) -> Shard:
    """`--shard I/N`: 1 <= I <= N."""
    m = SHARD_RE.match(text)
    if not m:
        raise UsageError(
            f"--shard wants I/N (this host's share, e.g. 1/3 on the first of three hosts), not {text!r}"
        )
    index, count = int(m.group(1)), int(m.group(2))
    if count < 1:
        raise UsageError(f"--shard {text.strip()}: N, the number of shards, must be at least 1")
    if not 1 <= index <= count:
        raise UsageError(f"--shard {text.strip()}: I must be from 1 to {count}")
    return Shard(index, count)


def shard_runs(runs: Sequence[PlannedRun], shard: Shard) -> list[PlannedRun]:
    """The runs of `shard`: ordered by (cell, seed, time limit), every N-th from the I-th. A pure function
    of the runs' cells, seeds and time limits, never of the host, the time or the order of the file or of
    the seeds, so every host computes the same split and the shards' runs are disjoint and cover them all;
    each shard gets within one run of the same number, and a cell with at least N seeds is spread over
    every shard."""
    ordered = sorted(runs, key=lambda r: (r.cell, r.seed, r.time_limit))
    return ordered[shard.index - 1 :: shard.count]


def apply_shard(campaign: Campaign, shard: Shard) -> Campaign:
    """The campaign narrowed to one shard's runs; its progress goes to that shard's own state file."""
    runs = shard_runs(campaign.runs, shard)
    if not runs:
        raise UsageError(
            f"--shard {shard}: the campaign plans only {len(campaign.runs)} run(s), so shard "
            f"{shard.index} has none; use at most {len(campaign.runs)} shards"
        )
    return replace(campaign, runs=runs, shard=shard)


def select(campaign: Campaign, cells: Sequence[str] = (), seeds: Sequence[int] | None = None) -> Campaign:
    """The campaign narrowed to the cells whose name matches one of the globs `cells` (all if empty),
    with every cell's seeds replaced by `seeds` if given. Keys stay those of the full campaign, so
    progress saved by a narrowed run counts for the full one and the other way round."""
    import fnmatch

    runs = [r for r in campaign.runs if not cells or any(fnmatch.fnmatchcase(r.cell, c) for c in cells)]
    if not runs:
        names = ", ".join(dict.fromkeys(r.cell for r in campaign.runs))
        raise UsageError(f"no cell matches {', '.join(cells)}; cells: {names}")
    if seeds is not None:
        first: dict[tuple[str, float], PlannedRun] = {}
        for r in runs:
            first.setdefault((r.cell, r.time_limit), r)
        runs = [
            PlannedRun(r.cell, seed, r.time_limit, r.expect, {**r.opts, "seed": seed})
            for r in first.values()
            for seed in seeds
        ]
    return replace(campaign, runs=runs)


def _check_type(where: str, key: str, value: Any, spec: Mapping[str, tuple[tuple[type, ...], str]]) -> None:
    if key not in spec:
        raise UsageError(f"{where}: unknown key {key!r}; valid keys: {', '.join(sorted(spec))}")
    types, desc = spec[key]
    # bool is an int subclass in Python; a campaign never means True for a number
    if isinstance(value, bool) or not isinstance(value, types):
        names = " or ".join("array" if t is list else t.__name__ for t in types)
        raise UsageError(f"{where}: {key} must be {names} ({desc}), not {value!r}")
    if key in VALUE_RULES:
        check, must = VALUE_RULES[key]
        if not check(value):
            raise UsageError(f"{where}: {key} must be {must}, not {value!r}")


def _string_list(where: str, key: str, value: Any) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise UsageError(f"{where}: {key} must be a list of strings, not {value!r}")
    return list(items)


def _choose(where: str, key: str, value: str, valid: Sequence[str]) -> str:
    if value not in valid:
        raise UsageError(f"{where}: {key} {value!r} is unknown; valid: {', '.join(valid)}")
    return value


def load(path: str | Path, store_override: str | Path | None = None) -> Campaign:
    """Parses and validates a campaign file completely; nothing runs until this returns."""
    source = Path(path)
    head, cells = _read_file(source)
    name = head.get("name", source.stem)
    if not inputs.is_safe_name(name):
        raise UsageError(
            f"{source}: the campaign's name {name!r} (the file's name) cannot name a store "
            "directory; set name = \"...\" in [campaign] (letters, digits, '.', '_', '+', '-')"
        )
    for key in DEPRECATED_DB_OPTS:
        if key in head or any(key in cell for cell in cells):
            warn_deprecated(f"the campaign key {key!r}", f"db_opt = {{{key} = N}}")
    defaults = {k: v for k, v in head.items() if k in RUN_KEYS}
    runs: list[PlannedRun] = []
    seen_names: set[str] = set()
    for i, cell in enumerate(cells, 1):
        runs += _plan_cell(f"{source} cell #{i}", name, cell, defaults, seen_names)
    store = Path(store_override or head.get("store") or Path("store") / f"campaign-{name}")
    return Campaign(name=name, store=store, runs=runs, source=source)


def _read_file(source: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The [campaign] table, its keys checked, and the [[cell]] tables."""
    if not source.exists():
        raise UsageError(f"campaign file {str(source)!r} does not exist")
    try:
        doc = inputs.read_toml(source, "campaign file")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for key in doc:
        if key not in ("campaign", "cell"):
            raise UsageError(f"{source}: unknown table {key!r}; valid: [campaign], [[cell]]")
    head = doc.get("campaign", {})
    if not isinstance(head, dict):
        raise UsageError(f"{source}: [campaign] must be a table")
    for key, value in head.items():
        _check_type(f"{source} [campaign]", key, value, CAMPAIGN_KEYS)
    cells = doc.get("cell", [])
    if not isinstance(cells, list) or not cells:
        raise UsageError(f"{source}: no [[cell]] tables: a campaign needs at least one cell")
    for i, cell in enumerate(cells, 1):
        if not isinstance(cell, dict):
            raise UsageError(f"{source}: cell #{i} must be a [[cell]] table, not {cell!r}")
    return head, cells


def _alternatives(where: str, cell: Mapping[str, Any]) -> tuple[list[str], list[list[str]], list[list[str]]]:
    """A cell's workloads, nemesis lists and bug lists (one cell each in their product), each a name some
    DB knows; each run is then validated against its own DB (testspec.build_test)."""
    from faultline.dbs import all_bugs
    from faultline.dbs import every_nemesis as all_nemeses
    from faultline.dbs import every_workload as all_workloads

    if ("workload" in cell) == ("workloads" in cell):
        raise UsageError(f"{where}: give exactly one of 'workload' or 'workloads'")
    workloads = (
        [cell["workload"]] if "workload" in cell else _string_list(where, "workloads", cell["workloads"])
    )
    if "nemesis" in cell and "nemeses" in cell:
        raise UsageError(f"{where}: give 'nemesis' or 'nemeses', not both")
    if "nemeses" in cell:
        nemeses = [_string_list(where, "nemeses", n) for n in cell["nemeses"]]
    else:
        nemeses = [_string_list(where, "nemesis", cell.get("nemesis", ["none"]))]
    if "bugs" in cell and "bug_sets" in cell:
        raise UsageError(f"{where}: give 'bugs' or 'bug_sets', not both")
    if "bug_sets" in cell:
        bug_sets = [_string_list(where, "bug_sets", b) for b in cell["bug_sets"]]
    else:
        bug_sets = [_string_list(where, "bugs", cell.get("bugs", []))]
    known_nemeses, known_bugs = list(all_nemeses()), sorted(all_bugs())
    for w in workloads:
        _choose(where, "workload", w, list(all_workloads()))
    for n in (n for ns in nemeses for n in ns):
        _choose(where, "nemesis", n, known_nemeses)
    for b in (b for bs in bug_sets for b in bs):
        _choose(where, "bug", b, known_bugs)
    return workloads, nemeses, bug_sets


def _seeds_and_limits(where: str, merged: dict[str, Any]) -> tuple[list[int], list[Any]]:
    """The seeds and time limits a cell runs at, taken out of its merged options."""
    seeds = merged.pop("seeds", [1])
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise UsageError(f"{where}: seeds must be a non-empty list of integers, not {seeds!r}")
    limits = merged.pop("time_limits", None) or [merged.pop("time_limit", 60)]
    merged.pop("time_limit", None)
    if not all(isinstance(t, int | float) and not isinstance(t, bool) and t > 0 for t in limits):
        raise UsageError(f"{where}: time limits must be positive numbers, not {limits!r}")
    return seeds, limits


def _plan_cell(
    where: str, campaign: str, cell: dict[str, Any], defaults: Mapping[str, Any], seen_names: set[str]
) -> list[PlannedRun]:
    """The runs of one [[cell]]: every alternative at every seed and time limit, each validated now."""
    from faultline.controller import testspec

    where += f" ({cell['name']})" if isinstance(cell.get("name"), str) else ""
    for key, value in cell.items():
        _check_type(where, key, value, CELL_KEYS)
    if "expect" not in cell:
        raise UsageError(f"{where}: missing key 'expect' (valid | invalid)")
    expect = _choose(where, "expect", cell["expect"], EXPECTATIONS)
    wl_choices, nem_choices, bug_choices = _alternatives(where, cell)
    merged = {**defaults, **{k: v for k, v in cell.items() if k in RUN_KEYS}}
    seeds, limits = _seeds_and_limits(where, merged)
    merged = fold_deprecated(merged, warn=False)  # said once for the file, in `load`
    runs: list[PlannedRun] = []
    product = list(itertools.product(wl_choices, nem_choices, bug_choices))
    for w, ns, bs in product:
        base = cell.get("name") or "-".join([w, *ns] + [f"bug-{b}" for b in bs])
        cell_name = base if len(product) == 1 else "-".join([base, w, *ns, *bs])
        if cell_name in seen_names:
            raise UsageError(f"{where}: cell name {cell_name!r} is used twice; give each cell a unique name")
        seen_names.add(cell_name)
        for seed, limit in itertools.product(seeds, limits):
            opts = {
                **merged,
                "workload": w,
                "nemesis": ",".join(ns),
                "inject_bug": ",".join(bs),
                "seed": seed,
                "time_limit": limit,
                "name": f"{campaign}-{cell_name}",
            }
            try:
                testspec.build_test(opts)  # validates every option now, before anything starts
            except UsageError as exc:
                raise UsageError(f"{where}: {exc}") from None
            runs.append(PlannedRun(cell_name, seed, float(limit), expect, opts))
    return runs


# ---- progress file -------------------------------------------------------------------------------


def state_path(campaign: Campaign) -> Path:
    """campaign.json, or the shard's own campaign.shard-I-of-N.json: shards sharing a store never write one
    file, so neither can lose the other's records."""
    shard = (campaign.shard.index, campaign.shard.count) if campaign.shard else None
    return campaign.store / campaign_state_name(shard)


def _read_state(path: Path) -> dict[str, RunRecord]:
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is corrupt ({exc}); move it away to start the campaign afresh") from None
    return {r["key"]: RunRecord(**r) for r in raw.get("runs", [])}


def load_state(campaign: Campaign) -> dict[str, RunRecord]:
    """The records of this campaign's own state file (the ones it saves back)."""
    return _read_state(state_path(campaign))


def load_other_states(campaign: Campaign) -> dict[str, RunRecord]:
    """The records of the store's other state files (other shards, or the whole campaign run unsharded):
    a run one of them finished is not run again."""
    own = state_path(campaign)
    records: dict[str, RunRecord] = {}
    for path in campaign_state_paths(campaign.store):
        if path.name != own.name:
            try:
                records.update(_read_state(path))
            except (
                OSError
            ):  # renamed over while being read (NFS: a stale handle): that shard's runs are its own
                continue
    return records


def save_state(campaign: Campaign, records: Mapping[str, RunRecord]) -> None:
    """Atomic: a crash while saving leaves the previous state intact."""
    path = state_path(campaign)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    body: dict[str, Any] = {
        "campaign": campaign.name,
        "source": str(campaign.source),
        "runs": [asdict(r) for r in records.values()],
    }
    if campaign.shard:
        body["shard"] = str(campaign.shard)
    before = _drawn_before(path)
    drawn = before + [s for s in campaign.drawn_seeds or [] if s not in before]
    if drawn:
        body["drawn_seeds"] = drawn  # every seed ever drawn at random for this store, in order
    with open(tmp, "w") as f:
        json.dump(body, f, indent=1, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _drawn_before(path: Path) -> list[int]:
    try:
        drawn = json.loads(path.read_text()).get("drawn_seeds") if path.exists() else None
    except (OSError, ValueError, AttributeError):
        return []
    return [s for s in drawn if isinstance(s, int)] if isinstance(drawn, list) else []


# ---- running -------------------------------------------------------------------------------------


def history_times(run_dir: str | Path | None) -> dict[int, int]:
    """index -> time (ns) of a stored run's history; empty if there is none."""
    from faultline.history import read_jsonl

    path = Path(run_dir or "") / "history.jsonl"
    if not run_dir or not path.exists():
        return {}
    return history_index_times(read_jsonl(path))


RunFn = Callable[[TestSpec, Path], Any]


def execute(
    campaign: Campaign,
    run_fn: RunFn,
    *,
    on_start: Callable[[PlannedRun, int, int], None] | None = None,
    on_done: Callable[[RunRecord], None] | None = None,
    others: bool = True,
) -> dict[str, RunRecord]:
    """Runs every planned run not yet finished, saving progress after each; returns the planned runs'
    records. `run_fn(test, store)` returns an Outcome (controller.runner). A run cut short by Ctrl-C is
    not recorded, so a resume runs it again; KeyboardInterrupt propagates after the state is saved. With
    `others`, runs recorded in the store's other state files (other shards) count as finished too."""
    import time

    from faultline.controller import testspec

    records = load_state(campaign)
    elsewhere = load_other_states(campaign) if others else {}
    todo = [r for r in campaign.runs if r.key not in records and r.key not in elsewhere]
    for n, planned in enumerate(todo, 1):
        if on_start:
            on_start(planned, n, len(todo))
        test = testspec.build_test(planned.opts)
        t0 = time.monotonic()
        outcome = run_fn(test, campaign.store)
        elapsed = time.monotonic() - t0
        if outcome.cut_short and "interrupt" in str(outcome.cut_short).lower():
            raise KeyboardInterrupt
        t_detect, anomaly = (
            first_anomaly(outcome.results, history_times(outcome.run_dir))
            if outcome.valid is False
            else (None, None)
        )
        record = RunRecord(
            key=planned.key,
            cell=planned.cell,
            seed=planned.seed,
            time_limit=planned.time_limit,
            expect=planned.expect,
            valid=outcome.valid,
            # a run cut short (a crash of the harness or of a fault) never ran its final checks: it cannot
            # show a store correct, though what it recorded can show one wrong
            expectation_met=(outcome.valid is True and not outcome.cut_short)
            if planned.expect == "valid"
            else (outcome.valid is False),
            run_dir=str(outcome.run_dir) if outcome.run_dir else None,
            elapsed_s=round(elapsed, 2),
            cut_short=outcome.cut_short,
            time_to_detection_s=t_detect,
            first_anomaly=anomaly,
        )
        records[planned.key] = record
        save_state(campaign, records)
        if on_done:
            on_done(record)
    found = {**elsewhere, **records}
    return {r.key: found[r.key] for r in campaign.runs if r.key in found}


@dataclass
class CellSummary:
    cell: str
    expect: str
    runs: int
    valid: int
    invalid: int
    unknown: int
    met: int
    median_detection_s: float | None

    @property
    def ok(self) -> bool:
        return self.met == self.runs


def summarize(campaign: Campaign, records: Mapping[str, RunRecord]) -> list[CellSummary]:
    out: list[CellSummary] = []
    cells: dict[str, list[RunRecord]] = {}
    expects: dict[str, str] = {}
    for planned in campaign.runs:
        expects[planned.cell] = planned.expect
        cells.setdefault(planned.cell, [])
        if planned.key in records:
            cells[planned.cell].append(records[planned.key])
    for cell, recs in cells.items():
        detections = [r.time_to_detection_s for r in recs if r.time_to_detection_s is not None]
        out.append(
            CellSummary(
                cell=cell,
                expect=expects[cell],
                runs=len(recs),
                valid=sum(r.valid is True for r in recs),
                invalid=sum(r.valid is False for r in recs),
                unknown=sum(r.valid not in (True, False) for r in recs),
                met=sum(r.expectation_met for r in recs),
                median_detection_s=round(statistics.median(detections), 2) if detections else None,
            )
        )
    return out
