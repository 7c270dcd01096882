"""Histories of completions alone, as Elle's README and its own tests write them: accepted by the Elle
checkers, each completion standing for a transaction whose invocation is unknown, with Elle's verdicts.

The histories and expected results are transcribed from jepsen-io/elle (commit ccdee6f): README.markdown
(the list-append demo) and test/elle/list_append_test.clj, test/elle/rw_register_test.clj, whose `op`
helper builds `{:process 0, :type :ok, :f :txn, :value [...]}` from strings such as "ax1ry1". Where Elle
was asked for anomalies rather than consistency models, only cases with a model are taken. Elle names
only the anomalies it was asked about (a valid result is `{:valid? true}` alone); this checker names
every one it finds, so anomaly types are checked to include Elle's, while the verdict, and `not` where
Elle gives one, are Elle's exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from faultline import history
from faultline.checkers.elle import checker
from faultline.controller.cli import main
from faultline.controller.errors import EXIT_BAD_INPUT

# README.markdown, "Demo": three committed transactions; serializable -> G1c, not read-committed.
README_DEMO = """\
{:process 0, :type :ok, :value [[:append :x 1] [:r :y [1]]]}
{:process 1, :type :ok, :value [[:append :x 2] [:append :y 1]]}
{:process 2, :type :ok, :value [[:r :x [1 2]]]}
"""


def _txn(*mops: str, process: int = 0, typ: str = "ok") -> str:
    return f"{{:process {process}, :type :{typ}, :f :txn, :value [{' '.join(mops)}]}}"


def _edn(*ops: str) -> str:
    return "\n".join(ops)


# list_append_test.clj, checker-test "G2": (op "ax1ry") (op "ay1rx")
LA_G2 = _edn(_txn("[:append :x 1]", "[:r :y nil]"), _txn("[:append :y 1]", "[:r :x nil]"))
# list_append_test.clj, repeatable-read-test: (op "rxay1") (op "ryax1")
LA_RR = _edn(_txn("[:r :x nil]", "[:append :y 1]"), _txn("[:r :y nil]", "[:append :x 1]"))
# list_append_test.clj, checker-test "duplicated elements": (op "ax1ry1") (op "ax2ay1") (op "rx121")
LA_DUPLICATES = _edn(
    _txn("[:append :x 1]", "[:r :y [1]]"), _txn("[:append :x 2]", "[:append :y 1]"), _txn("[:r :x [1 2 1]]")
)
# list_append_test.clj, checker-test "G1a": a failed append of 1 to x, then (op "rx1"); read-committed
LA_G1A = _edn("{:process 0, :type :fail, :value [[:append :x 1]]}", _txn("[:r :x [1]]"))
# rw_register_test.clj, checker-test "G1c": (op "wx1ry1") (op "wy1rx1")
RW_G1C = _edn(_txn("[:w :x 1]", "[:r :y 1]"), _txn("[:w :y 1]", "[:r :x 1]"))
# rw_register_test.clj, checker-test "G1b": (op "wx1wx2") (op "rx1"); repeatable-read
RW_G1B = _edn(_txn("[:w :x 1]", "[:w :x 2]"), _txn("[:r :x 1]"))
# rw_register_test.clj, "G-single transaction-order" and "G2-item transaction-order", without the
# transaction order: nothing can be inferred, valid
RW_G_SINGLE = _edn(_txn("[:r :x nil]", "[:w :y 2]"), _txn("[:w :x 3]", "[:w :y 4]"))
RW_G2 = _edn(
    _txn("[:w :x 1]", "[:w :y 2]", "[:w :z 3]"),
    _txn("[:r :x 1]", "[:w :y 5]"),
    _txn("[:r :z 3]", "[:w :x 4]"),
    _txn("[:w :z 7]", "[:w :y 8]"),
)

LA, RW = "list-append", "rw-register"
RC, RR, SER = "read-committed", "repeatable-read", "serializable"
# (name, EDN history, kind, consistency model, Elle's valid?, Elle's anomaly types, Elle's :not or None)
CASES: list[tuple[str, str, str, str, Any, set[str], list[str] | None]] = [
    ("readme-demo", README_DEMO, LA, SER, False, {"G1c"}, [RC]),
    ("la-g2-" + RC, LA_G2, LA, RC, True, set(), None),
    ("la-g2-" + SER, LA_G2, LA, SER, False, {"G2-item"}, [RR]),
    ("la-g2-" + RR, LA_G2, LA, RR, False, {"G2-item"}, [RR]),
    ("la-rr-" + RC, LA_RR, LA, RC, True, set(), None),
    ("la-rr-" + RR, LA_RR, LA, RR, False, {"G2-item"}, [RR]),
    ("la-duplicates", LA_DUPLICATES, LA, RC, False, {"G1c", "duplicate-elements"}, ["read-uncommitted"]),
    ("la-g1a", LA_G1A, LA, RC, False, {"G1a"}, [RC]),
    ("rw-g1c-read-uncommitted", RW_G1C, RW, "read-uncommitted", True, set(), None),
    ("rw-g1c-" + RC, RW_G1C, RW, RC, False, {"G1c"}, [RC]),
    ("rw-g1c-" + SER, RW_G1C, RW, SER, False, {"G1c"}, [RC]),
    ("rw-g1b", RW_G1B, RW, RR, False, {"G1b"}, [RC]),
    ("rw-g-single-unordered", RW_G_SINGLE, RW, SER, True, set(), None),
    ("rw-g2-unordered", RW_G2, RW, SER, True, set(), None),
]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict[str, Any]], str]:
    rc = main(["check", *argv])
    out, err = capsys.readouterr()
    return rc, [json.loads(line) for line in out.splitlines() if line.strip()], err


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_elle_examples_of_completions_alone_get_elles_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: tuple[Any, ...]
) -> None:
    name, text, kind, model, valid, types, not_ = case
    path = tmp_path / f"{name}.edn"
    path.write_text(text + "\n")
    rc, lines, err = _run([str(path), "--consistency-models", model], capsys)
    assert lines, err
    out = lines[0]
    assert out["model"] == f"elle-{kind}" and out["valid"] is valid, (out, err)
    assert rc == (0 if valid is True else 1)
    assert types <= set(out["evidence"]["anomaly_types"]), out["evidence"]["anomaly_types"]
    if not_ is not None:
        assert out["evidence"]["not"] == not_
    assert out["evidence"]["without_invocation"] == len(text.strip().splitlines())


def test_the_readme_demo_as_elle_cli_json_and_with_the_checker_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ops = [
        {"process": 0, "type": "ok", "value": [["append", "x", 1], ["r", "y", [1]]]},
        {"process": 1, "type": "ok", "value": [["append", "x", 2], ["append", "y", 1]]},
        {"process": 2, "type": "ok", "value": [["r", "x", [1, 2]]]},
    ]
    path = tmp_path / "demo.json"
    path.write_text(json.dumps(ops))
    for extra in ([], ["--checker", "elle-list-append"]):
        rc, lines, err = _run([str(path), "--consistency-models", "serializable", *extra], capsys)
        assert rc == 1 and lines[0]["format"] == "elle-json", err
        assert lines[0]["evidence"]["anomaly_types"] == ["G1c"] and lines[0]["evidence"]["not"] == [
            "read-committed"
        ]


def test_without_invocations_realtime_is_said_to_be_partial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default claim (strict-serializable) needs realtime order, which completions alone do not give:
    the result says so; serializable needs none and says nothing. The verdict is Elle's either way."""
    path = tmp_path / "demo.edn"
    path.write_text(README_DEMO)
    rc, lines, _ = _run([str(path)], capsys)
    evidence = lines[0]["evidence"]
    assert rc == 1 and evidence["consistency_models"] == ["strict-serializable"]
    assert evidence["without_invocation"] == 3 and "no realtime order" in evidence["notes"][0]
    rc, lines, _ = _run([str(path), "--consistency-models", "serializable"], capsys)
    assert "notes" not in lines[0]["evidence"]
    valid = tmp_path / "valid.edn"
    valid.write_text("\n".join([_txn("[:append :x 1]"), _txn("[:r :x [1]]", process=1)]) + "\n")
    rc, lines, _ = _run([str(valid)], capsys)
    assert rc == 0 and lines[0]["valid"] is True and lines[0]["evidence"]["notes"]


