"""A linearizability failure as a self-contained HTML page (and the same evidence as JSON).

The page shows every process's operations in lanes, the operation that could not
be linearized in red, the longest partial linearization found (numbered in
order), and the model states the search could be in at that point.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faultline.checkers._html import esc_json, lanes_svg, page
from faultline.checkers.ops import Op


def _find_failure(result: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The linearizability evidence inside a (possibly composed) result."""
    if "failure" in result and isinstance(result["failure"], Mapping):
        return result["failure"]
    if "op" in result and "linearized" in result:
        return result
    for v in result.values():
        if isinstance(v, Mapping) and v.get("valid") is False:
            found = _find_failure(v)
            if found is not None:
                return found
    return None


def evidence(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON form: bad op, partial linearization, reachable states (None if the result has none)."""
    f = _find_failure(result)
    if f is None:
        return None
    return {k: f.get(k) for k in ("key", "op", "previous_ok", "linearized", "final_states") if k in f}


def render_html(result: Mapping[str, Any], history: list[Op], path: str | Path) -> Path:
    """Writes the counterexample page to `path`; works for any failing result (lanes only if no evidence)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    f = _find_failure(result) or {}
    bad = f.get("op") or {}
    marked = {bad["invoke_index"]} if "invoke_index" in bad else set()
    lin = {c["invoke_index"]: i + 1 for i, c in enumerate(f.get("linearized") or []) if "invoke_index" in c}
    key = f.get("key")
    shown = history
    if key is not None:
        shown = [op for op in history if op.get("key") == key or op.get("process") == "nemesis"]
    parts = []
    if bad:
        parts.append(f"<p><b>Cannot linearize</b> {esc_json(bad)}"
                     + (f" (key {esc_json(key)})" if key is not None else "") + ".</p>")
        parts.append("<p>Red: the operation that could not be linearized. Blue numbers: the longest "
                     "partial linearization the search found, in order.</p>")
    else:
        parts.append(f"<p>valid: {esc_json(result.get('valid'))}; no linearizability evidence in this result.</p>")
    parts.append(lanes_svg(shown, marked, lin))
    if f.get("final_states") is not None:
        parts.append(f"<h2>Model states reachable at that point</h2><pre>{esc_json(f.get('final_states'))}</pre>")
    if f.get("linearized"):
        rows = "".join(f"<tr><td>{i + 1}</td><td>{esc_json(c.get('process'))}</td><td>{esc_json(c.get('f'))}</td>"
                       f"<td>{esc_json(c.get('value'))}</td><td>{esc_json(c.get('invoke_index'))}</td></tr>"
                       for i, c in enumerate(f["linearized"][-200:]))
        parts.append("<h2>Partial linearization (last 200)</h2><table class='mono'><tr><th>#</th><th>process</th><th>f</th>"
                     f"<th>value</th><th>invoke index</th></tr>{rows}</table>")
    parts.append(f"<h2>Result</h2><pre>{esc_json(result)}</pre>")
    p.write_text(page("Linearizability counterexample", "".join(parts)), encoding="utf-8")
    return p
