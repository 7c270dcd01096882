"""A linearizability failure as one self-contained, interactive HTML page (and the evidence as JSON).

The page says in words what could not be linearized and why, then draws the failing key's operations in
lanes on a time axis: the longest linearized prefix the search found in blue, numbered and joined in its
order, the operation that cannot be placed in red. Stepping (buttons or arrow keys) walks the prefix and
shows the model's state after each op; hovering an op shows it too. The whole key is drawn, not a cut.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faultline.checkers.linearizability import prefix_states
from faultline.checkers.models import get_model
from faultline.core import Op
from faultline.pages.layout import lanes_chart, lanes_data, page
from faultline.pages.story import story, story_html

CONTEXT_OPS = 12  # linearized ops shown before the bad one in the first view


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


def _checker_result(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """The checker result that holds the failure (it names the model the prefix is replayed with)."""
    if isinstance(result.get("failure"), Mapping):
        return result
    for v in result.values():
        if isinstance(v, Mapping) and v.get("valid") is False:
            found = _checker_result(v)
            if found.get("failure") is not None:
                return found
    return result


def evidence(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON form: bad op, partial linearization, reachable states (None if the result has none)."""
    f = _find_failure(result)
    if f is None:
        return None
    return {k: f.get(k) for k in ("key", "op", "previous_ok", "linearized", "final_states") if k in f}


def _init_state(res: Mapping[str, Any]) -> Any:
    """The model's initial state, as the page shows states (the checker's default init)."""
    try:
        model = get_model(str(res.get("model", "cas-register")))
    except (KeyError, ValueError):
        return None
    return model.describe_state(model.init(None))


def _first_view(data: dict[str, Any], lin: list[int], bad: Any) -> list[float] | None:
    """From a few linearized ops before the bad one to just after it."""
    ops = data["ops"]
    where = {i: j for j, i in enumerate(ops["i"])}
    js = [where[i] for i in [*lin[-CONTEXT_OPS:], bad] if i in where]
    if not js:
        return None
    a, b = min(ops["s"][j] for j in js), max(min(ops["e"][j], data["t1"]) for j in js)
    pad = max((b - a) * 0.08, 1e-6)
    return [max(data["t0"], a - pad), min(data["t1"], b + pad)]


STEP_CONTROLS = (
    "<span style='margin-left:1em'>step:</span>"
    "<button data-do='first' title='before the first op'>first</button>"
    "<button data-do='prev' title='previous linearized op (&larr;)'>&#x25C0;</button>"
    "<button data-do='next' title='next linearized op (&rarr;)'>&#x25B6;</button>"
    "<button data-do='last' title='the last linearized op'>last</button>"
    "<button data-do='bad' title='show the op that cannot be placed'>failure</button>"
    "<span class='step'></span>"
)


def render_html(
    result: Mapping[str, Any],
    history: list[Op],
    path: str | Path,
    faults: list[dict[str, Any]] | None = None,
    concurrency: Any = None,
) -> Path:
    """Writes the counterexample page to `path`; works for any failing result (the story and the lanes of
    the whole history if it holds no linearizability evidence). `faults`: the run's fault windows."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    f = _find_failure(result)
    parts = []
    if f is None:
        name = next(
            (k for k, x in result.items() if isinstance(x, Mapping) and x.get("valid") is False), "checker"
        )
        parts.append(story_html(story(name, result, history)))
        parts.append(lanes_chart(lanes_data(history, faults, concurrency)))
        p.write_text(page("Counterexample", "".join(parts)), encoding="utf-8")
        return p
    res = _checker_result(result)
    key = f.get("key")
    shown = [op for op in history if key is None or op.get("key") == key or op.get("process") == "nemesis"]
    bad = (f.get("op") or {}).get("invoke_index")
    lin = [c.get("invoke_index") for c in f.get("linearized") or []]
    data = lanes_data(shown, faults, concurrency)
    data["lin"] = {
        "i": lin,
        "states": prefix_states(res) if "model" in res else None,
        "init": _init_state(res),
    }
    data["bad"] = bad
    data["view"] = _first_view(data, lin, bad)
    parts.append(story_html(story("linearizability", res, history)))
    scope = f"key {html.escape(repr(key))}" if key is not None else "the history"
    parts.append(
        f"<p id='bad-op' data-index='{html.escape(str(bad))}'>The chart holds every operation on {scope} "
        f"({len(data['ops']['s'])} ops). <span class='key' style='background:#3f7be0'></span>linearized, "
        "in order (the line joins them; numbers when zoomed in) <span class='key' style='background:#a9c4f2'>"
        "</span>linearized after the current step <span class='key' style='background:#ff3b30'></span>"
        "cannot be placed <span class='key' style='background:#d4d4d4'></span>not in the prefix "
        "<span class='key' style='background:#e0a526'></span>indeterminate. Step with the buttons or "
        "&larr;/&rarr; to see the model's state after each linearized op; hover an op for its details.</p>"
    )
    parts.append(lanes_chart(data, STEP_CONTROLS))
    finals = f.get("final_states")
    if finals is not None:
        parts.append(
            "<details><summary>Model states reachable when the search got stuck</summary><ul>"
            + "".join(f"<li><code>{html.escape(json.dumps(s, default=str))}</code></li>" for s in finals)
            + "</ul></details>"
        )
    if (p.parent / "results.json").exists():
        parts.append("<p>The checker's full result: <a href='results.json'>results.json</a>.</p>")
    p.write_text(page("Linearizability counterexample", "".join(parts)), encoding="utf-8")
    return p
