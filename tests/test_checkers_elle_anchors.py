"""Every transactional (list-append, rw-register) history in ../shared/anchors/elle-cli gets elle-cli's verdict."""

from __future__ import annotations

import csv
import json
import shlex
from pathlib import Path

from faultline import history
from faultline.checkers.elle import checker
from faultline.checkers.elle.txns import detect_kind
from faultline.controller.cli import main as cli_main

KINDS = ("list-append", "rw-register")


def _rows(shared: Path) -> list[tuple[Path, str, list[str] | None, bool]]:
    base = shared / "anchors" / "elle-cli"
    with open(base / "VERDICTS.tsv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    out = []
    for r in rows:
        words = shlex.split(r["model/opts"].replace("(", "").replace(")", ""))
        if not words or words[0] not in KINDS:
            continue
        models = None
        if "--consistency-models" in words:
            models = words[words.index("--consistency-models") + 1].split(",")
        out.append((base / r["file"], words[0], models, r["expected_valid"] == "true"))
    return out


def test_elle_cli_transactional_anchors(shared_dir: Path) -> None:
    rows = _rows(shared_dir)
    assert len(rows) >= 5, rows
    assert {k for _, k, _, _ in rows} == set(KINDS) and {e for *_, e in rows} == {True, False}
    wrong = []
    for path, kind, models, expected in rows:
        ops = history.load(path).ops
        assert detect_kind(ops) == kind, path
        r = checker.check(ops, kind, models)
        if r["valid"] is not expected:
            wrong.append((path.name, expected, r["valid"], r["anomaly_types"]))
    assert not wrong, wrong


def test_elle_cli_named_anomalies(shared_dir: Path) -> None:
    """elle-cli's published results name G-single-item (the paper's example) and G2-item (gh-30)."""
    base = shared_dir / "anchors" / "elle-cli" / "histories" / "elle"
    paper = checker.check(history.load(base / "paper-example.json").ops, "list-append")
    assert paper["anomaly_types"] == ["G-single-item"]
    assert paper["not"] == ["consistent-view", "repeatable-read"]
    gh30 = checker.check(history.load(base / "list-append-gh-30.edn").ops, "list-append", ["serializable"])
    assert gh30["anomaly_types"] == ["G2-item"] and gh30["not"] == ["repeatable-read"]


def test_elle_cli_anchors_through_the_cli(shared_dir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`faultline check` detects each transactional anchor by itself; exit code is the merged verdict."""
    for path, kind, models, expected in _rows(shared_dir):
        argv = ["check", str(path)] + (["--consistency-models", ",".join(models)] if models else [])
        rc = cli_main(argv)
        line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert line["valid"] is expected and line["model"] == f"elle-{kind}", (path, line)
        assert rc == (0 if expected else 1)
