"""The type checker (mypy, configured in pyproject.toml's [tool.mypy]) passes on the whole package, so CI
fails on a type error.

Strict where the layers meet (faultline.core, faultline.gen, the protocol modules, the cluster's registry,
every DB plug-in), mypy's defaults elsewhere (docs/architecture.md). scripts/typecheck.py shows mypy the
repository root as the package `faultline`.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_type_checks() -> None:
    assert importlib.util.find_spec("mypy"), "mypy is not installed (it is in the [dev] extra)"
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "typecheck.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert "Success: no issues found" in out.stdout


def test_a_type_error_fails_the_check(tmp_path: Path) -> None:
    """The check can fail: a scratch root with this project's mypy configuration and a module that breaks
    a strict rule (an unannotated function in faultline.core) is reported."""
    import importlib

    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "__init__.py").write_text('"""A probe."""\n\n\ndef half(x):\n    return x / 2\n')
    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))
    typecheck = importlib.import_module("typecheck")
    out = typecheck.run(["faultline.core"], root=tmp_path)
    assert out.returncode != 0 and "core/__init__.py" in out.stdout and "no-untyped-def" in out.stdout, (
        out.stdout
    )
