"""The docs name real files: every path docs/architecture.md names exists, written from the repository root,
and no other doc names a path under one of the package's folders that is gone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOP = [
    *("core", "gen", "node", "db", "dbs", "cluster", "nemesis", "workloads", "controller", "history"),
    *("checkers", "pages", "results", "testing", "tests", "benchmarks", "campaigns", "scripts", "docs"),
    *("notebooks", ".ci"),
]
# a path from the repository root: one of its folders, then names (a folder ends with "/")
ROOTED = re.compile(r"(?<![\w./-])((?:" + "|".join(re.escape(t) for t in TOP) + r")/[\w./-]*[\w/])")
# a file named in backquotes: `name.py`, `some/name.rs`
QUOTED = re.compile(r"`([\w./-]+\.(?:py|rs|c|toml|md|js|sh|proto|ipynb|lock))`")
EXTERNAL = ("docs/screenshots/",)  # written by tools, named only by folder


def rooted_paths(text: str) -> list[tuple[int, str]]:
    return [(text[: m.start()].count("\n") + 1, m.group(1)) for m in ROOTED.finditer(text)]


def quoted_files(text: str) -> list[tuple[int, str]]:
    return [(text[: m.start()].count("\n") + 1, m.group(1)) for m in QUOTED.finditer(text)]


def test_every_path_the_architecture_names_exists() -> None:
    doc = ROOT / "docs" / "architecture.md"
    text = doc.read_text()
    rooted = rooted_paths(text)
    assert len(rooted) > 40, "the architecture names the project's files by their paths"
    missing = [f"line {n}: {p}" for n, p in rooted if not (ROOT / p).exists()]
    # a file named alone must be one at the root (README.md, setup.py) or written from the root
    loose = [f"line {n}: {p}" for n, p in quoted_files(text) if not (ROOT / p).exists()]
    assert not missing and not loose, "docs/architecture.md names paths that do not exist:\n" + "\n".join(
        missing + loose
    )


@pytest.mark.parametrize("doc", [*sorted(p.name for p in (ROOT / "docs").glob("*.md")), "../README.md"])
def test_no_doc_names_a_file_that_moved(doc: str) -> None:
    text = (ROOT / "docs" / doc).read_text()
    gone = [
        f"line {n}: {p}"
        for n, p in rooted_paths(text)
        if not (ROOT / p).exists() and not p.startswith(EXTERNAL) and "." in p.rsplit("/", 1)[-1]
    ]
    assert not gone, f"docs/{doc} names files that do not exist:\n" + "\n".join(gone)


def test_the_path_patterns_find_what_they_should() -> None:
    sample = "see `dbs/store/faults/packages.py`, db/api.py and `README.md`; 1/2 and ops/s are not paths"
    assert [p for _, p in rooted_paths(sample)] == ["dbs/store/faults/packages.py", "db/api.py"]
    assert [p for _, p in quoted_files(sample)] == ["dbs/store/faults/packages.py", "README.md"]
