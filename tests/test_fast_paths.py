"""The speed-ups of `faultline check` keep their meaning: a subcommand's parser alone answers as the whole
parser does, `faultline check` imports no other subcommand's dependencies, and the inlined transaction
detection agrees with its plain definition on histories of every shape."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from faultline.checkers.elle.txns import detect_kind, is_mop_list
from faultline.controller.cli import build_parser, main


def _need_compiled_scc() -> None:
    """Skips where the optional extension was not built (a compiler-less install); CI builds it, so there a
    missing build is a failure, never a skip."""
    from faultline.checkers.elle import graph

    if graph._scc is None:
        if os.environ.get("CI") == "true":
            pytest.fail("checkers/elle/_scc.c is not built (make install builds it)")
        pytest.skip("checkers/elle/_scc.c is not built")


def _plain_detect_kind(history: Sequence[Mapping[str, Any]]) -> str | None:
    """detect_kind as first written: one op at a time through is_mop_list."""
    seen, fs, list_reads = False, set(), False
    for op in history:
        if not isinstance(op, dict):
            continue
        f = op.get("f")
        if not ((f == "txn" or f is None) and op.get("process") != "nemesis"):
            continue
        value = op.get("value")
        if value is None or value == []:
            continue
        if not is_mop_list(value):
            return None
        seen = True
        for mf, _k, v in value:
            fs.add(mf)
            if mf == "r" and isinstance(v, list | tuple):
                list_reads = True
    if not seen:
        return None
    if "append" in fs or (list_reads and "w" not in fs):
        return "list-append"
    return "rw-register"


_MOPS: list[Any] = [["append", 1, 2], ["r", 1, [1, 2]], ["r", 1, None], ["r", 2, 3], ["w", 2, 3], ("r", 1, (1,)),
                    ["read", 1, 2], ["r", 1], "r", 7, ["r", 1, 2, 3], [None, 1, 2], ["append", "k", "v"]]
_VALUES: list[Any] = [None, [], (), 5, "x", {"a": 1}]


def _random_history(rng: random.Random) -> list[Any]:
    ops: list[Any] = []
    for i in range(rng.randint(0, 6)):
        value = rng.choice(_VALUES) if rng.random() < 0.2 else \
            [rng.choice(_MOPS) for _ in range(rng.randint(1, 4))]
        op = {"index": i, "type": rng.choice(["invoke", "ok"]), "process": rng.choice([0, 1, "nemesis"]),
              "f": rng.choice(["txn", "txn", None, "read"]), "value": value}
        if rng.random() < 0.1:
            del op["f"]
        ops.append(op if rng.random() < 0.95 else "not an op")
    return ops


def test_detect_kind_agrees_with_its_plain_definition() -> None:
    rng = random.Random(30)
    kinds = set()
    for _ in range(5000):
        h = _random_history(rng)
        kinds.add(_plain_detect_kind(h))
        assert detect_kind(h) == _plain_detect_kind(h), h
    assert kinds == {None, "list-append", "rw-register"}


@pytest.mark.parametrize("argv", [["check"], ["check", "--no-such-option", "x"], ["check", "--format", "yaml", "x"],
                                  ["score", "--engine", "gpu", "x"], ["synth"]])
def test_a_named_command_is_refused_as_by_the_whole_parser(argv: list[str],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as whole:
        build_parser().parse_args(argv)
    whole_err = capsys.readouterr().err
    with pytest.raises(SystemExit) as alone:
        main(argv)
    assert alone.value.code == whole.value.code == 254
    assert capsys.readouterr().err == whole_err


def test_check_imports_no_other_command(tmp_path: Path) -> None:
    """Start-up is part of `faultline check`'s time: the nemeses, the store's client and networkx are not
    needed to check a file."""
    hist = tmp_path / "h.jsonl"
    hist.write_text("\n".join(json.dumps(op) for op in [
        {"index": 0, "type": "invoke", "process": 0, "f": "txn", "value": [["append", 1, 1]]},
        {"index": 1, "type": "ok", "process": 0, "f": "txn", "value": [["append", 1, 1]]}]) + "\n")
    code = ("import sys, runpy; sys.argv = ['faultline', 'check', sys.argv[1]]\n"
            "try:\n    runpy.run_module('faultline', run_name='__main__')\n"
            "except SystemExit as e:\n    print(e.code, sorted(m for m in sys.modules if m.split('.')[0] in "
            "('networkx', 'grpc') or m.startswith(('faultline.nemesis', 'faultline.node', 'faultline.dbs'))))")
    out = subprocess.run([sys.executable, "-c", code, str(hist)], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "0 []", out.stdout + out.stderr


def _same_partition(a: Any, b: Any) -> bool:
    """Whether two labellings of the same nodes group them alike (labels themselves may differ)."""
    pairs = set(zip(a.tolist(), b.tolist(), strict=True))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def test_compiled_components_are_scipys() -> None:
    """The compiled Tarjan (checkers/elle/_scc.c) and scipy group nodes alike on random graphs of every
    density, self-loops and repeated edges included, and components() lists the same components."""
    np = pytest.importorskip("numpy")
    from faultline.checkers.elle import graph

    _need_compiled_scc()
    rng = np.random.default_rng(30)
    for trial in range(300):
        n = int(rng.integers(0, 60))
        m = int(rng.integers(0, 3 * n + 1)) if n else 0
        src = rng.integers(0, max(n, 1), m).astype(np.int64)
        dst = rng.integers(0, max(n, 1), m).astype(np.int64)
        if n == 0:
            continue
        kc, lc = graph.scc_labels(n, src, dst, compiled=True)
        ks, ls = graph.scc_labels(n, src, dst, compiled=False)
        assert kc == ks and _same_partition(lc, ls), trial
        a, b = graph.components(n, src, dst, compiled=True), graph.components(n, src, dst, compiled=False)
        assert [c.tolist() for c in a] == [c.tolist() for c in b], trial
    # a long chain closed into one cycle: deep enough to overflow a recursive search
    n = 200_000
    src, dst = np.arange(n, dtype=np.int64), (np.arange(n, dtype=np.int64) + 1) % n
    assert graph.scc_labels(n, src, dst)[0] == 1
    assert graph.scc_labels(n, src[:-1], dst[:-1])[0] == n


def test_compiled_components_refuse_bad_edges() -> None:
    np = pytest.importorskip("numpy")
    from faultline.checkers.elle import graph

    _need_compiled_scc()
    with pytest.raises(ValueError):
        graph._scc.labels(3, np.array([0, 5], dtype=np.int64), np.array([1, 2], dtype=np.int64))
    with pytest.raises(ValueError):
        graph._scc.labels(3, np.array([0], dtype=np.int64), np.array([1, 2], dtype=np.int64))
    with pytest.raises(TypeError):
        graph._scc.labels(3, np.array([0], dtype=np.int32), np.array([1], dtype=np.int32))


def test_spark_batches_hold_every_run_once_and_balance(tmp_path: Path) -> None:
    """Plan runs' batches (results.spark._batches): each run in exactly one batch, the largest batch first,
    and no batch holding more than the largest run beyond an equal share."""
    from faultline.results.spark import _batches

    rng = random.Random(7)
    jobs = []
    for i in range(53):
        f = tmp_path / f"r{i}.parquet"
        f.write_bytes(b"x" * rng.randint(1, 5000))
        jobs.append((f"run{i}", str(f), "cas-register" if i % 3 else None))
    jobs.append(("gone", str(tmp_path / "missing.parquet"), None))  # unreadable: size 0, still scored
    for slots in (1, 2, 6, 54, 80):
        batches = _batches(jobs, slots)
        assert sorted(j for b in batches for j in b) == sorted(jobs)
        assert len(batches) == min(slots, len(jobs))
        loads = [sum(Path(j[1]).stat().st_size if Path(j[1]).exists() else 0 for j in b) for b in batches]
        assert loads == sorted(loads, reverse=True)
        biggest = max(Path(j[1]).stat().st_size for j in jobs if Path(j[1]).exists())
        assert loads[0] - loads[-1] <= biggest


def test_scoring_daemon_is_pysparks_with_the_scoring_modules() -> None:
    pytest.importorskip("pyspark")
    out = subprocess.run([sys.executable, "-c", "import sys, faultline.results.spark_daemon as d; "
                          "print('faultline.results.scoring' in sys.modules, callable(d.daemon.manager))"],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "True"], out.stderr
