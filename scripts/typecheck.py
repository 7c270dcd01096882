"""Type-check Faultline with mypy: `python scripts/typecheck.py [OPTION ...] [PACKAGE ...]` (`make lint`,
tests/test_types.py).

mypy finds a package by its folder name on a search path, and the package `faultline` is the repository root,
whatever the clone's folder is called; an editable install's import hook is invisible to it. So mypy is shown
a folder holding one link, `faultline`, to the root (as protoc is, node/protos/_compile.py). The folder's path
is fixed per checkout so mypy's cache stays warm, and messages name files relative to the root.

With no package named, mypy checks what pyproject.toml's [tool.mypy] names (the whole package); named
packages (`faultline.core`, ...) are checked instead. Options (`--follow-imports=silent`, ...) go to mypy as
they are. The exit status is mypy's.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "faultline"


def search_dir(root: Path = ROOT) -> Path:
    """A folder whose one entry is a link `faultline` to `root`; made if missing, kept between runs."""
    tag = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    d = Path(tempfile.gettempdir()) / f"faultline-mypy-{os.getuid()}-{tag}"
    link = d / PACKAGE
    if not (link.is_symlink() and link.resolve() == root):
        d.mkdir(mode=0o700, exist_ok=True)
        tmp = d / f".{PACKAGE}.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(root, target_is_directory=True)
        tmp.replace(link)  # atomic: a concurrent run sees the old link or the new one
    return d


def run(args: list[str], root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """mypy with `args` (options, and packages to check instead of the configured ones), its output with
    paths relative to `root`."""
    d = search_dir(root)
    env = {**os.environ, "MYPYPATH": str(d)}
    args = [x for a in args for x in ((a,) if a.startswith("-") else ("-p", a))]
    out = subprocess.run(
        [sys.executable, "-m", "mypy", *args], cwd=root, env=env, capture_output=True, text=True, timeout=900
    )
    prefix = f"{d / PACKAGE}/"
    return subprocess.CompletedProcess(
        out.args, out.returncode, out.stdout.replace(prefix, ""), out.stderr.replace(prefix, "")
    )


def main(argv: list[str]) -> int:
    out = run(argv)
    sys.stdout.write(out.stdout)
    sys.stderr.write(out.stderr)
    return out.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
