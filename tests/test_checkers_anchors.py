"""Every reference history in ../shared/anchors gets its published verdict, with both search engines."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from faultline import history
from faultline.checkers import linearizability
from faultline.checkers.registry import get as get_checker


def _rows(shared: Path, sub: str) -> list[tuple[Path, bool]]:
    path = shared / "anchors" / sub / "VERDICTS.tsv"
    with open(path, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    out = []
    for r in rows:
        expected = r.get("expected_linearizable") or r.get("expected_valid")
        out.append((shared / "anchors" / sub / r["file"], expected == "true"))
    return out


ENGINES = [None, False] if linearizability._wgl is not None else [False]


@pytest.mark.parametrize("sub", ["porcupine", "knossos"])
@pytest.mark.parametrize("use_c", ENGINES, ids=lambda v: "python" if v is False else "auto")
def test_linearizability_anchors(shared_dir: Path, sub: str, use_c: bool | None) -> None:
    rows = _rows(shared_dir, sub)
    assert len(rows) >= 50, f"{sub}: expected the full reference set, found {len(rows)}"
    wrong = []
    for path, expected in rows:
        lh = history.load(path)
        r = linearizability.check(lh.ops, model=lh.model, semantics=lh.semantics, init=lh.init, use_c=use_c)
        if r["valid"] is not expected:
            wrong.append((path.name, expected, r["valid"]))
        if r["valid"] is False:
            assert r["failure"]["op"] is not None, path  # evidence names the bad operation
    assert not wrong, wrong


def test_anchor_sets_cover_both_verdicts(shared_dir: Path) -> None:
    rows = _rows(shared_dir, "porcupine") + _rows(shared_dir, "knossos")
    assert {e for _, e in rows} == {True, False}


ELLE = [
    ("histories/jepsen/counter.edn", "counter"),
    ("histories/jepsen/counter.json", "counter"),
    ("histories/jepsen/set.edn", "set"),
    ("histories/jepsen/set_full.edn", "set"),
    ("histories/jepsen/set_full.json", "set"),
    ("histories/jepsen/bank.edn", "bank"),
    ("histories/jepsen/bank.json", "bank"),
    ("histories/jepsen/bank-neg.edn", "bank"),
    ("histories/jepsen/bank-negative-balances.json", "bank"),
]


def test_elle_cli_anchors(shared_dir: Path) -> None:
    base = shared_dir / "anchors" / "elle-cli"
    with open(base / "VERDICTS.tsv", encoding="utf-8") as fh:
        expected = {r["file"]: r["expected_valid"] == "true" for r in csv.DictReader(fh, delimiter="\t")}
    for rel, checker in ELLE:
        lh = history.load(base / rel)
        r = get_checker(checker).check({}, lh.ops, {})
        assert r["valid"] is expected[rel], (rel, r)


def test_elle_cli_cas_register_json_twin(shared_dir: Path) -> None:
    base = shared_dir / "anchors" / "elle-cli" / "histories" / "knossos" / "cas-register" / "good"
    lh = history.load(base / "memstress3-9.json")
    assert lh.format == "elle-json"
    r = linearizability.check(lh.ops, model="cas-register", semantics="knossos", init=0)
    assert r["valid"] is True
