"""The tree stays as `make lint` leaves it: ruff's rules hold and `ruff format` would change nothing, so a
change that skipped the formatter fails CI, not the next reader."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert exe, "ruff is not installed (it is in the [dev] extra)"
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_rules_hold() -> None:
    out = ruff("check", "--no-cache", ".")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_ruff_format_changes_nothing() -> None:
    out = ruff("format", "--check", "--no-cache", ".")
    assert out.returncode == 0, "run `ruff format .`:\n" + out.stdout[-4000:] + out.stderr[-2000:]


def long_functions(limit: int) -> list[str]:
    """Every function (tests and benchmarks too) longer than `limit` lines, as path:line name length."""
    import ast

    out = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in (".venv", "build", ".git") or rel.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(rel))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    out.append(f"{rel}:{node.lineno} {node.name} ({length} lines)")
    return out


def test_functions_stay_short_enough_to_read_at_once() -> None:
    """None over 100 lines, at most 10 over 70 (docs/architecture.md, "Habits")."""
    assert not long_functions(100), long_functions(100)
    over_70 = long_functions(70)
    assert len(over_70) <= 10, "\n".join(over_70)
