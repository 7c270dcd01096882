"""timeline.html: every operation as a bar in its process's lane (nemesis in its own lane).

Green ok, red fail, amber info (open to the end of the run); hover a bar for the
full invocation and completion.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faultline.checkers._html import lanes_svg, page
from faultline.checkers.ops import Op, has_times


def write_timeline(history: list[Op], path: str | Path, test: Mapping[str, Any] | None = None) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    name = str((test or {}).get("name", "")) or "history"
    unit = "time" if has_times(history) else "operation index (the format has no times)"
    body = (f"<p>{len(history)} events; x axis: {unit}. Green ok, red fail, amber info (indeterminate), "
            "grey nemesis. Hover a bar for details.</p>" + lanes_svg(history))
    p.write_text(page(f"Timeline: {name}", body), encoding="utf-8")
    return p
