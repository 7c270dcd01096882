"""The catalog workload's checker (issue: every acknowledged create survives, once).

Ops (workloads/catalog.py): `create-table` / `delete-table` with the table name as
value; `alter-table` and `describe-table` with `{"table", "version"}` (the ok
completion carries the version the master reports); `list-tables` whose ok
value is the list of names. Rules:
- after healing, the last successful list-tables shows every acknowledged
  create that no delete could have removed, and shows each table once;
- a table whose delete was acknowledged never appears again in a listing that
  began after the delete completed (unless it was created again afterwards);
- a table's schema version never goes back: an observation (ok alter or
  describe) that began after another completed may not report a lower version;
- listings never show a table nobody tried to create.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from checkers.ops import Op, pairs


def _table(v: Any) -> Any:
    return v.get("table") if isinstance(v, Mapping) else v


class CatalogChecker:
    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        pos = {id(op): i for i, op in enumerate(history)}
        ps = pairs(history)
        attempted: set[Any] = set()
        acked_create: dict[Any, int] = {}  # table -> completion position of an ok create
        create_invokes: dict[Any, list[int]] = defaultdict(list)
        delete_attempted: set[Any] = set()
        deleted_at: dict[Any, int] = {}  # table -> earliest completion position of an ok delete
        versions: dict[Any, list[tuple[int, int, int]]] = defaultdict(list)  # (invoke, complete, version)
        listings: list[tuple[int, int, list[Any]]] = []
        for p in ps:
            f = p.f
            comp_pos = pos[id(p.completion)] if p.completion is not None else None
            if f == "create-table":
                t = _table(p.invoke.get("value"))
                attempted.add(t)
                create_invokes[t].append(pos[id(p.invoke)])
                if p.type == "ok":
                    acked_create.setdefault(t, comp_pos)
            elif f == "delete-table":
                t = _table(p.invoke.get("value"))
                if p.type != "fail":
                    delete_attempted.add(t)
                if p.type == "ok" and (t not in deleted_at or comp_pos < deleted_at[t]):
                    deleted_at[t] = comp_pos
            elif f in ("alter-table", "describe-table") and p.type == "ok" and p.completion is not None:
                v = p.completion.get("value")
                if isinstance(v, Mapping) and v.get("version") is not None:
                    versions[v.get("table")].append((pos[id(p.invoke)], comp_pos, int(v["version"])))
            elif f == "list-tables" and p.type == "ok" and p.completion is not None:
                listings.append((pos[id(p.invoke)], comp_pos, list(p.completion.get("value") or [])))
        errors: dict[str, list[Any]] = {"lost": [], "duplicated": [], "resurrected": [], "version_regressed": [],
                                        "unexpected": []}
        for inv, comp, names in listings:
            for t in sorted(set(names) - attempted, key=str):
                errors["unexpected"].append({"table": t, "listing_index": history[comp].get("index")})
            for t in names:
                d = deleted_at.get(t)
                if d is not None and d < inv and not any(ci > d for ci in create_invokes.get(t, [])):
                    errors["resurrected"].append({"table": t, "listing_index": history[comp].get("index")})
        final = listings[-1] if listings else None
        if final is not None:
            counts = Counter(final[2])
            errors["duplicated"] = [{"table": t, "count": n} for t, n in counts.items() if n > 1]
            shown = set(counts)
            for t, done in acked_create.items():
                if t in shown or t in delete_attempted:
                    continue
                if done < final[0]:
                    errors["lost"].append({"table": t})
        for t, obs in versions.items():
            obs.sort(key=lambda o: o[1])
            completes = [o[1] for o in obs]
            best = []  # running max version over observations sorted by completion
            m = -(10**18)
            for o in obs:
                m = max(m, o[2])
                best.append(m)
            for inv, _comp, ver in obs:
                k = bisect.bisect_left(completes, inv)
                if k and best[k - 1] > ver:
                    errors["version_regressed"].append({"table": t, "version": ver, "earlier_max": best[k - 1]})
        bad = any(errors.values())
        out: dict[str, Any] = {
            "valid": False if bad else (True if final is not None else "unknown"),
            "acknowledged_creates": len(acked_create),
            "acknowledged_deletes": len(deleted_at),
            "listings": len(listings),
            "final_table_count": len(final[2]) if final else None,
        }
        for k, v in errors.items():
            out[f"{k}_count"] = len(v)
            out[k] = v[:50]
        if final is None:
            out["error"] = "no successful list-tables: cannot tell whether creates survived"
        return out
