"""What went wrong, in words: one `Story` per failing checker result, for the first screen of the report
and the counterexample page.

Each checker's result is recognised by its fields (a composed result names its parts freely), and read
defensively: a field a checker does not (yet) report is left out of the story, never guessed. Facts the
result does not hold (when an add was acknowledged, who wrote a value) come from the history.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from faultline.checkers.elle.explain import txn_text
from faultline.checkers.elle.svg import draw
from faultline.checkers.linearizability import prefix_states
from faultline.checkers.ops import op_time, pairs
from faultline.core import Op

EXAMPLES = 5


@dataclass
class Story:
    """A headline, sentences under it, and evidence tables (title, columns, rows) shown folded."""

    headline: str
    lines: list[str] = field(default_factory=list)
    tables: list[tuple[str, list[str], list[list[Any]]]] = field(default_factory=list)
    figure: str = ""  # markup made here (never copied from a result), shown under the sentences


def v(x: Any) -> str:
    return json.dumps(x, default=str)


class _History:
    """Index lookups and run-relative times over one history."""

    def __init__(self, history: list[Op]) -> None:
        self.ops = history
        self.by_index = {op.get("index"): op for op in history}
        self.t0 = min((op_time(op) for op in history), default=0.0)
        self.timed = any(isinstance(op.get("time"), int | float) for op in history)

    def when(self, index: Any) -> str:
        op = self.by_index.get(index)
        if op is None:
            return f"index {index}"
        if not self.timed:
            return f"index {index}"
        return f"{op_time(op) - self.t0:.3f} s"


def find_part(result: Mapping[str, Any], test: str) -> Mapping[str, Any] | None:
    """The (possibly nested) failing part of `result` that has field `test`."""
    if test in result:
        return result
    for x in result.values():
        if isinstance(x, Mapping) and x.get("valid") is False:
            found = find_part(x, test)
            if found is not None:
                return found
    return None


def story(name: str, result: Mapping[str, Any], history: list[Op]) -> Story:
    """The story of one checker's failing (or unknown) result."""
    h = _History(history)
    for test, tell in (
        ("failure", _linearizability),
        ("acknowledged_creates", _catalog),
        ("lost_count", _set),
        ("wrong_total_count", _bank),
        ("anomaly_types", _elle),
        ("unexpected_matches", _logs),
    ):
        part = find_part(result, test)
        if part is not None:
            return tell(name, part, h)
    return _generic(name, result)


def story_html(s: Story, cls: str = "story") -> str:
    """A story as the first thing a reader sees, with its tables folded below it."""
    e = html.escape
    out = [
        f"<div class='{cls}'><h3>{e(s.headline)}</h3>",
        *(f"<p>{e(line)}</p>" for line in s.lines),
        s.figure,
    ]
    for title, cols, rows in s.tables:
        out.append(
            f"<details><summary>{e(title)}</summary><table class='mono'><tr>"
            + "".join(f"<th>{e(c)}</th>" for c in cols)
            + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{e(str(x))}</td>" for x in r) + "</tr>" for r in rows)
            + "</table></details>"
        )
    out.append("</div>")
    return "".join(out)


# --- linearizability -------------------------------------------------------------------------------


def _call(c: Mapping[str, Any] | None, h: _History) -> str:
    if not c:
        return "an operation"
    done = c.get("complete_index")
    tail = f"invoked at {h.when(c.get('invoke_index'))}"
    if done is not None:
        tail += f", {c.get('outcome', 'ok')} at {h.when(done)}"
    else:
        tail += ", never completed"
    return f"process {c.get('process')}'s {c.get('f')} {v(c.get('value'))} ({tail})"


def _writers(
    state: Any, key: Any, prefix: list[Mapping[str, Any]], states: list[Any] | None, h: _History
) -> list[str]:
    """Who put `state` in the register: the prefix op that last moved it there, else any write of it."""
    if states:
        for k in range(len(states) - 1, -1, -1):
            if states[k] == state and (k == 0 or states[k - 1] != state):
                return [_call(prefix[k], h)]
    out = []
    for p in pairs(h.ops):
        if p.invoke.get("key") != key or p.type == "fail":
            continue
        val = p.invoke.get("value")
        new = (
            val[1]
            if p.f == "cas" and isinstance(val, list) and len(val) == 2
            else (val if p.f == "write" else None)
        )
        if p.f in ("write", "cas") and new == state:
            c = {
                "process": p.invoke.get("process"),
                "f": p.f,
                "value": val,
                "outcome": p.type,
                "invoke_index": p.invoke.get("index"),
                "complete_index": p.completion.get("index") if p.completion is not None else None,
            }
            out.append(_call(c, h))
    return out[-EXAMPLES:]