def test_wfr_keys_on_completions_alone(tmp_path: Path) -> None:
    """rw_register_test.clj, checker-test "wfr": (op 0 :ok "ry1wx1wy2") (op 0 :ok "rx1ry1"); serializable
    is valid without writes-follow-reads and G-single-item with it."""
    path = tmp_path / "wfr.edn"
    path.write_text("\n".join([_txn("[:r :y 1]", "[:w :x 1]", "[:w :y 2]"), _txn("[:r :x 1]", "[:r :y 1]")]))
    ops = history.load(path, strict=False).ops
    plain = checker.check(ops, "rw-register", ["serializable"])
    assert plain["valid"] is True
    wfr = checker.check(ops, "rw-register", ["serializable"], wfr_keys=True)
    assert wfr["valid"] is False and "G-single-item" in wfr["anomaly_types"]
    assert wfr["not"] == ["consistent-view", "repeatable-read"]


def test_only_transactions_may_come_without_invocations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Other checkers pair every completion with its invocation (a register's read without one could be
    any age), and a transactional history that has invocations must pair all of its completions."""
    reg = tmp_path / "reg.edn"
    reg.write_text(
        "{:process 0, :type :ok, :f :write, :value 1}\n{:process 1, :type :ok, :f :read, :value 1}\n"
    )
    rc, lines, err = _run([str(reg)], capsys)
    assert rc == EXIT_BAD_INPUT and not lines and "without an invocation" in err
    assert len(err.strip().splitlines()) == 1
    mixed = tmp_path / "mixed.edn"
    mixed.write_text(
        "\n".join(
            [
                "{:process 0, :type :invoke, :f :txn, :value [[:append :x 1]]}",
                _txn("[:append :x 1]"),
                _txn("[:r :x [1]]", process=1),
            ]
        )
        + "\n"
    )
    for extra in ([], ["--checker", "elle-list-append"]):
        rc, _, err = _run([str(mixed), *extra], capsys)
        assert rc == EXIT_BAD_INPUT and f"{mixed}:3:" in err and "without an invocation" in err
    test_map = tmp_path / "named"
    test_map.mkdir()
    (test_map / "test.json").write_text('{"workload": "register"}')
    (test_map / "h.edn").write_text(README_DEMO)
    rc, _, err = _run([str(test_map / "h.edn")], capsys)  # the test map names a register: pairs needed
    assert rc == EXIT_BAD_INPUT and "without an invocation" in err
