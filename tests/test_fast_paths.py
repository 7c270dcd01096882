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


_MOPS: list[Any] = [
    ["append", 1, 2],
    ["r", 1, [1, 2]],
    ["r", 1, None],
    ["r", 2, 3],
    ["w", 2, 3],
    ("r", 1, (1,)),
    ["read", 1, 2],
    ["r", 1],
    "r",
    7,
    ["r", 1, 2, 3],
    [None, 1, 2],
    ["append", "k", "v"],
]
_VALUES: list[Any] = [None, [], (), 5, "x", {"a": 1}]


def _random_history(rng: random.Random) -> list[Any]:
    ops: list[Any] = []
    for i in range(rng.randint(0, 6)):
        value = (
            rng.choice(_VALUES)
            if rng.random() < 0.2
            else [rng.choice(_MOPS) for _ in range(rng.randint(1, 4))]
        )
        op = {
            "index": i,
            "type": rng.choice(["invoke", "ok"]),
            "process": rng.choice([0, 1, "nemesis"]),
            "f": rng.choice(["txn", "txn", None, "read"]),
            "value": value,
        }
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


@pytest.mark.parametrize(
    "argv",
    [
        ["check"],
        ["check", "--no-such-option", "x"],
        ["check", "--format", "yaml", "x"],
        ["score", "--engine", "gpu", "x"],
        ["synth"],
    ],
)
def test_a_named_command_is_refused_as_by_the_whole_parser(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
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
    hist.write_text(
        "\n".join(
            json.dumps(op)
            for op in [
                {"index": 0, "type": "invoke", "process": 0, "f": "txn", "value": [["append", 1, 1]]},
                {"index": 1, "type": "ok", "process": 0, "f": "txn", "value": [["append", 1, 1]]},
            ]
        )
        + "\n"
    )
    code = (
        "import sys, runpy; sys.argv = ['faultline', 'check', sys.argv[1]]\n"
        "try:\n    runpy.run_module('faultline', run_name='__main__')\n"
        "except SystemExit as e:\n    print(e.code, sorted(m for m in sys.modules if m.split('.')[0] in "
        "('networkx', 'grpc') or m.startswith(('faultline.nemesis', 'faultline.node', 'faultline.dbs'))))"
    )
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
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, faultline.results.spark_daemon as d; "
            "print('faultline.results.scoring' in sys.modules, callable(d.daemon.manager))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout.split() == ["True", "True"], out.stderr


def _need_compiled_append() -> Any:
    """The compiled list-append loops (checkers/elle/_append.c), or a skip where they were not built (a
    failure in CI, which builds them)."""
    from faultline.checkers.elle import txns

    if txns._append is None:
        if os.environ.get("CI") == "true":
            pytest.fail("checkers/elle/_append.c is not built (make install builds it)")
        pytest.skip("checkers/elle/_append.c is not built")
    return txns._append


def _messy_list_append(rng: random.Random) -> list[Any]:
    """A small list-append history from a store that reads old snapshots, then damaged at random: every
    case the compiled loops hand back to Python (garbage, duplicates, nil and tuple reads, writes, a key
    twice in one transaction, completions alone, nemesis and other ops, odd types) and the usual one."""
    keys, state, snaps, hist = rng.randint(1, 4), {}, [{}], []
    open_: dict[int, list[Any]] = {}
    value = 0
    for i in range(rng.randint(0, 40)):
        p = rng.randrange(4)
        if p in open_ and rng.random() < 0.7:
            mops = open_.pop(p)
            view = {k: list(v) for k, v in rng.choice(snaps).items()} if rng.random() < 0.3 else state
            typ = rng.choice(["ok", "ok", "ok", "info", "fail"])
            out = []
            for f, k, v in mops:
                if f == "append" and typ != "fail":
                    state.setdefault(k, []).append(v)
                out.append([f, k, list(view.get(k, [])) if f == "r" else v])
            snaps.append({k: list(v) for k, v in state.items()})
            hist.append(
                {"index": i, "type": typ, "process": p, "f": "txn", "value": out if typ == "ok" else mops}
            )
            continue
        mops = []
        for _ in range(rng.randint(1, 4)):
            value += 1
            mops.append(
                ["r", rng.randrange(keys), None]
                if rng.random() < 0.5
                else ["append", rng.randrange(keys), value if rng.random() < 0.95 else rng.randint(1, 3)]
            )
        open_[p] = mops
        hist.append({"index": i, "type": "invoke", "process": p, "f": "txn", "value": mops})
    for _ in range(rng.choice([0, 0, 0, 1, 2])):
        _damage(rng, hist)
    return hist


def _damage(rng: random.Random, hist: list[Any]) -> None:
    """One random change of `hist` (see _messy_list_append)."""
    if not hist:
        return
    i = rng.randrange(len(hist))
    op = hist[i]
    mops = op.get("value") if isinstance(op, dict) else None
    mops = mops if isinstance(mops, list) and all(isinstance(m, list) and len(m) == 3 for m in mops) else None
    what = rng.randrange(10)
    if what == 0 and mops:
        rng.choice(mops)[2] = rng.choice([None, (1, 2), [99], [1, 1], 7, "x"])
    elif what == 1 and mops:
        mops.append(
            rng.choice([["w", 0, 1], ["r", 0], ("r", 0, None), ["cas", 0, 1], [0, 0, 0], ["r", [0], None]])
        )
    elif what == 2 and mops:
        mops.append(["r" if rng.random() < 0.5 else "append", mops[0][1], rng.choice([None, [1], 5])])
    elif what == 3:
        del hist[i]
    elif what == 4:
        hist.insert(i, {"index": -1, "type": "info", "process": "nemesis", "f": "partition", "value": None})
    elif what == 5:
        hist.insert(i, {"index": -1, "type": "invoke", "process": 9, "f": "read", "value": None})
    elif what == 6 and isinstance(op, dict):
        op[rng.choice(["type", "process", "f", "value", "index"])] = rng.choice(
            [None, "ok", "txn", (), {}, 3]
        )
    elif what == 7 and isinstance(op, dict):
        del op[rng.choice(list(op))]
    elif what == 8:
        hist[i] = "not an op"
    elif mops:
        op["value"] = tuple(mops)


def _outcome(fn: Any, *args: Any) -> str:
    """What `fn(*args)` returns or raises, as text (the check's own time left out)."""
    try:
        out = fn(*args)
    except Exception as exc:  # comparing failures is the point
        return f"raised {type(exc).__name__}: {exc}"
    if isinstance(out, dict):
        out = {k: v for k, v in out.items() if k != "elapsed_s"}
    return json.dumps(out, default=repr)


def test_compiled_list_append_loops_are_the_python_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """On random list-append histories, valid, invalid and malformed, the compiled loops of _append.c give
    what the Python loops give: the same kind, transactions, edges in the same order, anomalies, verdict and
    error."""
    from copy import deepcopy

    from faultline.checkers.elle import append, checker, txns

    core = _need_compiled_append()
    rng = random.Random(30)
    verdicts = set()
    for trial in range(3000):
        h = _messy_list_append(rng)
        runs = []
        for mod in (core, None):
            monkeypatch.setattr(txns, "_append", mod)
            hc = deepcopy(h)
            tx = _outcome(lambda h: vars(txns.parse(h)), hc)
            edges = _outcome(lambda h: append.infer(txns.parse(h)).edges.by_bit, hc)
            runs.append((txns.detect_kind(hc), tx, edges, _outcome(checker.check, hc, "list-append")))
        assert runs[0] == runs[1], (trial, h)
        verdicts.add(runs[0][3][:40])
    assert len(verdicts) > 3, verdicts  # valid, invalid, unknown and errors all came up
