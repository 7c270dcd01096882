"""The long-fork checker: reads of write-once keys must see the writes in one order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from faultline.checkers.long_fork import LongForkChecker
from faultline.checkers.ops import BadOp
from faultline.controller.cli import main


def _read(proc: int, seen: dict[int, Any]) -> list[dict[str, Any]]:
    """An invoke/ok pair reading the keys of `seen` (None: not yet written)."""
    return [
        {"type": "invoke", "process": proc, "f": "read", "value": [["r", k, None] for k in seen]},
        {"type": "ok", "process": proc, "f": "read", "value": [["r", k, v] for k, v in seen.items()]},
    ]


def _write(proc: int, key: int, ok: bool = True) -> list[dict[str, Any]]:
    return [
        {"type": "invoke", "process": proc, "f": "write", "value": [["w", key, 1]]},
        {"type": "ok" if ok else "info", "process": proc, "f": "write", "value": [["w", key, 1]]},
    ]


def _check(history: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    indexed = [{**op, "index": i} for i, op in enumerate(history)]
    return LongForkChecker(**kw).check({}, indexed, {})


def test_reads_that_see_growing_prefixes_are_valid() -> None:
    h = (
        _write(0, 0)
        + _read(1, {0: 1, 1: None, 2: None})
        + _write(0, 1)
        + _read(2, {0: 1, 1: 1, 2: None})
        + _read(3, {0: 1, 1: None, 2: None})
        + _write(0, 2, ok=False)
        + _read(1, {0: 1, 1: 1, 2: 1})
    )
    res = _check(h)
    assert res["valid"] is True and res["read_count"] == 4 and res["fork_count"] == 0


def test_two_reads_seeing_writes_in_opposite_orders_are_a_long_fork() -> None:
    h = _write(0, 0) + _write(4, 1) + _read(1, {0: 1, 1: None}) + _read(2, {0: None, 1: 1})
    res = _check(h)
    assert res["valid"] is False and res["fork_count"] == 1
    fork = res["forks"][0]
    assert fork["reads"] == [5, 7] or fork["reads"] == [7, 5]
    assert set(fork["keys"]) == {0, 1} and "opposite orders" in fork["explanation"]


def test_reads_of_overlapping_key_groups_are_compared_on_shared_keys() -> None:
    h = _read(1, {0: 1, 1: None, 5: 1}) + _read(2, {0: None, 1: 1, 9: None})
    assert _check(h)["valid"] is False
    assert _check(h, max_pairs=0)["valid"] == "unknown"  # not compared: never "valid"


def test_keys_written_twice_make_the_verdict_unknown() -> None:
    h = _read(1, {0: 1, 1: None}) + _read(2, {0: 2, 1: None})
    res = _check(h)
    assert res["valid"] == "unknown" and "not write-once" in res["error"]


@pytest.mark.parametrize("value", [[["x", 0, None]], [["r", 0]], 7, [["r", [1], None]]])
def test_values_that_are_not_micro_ops_are_bad_input(value: Any) -> None:
    h = [
        {"type": "invoke", "process": 0, "f": "read", "value": value, "index": 0},
        {"type": "ok", "process": 0, "f": "read", "value": value, "index": 1},
    ]
    with pytest.raises(BadOp):
        LongForkChecker().check({}, h, {})


def test_an_operation_it_does_not_know_is_bad_input() -> None:
    with pytest.raises(BadOp, match="no operation 'cas'"):
        LongForkChecker().check({}, [{"type": "invoke", "process": 0, "f": "cas", "value": [1, 2]}], {})


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text(
        "".join(json.dumps(op) + "\n" for op in _read(1, {0: 1, 1: None}) + _read(2, {0: 1, 1: 1}))
    )
    bad.write_text(
        "".join(json.dumps(op) + "\n" for op in _read(1, {0: 1, 1: None}) + _read(2, {0: None, 1: 1}))
    )
    assert main(["check", str(good), "--checker", "long-fork"]) == 0
    assert main(["check", str(bad), "--checker", "long-fork"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert json.loads(out[-1])["evidence"]["fork_count"] == 1
