"""An Elle result as a self-contained HTML page: the verdict, each anomaly in words, each cycle drawn."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Any

from faultline.pages.layout import esc_json, page


def _anomaly(name: str, cases: list[Mapping[str, Any]], total: int) -> str:
    parts = [f"<h2>{escape(name)} ({total})</h2>"]
    for case in cases:
        parts.append(f"<p>{escape(str(case.get('explanation', '')))}</p>")
        if case.get("svg"):
            parts.append(str(case["svg"]))
    if total > len(cases):
        parts.append(f"<p>... and {total - len(cases)} more.</p>")
    return "".join(parts)


def render(result: Mapping[str, Any], title: str) -> str:
    """The page for one checked history."""
    body = [
        f"<p>valid: <b>{esc_json(result.get('valid'))}</b>; claimed: "
        f"{escape(', '.join(result.get('consistency_models', [])))}; "
        f"not: {escape(', '.join(result.get('not', [])) or 'none')}; also not: "
        f"{escape(', '.join(result.get('also_not', [])) or 'none')}.</p>"
    ]
    counts = result.get("counts", {})
    for name, cases in (result.get("anomalies") or {}).items():
        body.append(_anomaly(name, list(cases), counts.get(name, len(cases))))
    return page(title, "\n".join(body))


def write(result: Mapping[str, Any], path: str | Path, title: str) -> Path:
    """Writes the page to `path` and returns it."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(render(result, title), encoding="utf-8")
    return p
