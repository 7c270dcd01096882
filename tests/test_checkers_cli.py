"""`faultline check`: one JSON line per file, merged exit code, clear errors with exit 254."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from faultline.controller.cli import main

ETCD = "anchors/porcupine/etcd"


def run_cli(args: list[str], capsys) -> tuple[int, list[dict], str]:  # type: ignore[no-untyped-def]
    rc = main(["check", *args])
    out, err = capsys.readouterr()
    return rc, [json.loads(line) for line in out.splitlines() if line.strip()], err


def test_valid_invalid_and_merge(shared_dir: Path, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    good, bad = str(shared_dir / ETCD / "etcd_002.log"), str(shared_dir / ETCD / "etcd_000.log")
    rc, lines, _ = run_cli([good], capsys)
    assert rc == 0 and lines[0]["valid"] is True and lines[0]["model"] == "cas-register"
    assert {"file", "valid", "model", "ops", "elapsed_s", "evidence"} <= set(lines[0])
    rc, lines, _ = run_cli([good, bad, "--html", str(tmp_path)], capsys)
    assert rc == 1 and [x["valid"] for x in lines] == [True, False]
    assert lines[1]["evidence"]["failure"]["op"] is not None
    assert Path(lines[1]["counterexample"]).is_file()


def test_unknown_exit_2(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    n = 22
    ops = [{"type": "invoke", "process": p, "f": "write", "value": p} for p in range(n)]
    ops += [
        {"type": "invoke", "process": 100, "f": "read", "value": None},
        {"type": "ok", "process": 100, "f": "read", "value": 999},
    ]
    ops += [{"type": "ok", "process": p, "f": "write", "value": p} for p in range(n)]
    p = tmp_path / "hard.jsonl"
    p.write_text("".join(json.dumps(o) + "\n" for o in ops))
    rc, lines, _ = run_cli([str(p), "--model", "register", "--init", "0", "--time-limit", "0.2"], capsys)
    assert rc == 2 and lines[0]["valid"] == "unknown"


def test_bad_input_exit_254(tmp_path: Path, capsys, shared_dir: Path) -> None:  # type: ignore[no-untyped-def]
    rc, _, err = run_cli([str(tmp_path / "missing.jsonl")], capsys)
    assert rc == 254 and "missing.jsonl: no such file" in err
    p = tmp_path / "torn.jsonl"
    p.write_text('{"type": "invoke", "process": 0, "f": "read"}\n{"type": oops}\n{"type": "ok"}\n')
    rc, lines, err = run_cli([str(shared_dir / ETCD / "etcd_002.log"), str(p)], capsys)
    assert rc == 254 and f"{p}:2:" in err and len(err.strip().splitlines()) == 1
    assert lines[0]["valid"] is True  # the good file is still reported
    with pytest.raises(SystemExit) as exit_:  # refused while the options are parsed (core.options)
        run_cli([str(p), "--time-limit", "-1"], capsys)
    assert exit_.value.code == 254


def test_other_checkers_and_formats(shared_dir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    base = shared_dir / "anchors" / "elle-cli" / "histories" / "jepsen"
    rc, lines, _ = run_cli(["--checker", "bank", str(base / "bank.edn"), str(base / "bank.json")], capsys)
    assert rc == 0 and [x["format"] for x in lines] == ["jepsen-edn", "elle-json"]
    rc, lines, _ = run_cli(["--checker", "bank", str(base / "bank-negative-balances.json")], capsys)
    assert rc == 1
    kv = shared_dir / "anchors" / "porcupine" / "kv" / "c01-bad.txt"
    rc, lines, _ = run_cli([str(kv), "--engine", "python"], capsys)
    assert rc == 1 and lines[0]["model"] == "kv" and lines[0]["evidence"]["engine"] == "python"


def test_console_script_help_and_argparse_errors() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "faultline", "check", "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and "--time-limit" in proc.stdout and "254" in proc.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "faultline", "check", "x", "--model", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 254


def test_stability_window_flag(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """--stability-window SECONDS turns the set checker's window on; off by default; bad values are 254."""
    ops = [
        {"type": "invoke", "process": 0, "f": "add", "value": 1, "time": 0},
        {"type": "ok", "process": 0, "f": "add", "value": 1, "time": 10**9},
        {"type": "invoke", "process": 1, "f": "read", "value": None, "time": 2 * 10**9},
        {"type": "ok", "process": 1, "f": "read", "value": [], "time": 3 * 10**9},
    ]
    p = tmp_path / "set.jsonl"
    p.write_text("".join(json.dumps(o) + "\n" for o in ops))
    rc, lines, _ = run_cli([str(p)], capsys)
    assert rc == 1 and lines[0]["model"] == "set" and lines[0]["evidence"]["lost"] == [1]
    rc, lines, _ = run_cli([str(p), "--stability-window", "5"], capsys)
    assert rc == 2 and lines[0]["evidence"]["unconfirmed_lost"] == [1]
    rc, lines, _ = run_cli([str(p), "--stability-window", "0.5"], capsys)
    assert rc == 1 and lines[0]["evidence"]["stability_window_s"] == 0.5
    for bad in ("-1", "nan", "inf", "-inf", "soon"):
        with pytest.raises(SystemExit) as exc:
            run_cli([str(p), f"--stability-window={bad}"], capsys)
        err = capsys.readouterr().err
        assert exc.value.code == 254 and len(err.strip().splitlines()) == 1 and "--stability-window" in err, (
            bad
        )


