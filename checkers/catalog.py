"""The catalog workload's checker (issue: every acknowledged create survives, once).

Ops (workloads/catalog.py): `create-table` / `delete-table` with the table name as
value; `alter-table` and `describe-table` with `{"table", "version"}` (the ok
completion carries the version the master reports); `list-tables` whose ok
value is the list of names. The masters answer reads only once a majority has
confirmed their leadership, so every listing is held to what completed before
it began. Rules:
- a listing shows every create acknowledged before it began that no delete
  could have removed (one invoked before the listing completed and not
  refused), the last one (after healing) included; the last shows each table
  once;
- a table whose delete was acknowledged never appears again in a listing that
  began after the delete completed (unless it was created again afterwards);
- a table's schema version never goes back: an observation (ok alter or
  describe) that began after another completed may not report a lower version;
- listings never show a table nobody tried to create, nor one table twice (every listing, not only the
  last);
- after healing, the leader master locates a leader for every tablet of every table it lists
  (`locate-tables`, retried for a while): a master that keeps answering that a tablet has no leader in a
  healed cluster has lost track of it (KUDU-1374's class). When no locate attempt got an answer at all,
  the verdict cannot be valid: it is unknown.
- a table a `locate-tables` listed and then found gone (NOT_FOUND, named in the answer's `vanished`) is
  explained only by a delete of that table invoked before the locate completed; otherwise the master lost
  a table it had just listed (`vanished`). The workload leaves such a table out of its answer rather than
  failing the whole check, so a table it deleted itself does not interrupt the timed rules below.
- after healing, every master holds what the leader committed (`master-replicas`, each master asked
  directly under the address clients use, retried for a while): a master left behind for good keeps the
  catalog on fewer copies than it claims (KUDU-1620's class: a replaced master nobody reaches by name).
- a master that never caught up on its own is an anomaly even when an operator's repair rebuilt it
  afterwards: the nemesis's `rebuild-lagging-masters` completion names it in `never_caught_up` (judged
  after every fault stopped, before the rebuild), and the masters catch up by snapshot (docs/node.md).

`locate-tables` and `master-replicas` also run while the faults do (workloads/catalog.py): only those
invoked after the last nemesis operation that client operations follow count as "after healing" for the
two rules above (during a fault a tablet may rightly have no leader and a master may lag); the others are
counted (`live_checks`). A timed rule judges every one of them, during the run and after healing: the
same problem in every answer for LIVE_BOUND_S with no fault active is the same anomaly, found then.

Each violation names the operation that showed it (`first_anomaly`, by history index: detection time).
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from faultline.checkers.ops import Interval, fault_free_at, nemesis_intervals, op_time, pairs
from faultline.core import Op

# how long a problem must persist, with no fault active, in every answer of a check made during the run
# before the timed rules call it an anomaly (the after-healing rules retry about as long)
LIVE_BOUND_S = 20.0


def _table(v: Any) -> Any:
    return v.get("table") if isinstance(v, Mapping) else v


ERROR_KINDS = (
    "lost",
    "duplicated",
    "resurrected",
    "version_regressed",
    "unexpected",
    "leaderless",
    "masters_diverged",
    "never_caught_up",
    "vanished",
)


class CatalogChecker:
    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        seen = _observe(history)
        found = _Findings(history)
        _listing_rules(seen, found)
        for p in seen.checks["locate-tables"]:
            for t in _unexplained_vanished(p, seen.pos, seen.delete_invokes):
                found.errors["vanished"].append(
                    {"table": t, "locate_index": found.note(seen.pos[id(p.completion)])}
                )
        _timed_rules(seen, found, history, float(opts.get("live_bound_s", LIVE_BOUND_S)))
        located, answered = _final_locate_rule(seen, found)
        _final_replicas_rule(seen, found)
        _never_caught_up_rule(history, seen.pos, found)
        _version_rule(seen, found)
        return _summary(seen, found, located, answered)


@dataclass
class _Observed:
    """What the client operations of a history showed, by history position."""

    pos: dict[int, int]  # id(op) -> position
    healed_from: int  # the position of the last nemesis op that some client op follows
    live_checks: int = 0
    attempted: set[Any] = field(default_factory=set)
    acked_create: dict[Any, int] = field(default_factory=dict)  # table -> completion position of an ok create
    create_invokes: dict[Any, list[int]] = field(default_factory=lambda: defaultdict(list))
    # table -> invoke positions of deletes not refused
    delete_invokes: dict[Any, list[int]] = field(default_factory=lambda: defaultdict(list))
    deleted_at: dict[Any, int] = field(default_factory=dict)  # table -> earliest completion of an ok delete
    # table -> (invoke, complete, version)
    versions: dict[Any, list[tuple[int, int, int]]] = field(default_factory=lambda: defaultdict(list))
    listings: list[tuple[int, int, list[Any]]] = field(default_factory=list)
    locates: list[Op] = field(default_factory=list)  # completions of locate-tables after healing, in order
    replicas: list[Op] = field(default_factory=list)  # completions of master-replicas after healing
    # every locate-tables and master-replicas pair, in order
    checks: dict[str, list[Any]] = field(default_factory=lambda: {"locate-tables": [], "master-replicas": []})

    def add(self, p: Any) -> None:
        """Records one client operation (a pair of invocation and completion)."""
        f, pos = p.f, self.pos
        comp_pos = pos[id(p.completion)] if p.completion is not None else None
        if f == "create-table":
            t = _table(p.invoke.get("value"))
            self.attempted.add(t)
            self.create_invokes[t].append(pos[id(p.invoke)])
            if p.type == "ok" and comp_pos is not None:  # an ok has its completion
                self.acked_create.setdefault(t, comp_pos)
        elif f == "delete-table":
            t = _table(p.invoke.get("value"))
            if p.type != "fail":
                self.delete_invokes[t].append(pos[id(p.invoke)])
            if (
                p.type == "ok"
                and comp_pos is not None
                and (t not in self.deleted_at or comp_pos < self.deleted_at[t])
            ):
                self.deleted_at[t] = comp_pos
        elif f in ("alter-table", "describe-table") and p.type == "ok" and p.completion is not None:
            v = p.completion.get("value")
            if isinstance(v, Mapping) and v.get("version") is not None:
                self.versions[v.get("table")].append(
                    (pos[id(p.invoke)], pos[id(p.completion)], int(v["version"]))
                )
        elif f == "list-tables" and p.type == "ok" and p.completion is not None:
            self.listings.append(
                (pos[id(p.invoke)], pos[id(p.completion)], list(p.completion.get("value") or []))
            )
        elif f in ("locate-tables", "master-replicas"):
            self.checks[f].append(p)  # every one, for the timed rules
            if pos[id(p.invoke)] < self.healed_from:
                self.live_checks += 1
            elif p.completion is not None:
                (self.locates if f == "locate-tables" else self.replicas).append(p.completion)


def _observe(history: list[Op]) -> _Observed:
    # the checks after healing: invoked after the last nemesis op (the heal) that some client op follows
    last_client = max((i for i, op in enumerate(history) if op.get("process") != "nemesis"), default=-1)
    healed_from = max(
        (i for i, op in enumerate(history[:last_client]) if op.get("process") == "nemesis"), default=-1
    )
    seen = _Observed({id(op): i for i, op in enumerate(history)}, healed_from)
    for p in pairs(history):
        seen.add(p)
    return seen


class _Findings:
    """The violations found, by rule, and the history positions of the ops that showed them."""

    def __init__(self, history: list[Op]) -> None:
        self.history = history
        self.errors: dict[str, list[Any]] = {kind: [] for kind in ERROR_KINDS}
        self.evidence: list[int] = []

    def note(self, position: int) -> Any:
        """Records the op at `position` as evidence; returns its history index."""
        self.evidence.append(position)
        return self.history[position].get("index", position)


def _listing_rules(seen: _Observed, found: _Findings) -> None:
    """Listings show no table nobody tried to create, no deleted table again, every acknowledged
    create no delete could have removed, and no table twice."""
    errors, note = found.errors, found.note
    for inv, comp, names in seen.listings:
        for t in sorted(set(names) - seen.attempted, key=str):
            errors["unexpected"].append({"table": t, "listing_index": note(comp)})
        for t in names:
            d = seen.deleted_at.get(t)
            if d is not None and d < inv and not any(ci > d for ci in seen.create_invokes.get(t, [])):
                errors["resurrected"].append({"table": t, "listing_index": note(comp)})
    lost_seen: set[Any] = set()  # each lost table once, at the first listing that misses it
    for inv, comp, names in seen.listings:
        shown = set(names)
        for t, done in seen.acked_create.items():
            if (
                t in shown
                or t in lost_seen
                or done >= inv
                or any(d < comp for d in seen.delete_invokes.get(t, []))
            ):
                continue
            lost_seen.add(t)
            errors["lost"].append({"table": t, "listing_index": note(comp)})
    doubled: set[Any] = set()  # each table once, at the first listing that shows it twice
    for _, comp, names in seen.listings:
        for t, n in Counter(names).items():
            if n > 1 and t not in doubled:
                doubled.add(t)
                errors["duplicated"].append({"table": t, "count": n, "listing_index": note(comp)})


def _timed_rules(seen: _Observed, found: _Findings, history: list[Op], bound: float) -> None:
    """The same leaderless tablet, or the same lagging master, in every answer for `bound` seconds with
    no fault active."""
    intervals, _ = nemesis_intervals(history)
    for key, since, p in _persisting(seen.checks["locate-tables"], _leaderless_keys, intervals, bound):
        found.errors["leaderless"].append(
            {
                "table": key[0],
                "tablets": [key[1]] if key[1] else [],
                "locate_index": found.note(seen.pos[id(p.completion)]),
                "live": True,
                "since_s": round(since, 3),
                "fault_free_s": bound,
            }
        )
    for key, since, p in _persisting(seen.checks["master-replicas"], _master_problem_keys, intervals, bound):
        found.errors["masters_diverged"].append(
            {
                "problems": [key],
                "index": found.note(seen.pos[id(p.completion)]),
                "live": True,
                "since_s": round(since, 3),
                "fault_free_s": bound,
            }
        )


def _problem_answers(completions: list[Op], field_name: str) -> list[Op]:
    """The failed answers that name a problem (their value's `field_name`)."""
    return [
        c
        for c in completions
        if c.get("type") != "ok" and isinstance(c.get("value"), Mapping) and c["value"].get(field_name)
    ]


def _final_locate_rule(seen: _Observed, found: _Findings) -> tuple[bool, list[Op]]:
    """After healing some locate must find a leader for every tablet; when every answer left one
    without, the last answer settles which. Returns whether one located all, and the answers that did not."""
    locates = seen.locates
    located = any(c.get("type") == "ok" for c in locates)
    answered = _problem_answers(locates, "leaderless")
    if locates and not located and answered:
        last = answered[-1]
        where = found.note(seen.pos[id(last)])
        timed = {e["table"] for e in found.errors["leaderless"]}  # found already, earlier, by the timed rule
        for t, tablet_ids in sorted(last["value"]["leaderless"].items(), key=lambda kv: str(kv[0])):
            if t in timed:
                continue
            found.errors["leaderless"].append(
                {
                    "table": t,
                    "tablets": list(tablet_ids),
                    "locate_index": where,
                    "answers": len(answered),
                    "attempts": len(locates),
                }
            )
    return located, answered


def _final_replicas_rule(seen: _Observed, found: _Findings) -> None:
    """After healing some answer must show every master holding what the leader committed."""
    replicas = seen.replicas
    stale = _problem_answers(replicas, "problems")
    if replicas and not any(c.get("type") == "ok" for c in replicas) and stale:
        last = stale[-1]
        found.errors["masters_diverged"].append(
            {
                "problems": list(last["value"]["problems"]),
                "masters": last["value"].get("masters"),
                "index": found.note(seen.pos[id(last)]),
                "attempts": len(replicas),
            }
        )


def _never_caught_up_rule(history: list[Op], pos: Mapping[int, int], found: _Findings) -> None:
    """A master the nemesis had to rebuild because it never caught up on its own."""
    for p in pairs(history, nemesis=True):
        c = p.completion
        v = c.get("value") if c is not None else None
        if isinstance(v, Mapping) and v.get("never_caught_up"):
            found.errors["never_caught_up"].append(
                {
                    "masters": list(v["never_caught_up"]),
                    "leader": v.get("leader"),
                    "waited_s": v.get("waited_s"),
                    "reason": v.get("reason"),
                    "rebuilt": v.get("rebuilt"),
                    "index": found.note(pos[id(c)]),
                }
            )


def _version_rule(seen: _Observed, found: _Findings) -> None:
    """No observation that began after another completed reports a lower schema version."""
    for t, obs in seen.versions.items():
        obs.sort(key=lambda o: o[1])
        completes = [o[1] for o in obs]
        best = []  # running max version over observations sorted by completion
        m = -(10**18)
        for o in obs:
            m = max(m, o[2])
            best.append(m)
        for inv, comp, ver in obs:
            k = bisect.bisect_left(completes, inv)
            if k and best[k - 1] > ver:
                found.errors["version_regressed"].append(
                    {"table": t, "version": ver, "earlier_max": best[k - 1], "index": found.note(comp)}
                )


def _summary(seen: _Observed, found: _Findings, located: bool, answered: list[Op]) -> dict[str, Any]:
    """The checker's result: the verdict, the counts and the violations (the first 50 of each kind)."""
    final = seen.listings[-1] if seen.listings else None
    unlocated = bool(seen.locates) and not located and not answered
    bad = any(found.errors.values())
    out: dict[str, Any] = {
        "valid": False if bad else (True if final is not None and not unlocated else "unknown"),
        "acknowledged_creates": len(seen.acked_create),
        "acknowledged_deletes": len(seen.deleted_at),
        "listings": len(seen.listings),
        "final_table_count": len(final[2]) if final else None,
        "live_checks": seen.live_checks,
    }
    for name, v in found.errors.items():
        out[f"{name}_count"] = len(v)
        out[name] = v[:50]
    if found.evidence:
        first = found.history[min(found.evidence)]
        out["first_anomaly"] = {k: first[k] for k in ("index", "time", "process", "f", "value") if k in first}
    if final is None:
        out["error"] = "no successful list-tables: cannot tell whether creates survived"
    elif unlocated:
        out["error"] = (
            "no locate-tables answered after healing: cannot tell whether every tablet has a leader"
        )
    return out


def _unexplained_vanished(
    p: Any, pos: Mapping[int, int], delete_invokes: Mapping[Any, list[int]]
) -> list[Any]:
    """Tables a locate listed and then found gone (NOT_FOUND) with no delete of theirs invoked before the
    locate completed: only such a delete may make a listed table vanish."""
    c = p.completion
    v = c.get("value") if c is not None else None
    if not isinstance(v, Mapping) or not v.get("vanished"):
        return []
    done = pos[id(c)]
    return [t for t in v["vanished"] if not any(i < done for i in delete_invokes.get(t, ()))]


def _leaderless_keys(value: Mapping[str, Any]) -> set[tuple[Any, Any]]:
    """(table, tablet) for each tablet a locate-tables answer left without a leader ((table, None) when the
    master knew no tablet of the table at all)."""
    out: set[tuple[Any, Any]] = set()
    for table, tablet_ids in (value.get("leaderless") or {}).items():
        out.update((table, t) for t in tablet_ids) if tablet_ids else out.add((table, None))
    return out


def _master_problem_keys(value: Mapping[str, Any]) -> set[str]:
    """The master each master-replicas problem is about (its address), or the problem when it names none."""
    keys = set()
    for problem in value.get("problems") or []:
        head = str(problem).split(" ", 1)[0]
        keys.add(head.rstrip(":") if head.endswith(":") or " lags " in str(problem) else str(problem))
    return keys


def _persisting(checks: list[Any], keys_of, intervals: list[Interval], bound: float):
    """The timed rule: a problem shown by every answer of a run of consecutive checks, none overlapping a
    fault, from the completion of the first to the invocation of one begun `bound` seconds later. An
    error without an answer, or a check during a fault, ends every run. Yields (key, first seen, check)
    once per key, at the check that proves it."""
    since: dict[Any, float] = {}
    reported: set[Any] = set()
    for p in checks:
        c = p.completion
        v = c.get("value") if c is not None else None
        if (
            c is None
            or not isinstance(v, Mapping)
            or not fault_free_at(intervals, op_time(p.invoke), op_time(c))
        ):
            since.clear()
            continue
        shown = keys_of(v) if c.get("type") != "ok" else set()
        since = {k: since.get(k, op_time(c)) for k in shown}
        for k, t in since.items():
            if k not in reported and op_time(p.invoke) - t >= bound:
                reported.add(k)
                yield k, t, p
