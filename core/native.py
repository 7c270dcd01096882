"""The optional compiled extensions (checkers/_wgl.c, checkers/elle/_scc.c and _append.c, history/_jsonl.c):
each has a Python twin that gives the same answers, so a machine without a C compiler still runs."""

from __future__ import annotations

import importlib
from typing import Any


def extension(module: str, abi: int) -> Any:
    """The compiled `module` when it was built from sources that speak calling convention `abi`, else None:
    not built (the Python twin runs), or a stale build from older sources (never used)."""
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return None
    return mod if getattr(mod, "ABI", None) == abi else None
