"""Where the CLI remembers clusters between commands (`up` in one process, `status`/`down` in another).

Docker clusters are found from their labels; local and ssh clusters need this small JSON record. Local
clusters live under /run (like the namespaces themselves, gone after a reboot); ssh clusters under the
user's state directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def state_dir(kind: str) -> Path:
    if kind == "local":
        return Path(os.environ.get("FAULTLINE_RUN_DIR", "/run/faultline")) / "clusters"
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "faultline" / "clusters"


def _path(kind: str, name: str) -> Path:
    return state_dir(kind) / f"{kind}-{name}.json"


def save(kind: str, name: str, data: dict[str, Any]) -> None:
    p = _path(kind, name)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(p)


def load(kind: str, name: str) -> dict[str, Any] | None:
    try:
        return json.loads(_path(kind, name).read_text())
    except (OSError, ValueError):
        return None


def remove(kind: str, name: str) -> None:
    _path(kind, name).unlink(missing_ok=True)


def names(kind: str) -> list[str]:
    d = state_dir(kind)
    if not d.is_dir():
        return []
    return sorted(p.stem[len(kind) + 1 :] for p in d.glob(f"{kind}-*.json"))