def _linearizability(name: str, res: Mapping[str, Any], h: _History) -> Story:
    f = res["failure"] if isinstance(res.get("failure"), Mapping) else {}
    op, key = f.get("op"), f.get("key")
    prefix = list(f.get("linearized") or [])
    states = prefix_states(res) if "model" in res else None
    finals = list(f.get("final_states") or [])
    on = f" on key {v(key)}" if key is not None else ""
    could = " or ".join(v(s) for s in finals) if finals else "nothing"
    model = res.get("model", "the model")
    name = name if "lineariz" in name else f"{name} (linearizability)"
    if op and op.get("f") == "read":
        head = (
            f"{name}: a read{on} returned {v(op.get('value'))}, but the {model} could only have held {could} "
            "at that point."
        )
    else:
        head = f"{name}: an operation{on} cannot be linearized; the {model} could only have held {could} at that point."
    lines = [
        f"The operation that cannot be placed: {_call(op, h)}."
        if op
        else "The search found no single operation to blame (see the prefix below)."
    ]
    lines.append(
        f"Before it, {len(prefix)} operations{on} could be put in a legal order"
        + (f"; the last was {_call(prefix[-1], h)}." if prefix else ".")
    )
    for s in finals[:EXAMPLES]:
        who = _writers(s, key, prefix, states, h)
        if who:
            lines.append(f"{v(s)} was written by " + "; ".join(who) + ".")
    if op and op.get("f") == "read" and op.get("value") is not None and op.get("value") not in finals:
        who = _writers(op.get("value"), key, [], None, h)
        if who:
            lines.append(
                f"The value read, {v(op.get('value'))}, was written by "
                + "; ".join(who)
                + ": it had already been overwritten."
            )
    rows = [
        [
            k + 1,
            c.get("process"),
            c.get("f"),
            v(c.get("value")),
            c.get("outcome"),
            c.get("invoke_index"),
            v(states[k]) if states and k < len(states) else "",
        ]
        for k, c in enumerate(prefix)
    ][-40:]
    tables = (
        [
            (
                f"The last {len(rows)} of {len(prefix)} linearized operations, with the state after each",
                ["#", "process", "f", "value", "outcome", "invoke index", "state after"],
                rows,
            )
        ]
        if rows
        else []
    )
    return Story(head, lines, tables)


# --- set, bank, catalog, transactions ---------------------------------------------------------------


def _set(name: str, res: Mapping[str, Any], h: _History) -> Story:
    lost, acked = int(res.get("lost_count") or 0), res.get("acknowledged_count")
    queue = "drained" in res  # total-queue's result: enqueues that never came out
    add = "enqueue" if queue else "add"
    acked_at: dict[str, Any] = {}
    for p in pairs(h.ops):
        if p.f == add and p.type == "ok" and p.completion is not None:
            acked_at.setdefault(v(p.invoke.get("value")), p.completion.get("index"))
    parts = []
    if lost:
        parts.append(
            f"{lost} of {acked if acked is not None else '?'} acknowledged {add}s were lost "
            + (
                "(never dequeued, nor taken by the final drain)"
                if queue
                else "(missing from every read begun after the last one that showed them)"
            )
        )
    if res.get("unconfirmed_lost_count"):
        parts.append(
            f"{res['unconfirmed_lost_count']} acknowledged adds were missing from the last reads, too "
            "soon after they were last seen (within the stability window) to call them lost"
        )
    for k, what in (
        ("unexpected_count", f"elements {'dequeued' if queue else 'read'} that were never {add}ed"),
        (
            "duplicated_count",
            "elements dequeued more often than enqueued" if queue else "elements read more than once",
        ),
    ):
        if res.get(k):
            parts.append(f"{res[k]} {what}")
    head = f"{name}: " + ("; ".join(parts) if parts else "the final read does not match the adds") + "."
    lines = []
    examples = list(res.get("lost") or [])[:EXAMPLES]
    if examples:
        lines.append(
            "Lost, for example: "
            + "; ".join(
                f"{v(x)} (acknowledged at {h.when(acked_at[v(x)])})" if v(x) in acked_at else v(x)
                for x in examples
            )
            + "."
        )
    if res.get("unexpected"):
        lines.append(
            "Never added but read: " + ", ".join(v(x) for x in list(res["unexpected"])[:EXAMPLES]) + "."
        )
    seen = res.get("op")
    if isinstance(seen, Mapping) and seen.get("index") is not None:
        lines.append(
            f"The read that showed it: process {seen.get('process')}'s {seen.get('f')} at "
            f"{h.when(seen.get('index'))}."
        )
    if res.get("first_lost_detected_s") is not None:
        lines.append(f"The first loss was proven {float(res['first_lost_detected_s']):.3f} s into the run.")
    if res.get("recovered_count"):
        lines.append(
            f"{res['recovered_count']} adds never acknowledged were read anyway (recovered; not an error)."
        )
    rows = [[v(x), h.when(acked_at[v(x)]) if v(x) in acked_at else "–"] for x in list(res.get("lost") or [])]
    return Story(
        head, lines, [("Lost elements (first 50)", ["element", "acknowledged at"], rows)] if rows else []
    )