@pytest.mark.parametrize("depth", [150, 1030, 5000])
@pytest.mark.parametrize("name", ["deep.jsonl", "deep.txt"])
def test_a_first_line_nested_deep_is_refused_with_the_format_detected(
    tmp_path: Path,
    capsys,
    depth: int,  # type: ignore[no-untyped-def]
    name: str,
) -> None:
    """Format detection parses the first line: 5,000 levels once crashed it (RecursionError, exit 255).
    1,030 is past orjson's limit of 1,024 and below Python's recursion limit."""
    p = tmp_path / name
    p.write_text(
        '{"type": "invoke", "process": 0, "f": "write", "value": ' + "[" * depth + "]" * depth + "}\n"
    )
    rc, lines, err = run_cli([str(p)], capsys)
    assert (
        rc == 254
        and not lines
        and err.strip() == f"faultline check: error: {p}:1: a value nested deeper than 100 levels"
    ), err


def test_an_unknown_edn_tag_is_refused(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "h.edn"
    p.write_text(
        "[{:process 0, :type :invoke, :f :write, :value 1}\n"
        " {:process 0, :type :ok, :f :write, :value #foo/bar 1}]\n"
    )
    rc, lines, err = run_cli([str(p)], capsys)
    assert rc == 254 and not lines and len(err.strip().splitlines()) == 1
    assert f"{p}:2: malformed EDN: unknown EDN tag #foo/bar" in err
    p.write_text(
        '[#jepsen.history.Op{:process 0, :type :invoke, :f :write, :value 1, :time #inst "2026-11-26"}\n'
        " #jepsen.history.Op{:process 0, :type :ok, :f :write, :value 1}]\n"
    )
    rc, lines, _ = run_cli([str(p), "--model", "register"], capsys)
    assert rc == 0 and lines[0]["valid"] is True


def _nul_padded_run(tmp_path: Path) -> Path:
    """A stored run whose history.jsonl ends as a crash in the middle of a write leaves it: a cut line, then
    NUL bytes up to the size the file system had already given the file."""
    from faultline.results.synth import synth_store

    (run,) = synth_store(tmp_path / "store", runs=1, ops=100, anomaly_rate=0.0, jobs=1)
    hist = run / "history.jsonl"
    data = hist.read_bytes()
    hist.write_bytes(data[:-30] + b"\0" * 4096)
    return run


def test_check_and_analyze_take_a_nul_padded_history_as_a_cut_one(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Both once refused the run: binary data (NUL bytes), exit 254."""
    run = _nul_padded_run(tmp_path)
    lines_in_file = (run / "history.jsonl").read_bytes().count(b"\n")
    rc, lines, err = run_cli([str(run / "history.jsonl")], capsys)
    assert rc == 0 and lines[0]["valid"] is True, err
    assert len(lines[0]["warnings"]) == 1
    assert (
        f":{lines_in_file + 1}: ignoring a truncated last line and the 4096 NUL bytes"
        in lines[0]["warnings"][0]
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = main(["analyze", "--json", str(run)])
    out, err = capsys.readouterr()
    assert rc == 0 and json.loads(out)["valid"] is True, err
