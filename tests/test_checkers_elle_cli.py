"""`faultline check` on transactional histories: formats, Jepsen store directories, options, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from faultline import history
from faultline.controller.cli import main as cli_main

EXIT_BAD_INPUT = 254

# Write skew: each transaction misses the other's append (G2-item); snapshot isolation allows it.
SKEW = [
    {"index": 0, "type": "invoke", "process": 0, "f": "txn", "value": [["append", "x", 1], ["r", "y", None]]},
    {"index": 1, "type": "invoke", "process": 1, "f": "txn", "value": [["append", "y", 1], ["r", "x", None]]},
    {"index": 2, "type": "ok", "process": 0, "f": "txn", "value": [["append", "x", 1], ["r", "y", []]]},
    {"index": 3, "type": "ok", "process": 1, "f": "txn", "value": [["append", "y", 1], ["r", "x", []]]},
]
SERIAL = [
    {"index": 0, "type": "invoke", "process": 0, "f": "txn", "value": [["w", "x", 1]]},
    {"index": 1, "type": "ok", "process": 0, "f": "txn", "value": [["w", "x", 1]]},
    {"index": 2, "type": "invoke", "process": 1, "f": "txn", "value": [["r", "x", None]]},
    {"index": 3, "type": "ok", "process": 1, "f": "txn", "value": [["r", "x", 1]]},
]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict[str, Any]], str]:
    rc = cli_main(["check", *argv])
    out, err = capsys.readouterr()
    return rc, [json.loads(line) for line in out.splitlines() if line.strip()], err


def _edn_store(tmp: Path, ops: list[dict[str, Any]], test: str | None) -> Path:
    store = tmp / "store" / "elle-test" / "20250101T000000.000Z"
    store.mkdir(parents=True)
    (store / "history.edn").write_text(history.to_edn(ops).strip("[]\n") + "\n", encoding="utf-8")
    if test is not None:
        (store / "test.edn").write_text(test, encoding="utf-8")
    return store


def test_our_jsonl_is_detected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = history.write_jsonl(SKEW, tmp_path / "history.jsonl")
    rc, lines, _ = _run([str(path)], capsys)
    assert rc == 1 and lines[0]["model"] == "elle-list-append" and lines[0]["valid"] is False
    ev = lines[0]["evidence"]
    assert ev["anomaly_types"] == ["G2-item"]
    case = ev["anomalies"]["G2-item"][0]
    assert "explanation" in case and "svg" not in case and len(case["cycle"]) == 2
    rc, lines, _ = _run([str(path), "--consistency-models", "snapshot-isolation"], capsys)
    assert rc == 0 and lines[0]["valid"] is True


def test_rw_register_jsonl_and_explicit_checker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = history.write_jsonl(SERIAL, tmp_path / "h.jsonl")
    rc, lines, _ = _run([str(path)], capsys)
    assert rc == 0 and lines[0]["model"] == "elle-rw-register"
    rc, lines, _ = _run([str(path), "--checker", "elle-rw-register"], capsys)
    assert rc == 0 and lines[0]["valid"] is True


def test_jepsen_store_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _edn_store(
        tmp_path,
        SKEW,
        '{:name "elle-test", :consistency-models [:snapshot-isolation], '
        ':nodes ["n1" "n2"], :remote #object[jepsen.control.SSHRemote 0x1 "x"]}',
    )
    rc, lines, _ = _run([str(store)], capsys)
    assert rc == 0 and lines[0]["valid"] is True  # test.edn claims snapshot isolation
    assert lines[0]["evidence"]["consistency_models"] == ["snapshot-isolation"]
    rc, lines, _ = _run([str(store), "--consistency-models", "serializable"], capsys)
    assert rc == 1 and lines[0]["valid"] is False  # the command line wins
    bare = _edn_store(tmp_path / "b", SKEW, None)
    rc, lines, _ = _run([str(bare)], capsys)
    assert rc == 1 and any("no test.edn" in w for w in lines[0]["warnings"])


def test_html_report_draws_each_cycle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = history.write_jsonl(SKEW, tmp_path / "skew.jsonl")
    rc, lines, _ = _run([str(path), "--html", str(tmp_path / "out")], capsys)
    page = Path(lines[0]["counterexample"]).read_text(encoding="utf-8")
    assert rc == 1 and "<svg" in page and "G2-item" in page and "did not see" in page


def test_bad_input_is_one_line_and_254(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mixed = [["append", "x", 1], ["w", "x", 2]]
    bad = history.write_jsonl(
        [
            {"index": 0, "type": "invoke", "process": 0, "f": "txn", "value": mixed},
            {"index": 1, "type": "ok", "process": 0, "f": "txn", "value": mixed},
        ],
        tmp_path / "bad.jsonl",
    )
    rc, _, err = _run([str(bad), "--checker", "elle-list-append"], capsys)
    assert rc == EXIT_BAD_INPUT and len(err.strip().splitlines()) == 1 and "no writes" in err
    rc, _, err = _run([str(tmp_path), "--checker", "elle-list-append"], capsys)
    assert rc == EXIT_BAD_INPUT and "history.edn" in err
    rc, _, err = _run([str(bad), "--consistency-models", "eventual"], capsys)
    assert rc == EXIT_BAD_INPUT and "unknown consistency model" in err
    with pytest.raises(SystemExit) as exit_:  # refused while the options are parsed (core.options)
        _run([str(bad), "--cycle-search-timeout", "0"], capsys)
    assert exit_.value.code == EXIT_BAD_INPUT
    reg = history.write_jsonl(
        [
            {"index": 0, "type": "invoke", "process": 0, "f": "read", "value": None},
            {"index": 1, "type": "ok", "process": 0, "f": "read", "value": 1},
        ],
        tmp_path / "r.jsonl",
    )
    rc, _, err = _run([str(reg), "--checker", "elle-rw-register"], capsys)
    assert rc == EXIT_BAD_INPUT and "no transactions" in err


def test_multi_register_histories_still_go_to_linearizability(
    shared_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = shared_dir / "anchors" / "knossos" / "multi-register" / "good" / "multi-register.edn"
    rc, lines, _ = _run([str(path)], capsys)
    assert lines[0]["model"] == "multi-register" and rc == 0