def _bank(name: str, res: Mapping[str, Any], h: _History) -> Story:
    parts = []
    if res.get("wrong_total_count"):
        parts.append(f"{res['wrong_total_count']} reads saw a total other than {res.get('total')}")
    if res.get("negative_count"):
        parts.append(f"{res['negative_count']} reads saw a negative balance")
    if res.get("unexpected_accounts"):
        parts.append("reads saw accounts that do not exist")
    head = f"{name}: " + ("; ".join(parts) if parts else "the balances do not add up") + "."
    lines, rows = [], []
    for where in list(res.get("first_wrong_total") or [])[:EXAMPLES]:
        lines.append(
            f"Process {where.get('process')}'s read at {h.when(where.get('index'))} summed to "
            f"{where.get('total')} (expected {res.get('total')}): balances {v(where.get('value'))}."
        )
    for where in list(res.get("first_negative") or [])[:EXAMPLES]:
        lines.append(
            f"Process {where.get('process')}'s read at {h.when(where.get('index'))} saw negative "
            f"balances {v(where.get('negative'))}."
        )
    for kind in ("first_wrong_total", "first_negative", "unexpected_accounts"):
        for where in res.get(kind) or []:
            rows.append(
                [
                    kind.removeprefix("first_"),
                    where.get("index"),
                    where.get("process"),
                    v({k: x for k, x in where.items() if k not in ("index", "process")}),
                ]
            )
    return Story(
        head, lines, [("Bad reads", ["problem", "index", "process", "details"], rows)] if rows else []
    )


_CATALOG = {
    "lost": "acknowledged tables missing from a later listing",
    "duplicated": "tables listed more than once",
    "resurrected": "deleted tables listed again",
    "version_regressed": "tables whose schema version went backwards",
    "unexpected": "listed tables that were never created",
    "leaderless": "tables with a tablet the leader master located no leader for, after healing or "
    "for a stretch with no fault",
    "masters_diverged": "masters left behind the leader (after healing, or for a stretch with no fault)",
    "never_caught_up": "masters that never caught up on their own (an operator rebuilt them)",
}


def _catalog(name: str, res: Mapping[str, Any], h: _History) -> Story:
    parts = [f"{res[k + '_count']} {what}" for k, what in _CATALOG.items() if res.get(k + "_count")]
    head = f"{name}: " + ("; ".join(parts) if parts else "the catalog is inconsistent") + "."
    lines, rows = [], []
    for k in _CATALOG:
        for case in list(res.get(k) or []):
            where = case.get("listing_index", case.get("index", case.get("locate_index")))
            rows.append(
                [k, v(case.get("table", "")), where, v({a: b for a, b in case.items() if a != "table"})]
            )
        first = next(iter(res.get(k) or []), None)
        if first is not None:
            where = first.get("listing_index", first.get("index", first.get("locate_index")))
            what = (
                f"table {v(first['table'])}"
                if "table" in first
                else v(first.get("masters") or first.get("problems") or "?")
            )
            lines.append(f"{k.replace('_', ' ')}: e.g. {what}, seen at {h.when(where)}.")
    if isinstance(res.get("first_anomaly"), Mapping):
        a = res["first_anomaly"]
        lines.append(f"First seen by process {a.get('process')}'s {a.get('f')} at {h.when(a.get('index'))}.")
    return Story(head, lines, [("Cases", ["problem", "table", "index", "details"], rows)] if rows else [])


def _elle(name: str, res: Mapping[str, Any], h: _History) -> Story:
    counts = res.get("counts") or {}
    kinds = [k for k in res.get("anomaly_types") or [] if k not in set(res.get("informational") or [])]
    found = ", ".join(f"{k} ({counts.get(k, '?')})" for k in kinds) or "no anomaly"
    head = f"{name}: {found}"
    if res.get("not"):
        head += f"; the history is not {', '.join(res['not'])}"
    head += "."
    lines, rows = [], []
    anomalies = res.get("anomalies") or {}
    for k in kinds:
        cases = list(anomalies.get(k) or [])
        if cases and cases[0].get("explanation"):
            lines.append(f"{k}: {cases[0]['explanation']}")
        for case in cases:
            txns = "; ".join(txn_text(op) for op in case.get("cycle") or [] if isinstance(op, Mapping))
            rows.append([k, case.get("explanation", ""), txns])
    first = next((c for k in kinds for c in list(anomalies.get(k) or [])[:1]), None)
    return Story(
        head,
        lines[:EXAMPLES],
        [("Anomalies", ["type", "why", "transactions"], rows)] if rows else [],
        _cycle_svg(first),
    )


def _cycle_svg(case: Mapping[str, Any] | None) -> str:
    """The first cycle, drawn again from its ops and steps (the result's own SVG text is not trusted)."""
    if not case or not isinstance(case.get("cycle"), list) or not isinstance(case.get("steps"), list):
        return ""
    ops = case["cycle"]
    try:
        return draw([f"T{i + 1}" for i in range(len(ops))], ops, case["steps"], str(case.get("type", "")))
    except (KeyError, TypeError, ValueError, IndexError):
        return ""  # a result from another version: the words and the table still tell it


def _logs(name: str, res: Mapping[str, Any], h: _History) -> Story:
    """The log checker: lines in the nodes' logs that mean a crash, corruption or a broken invariant."""
    if res.get("valid") is not False:
        return Story(f"{name}: {res.get('error') or res.get('note') or 'no verdict'}.")
    bad = [m for m in res.get("unexpected_matches") or [] if isinstance(m, Mapping)]
    n = res.get("unexpected_match_count", len(bad))
    s = Story(
        f"{name}: {n} line(s) in the nodes' logs mean a crash, corrupted data or a broken invariant, "
        "and no fault that ran explains them."
    )
    for m in bad[:EXAMPLES]:
        when = m.get("time") or (f"after {m['after']}" if m.get("after") else "no time")
        s.lines.append(
            f"{m.get('node')} {m.get('file')} line {m.get('line')} ({when}): {m.get('meaning')}: "
            f"{m.get('text')}" + (f" (in: {m['after_text']})" if m.get("after_text") else "")
        )
    cols = ["node", "file", "line", "time", "patterns", "text"]
    s.tables.append(("every unexpected line listed", cols, [_log_line_row(m) for m in bad]))
    ok = [m for m in res.get("expected_matches") or [] if isinstance(m, Mapping)]
    if ok:
        rows = [[*_log_line_row(m), ", ".join(map(str, m.get("expected_under") or []))] for m in ok]
        s.tables.append(("lines expected under the faults that ran", [*cols, "expected under"], rows))
    return s


def _log_line_row(m: Mapping[str, Any]) -> list[Any]:
    """One matched log line as a table row: node, file, line, time, patterns, text."""
    return [
        m.get("node"),
        m.get("file"),
        m.get("line"),
        m.get("time") or m.get("after") or "",
        ", ".join(map(str, m.get("patterns") or [])),
        m.get("text"),
    ]


def _generic(name: str, res: Mapping[str, Any]) -> Story:
    if res.get("error"):
        return Story(f"{name}: {res['error']}")
    counts = [
        f"{k.removesuffix('_count').replace('_', ' ')}: {x}"
        for k, x in res.items()
        if k.endswith("_count") and isinstance(x, int) and x and k not in ("read_count", "attempt_count")
    ]
    return Story(f"{name}: " + ("; ".join(counts) if counts else "invalid (the evidence is below)") + ".")
