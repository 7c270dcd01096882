"""History readers and writers: formats, detection, crash-safe JSONL, clear errors."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from faultline import history
from faultline.history import HistoryFormatError, JsonlWriter, edn, load, read_jsonl, to_edn, write_jsonl

OPS = [
    {"index": 0, "time": 10, "type": "invoke", "process": 0, "f": "write", "key": "k", "value": 3},
    {"index": 1, "time": 20, "type": "invoke", "process": "nemesis", "f": "start-partition", "value": None},
    {"index": 2, "time": 30, "type": "ok", "process": 0, "f": "write", "key": "k", "value": 3},
    {"index": 3, "time": 40, "type": "invoke", "process": 1, "f": "cas", "key": "k", "value": [3, 4]},
    {"index": 4, "time": 50, "type": "info", "process": 1, "f": "cas", "key": "k", "value": [3, 4],
     "error": "timeout"},
]


def test_jsonl_round_trip(tmp_path: Path) -> None:
    p = write_jsonl(OPS, tmp_path / "h.jsonl")
    assert read_jsonl(p) == OPS
    lh = load(p)
    assert (lh.format, lh.semantics) == ("jsonl", "jepsen")
    assert lh.ops == OPS


def test_writer_flushes_each_line_and_survives_a_torn_tail(tmp_path: Path) -> None:
    p = tmp_path / "run" / "history.jsonl"
    w = JsonlWriter(p)
    w.write(OPS[0])
    # Another reader sees the line at once (flushed), before close.
    assert read_jsonl(p) == [OPS[0]]
    w.write(OPS[2])
    w.close()
    with open(p, "a", encoding="utf-8") as fh:  # a crash in the middle of a write
        fh.write('{"index": 5, "type": "inv')
    with pytest.warns(UserWarning, match="truncated last line"):
        ops = read_jsonl(p)
    assert ops == [OPS[0], OPS[2]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert load(p).warnings and len(load(p).ops) == 2
    with pytest.raises(HistoryFormatError, match=r"history.jsonl:3"):
        read_jsonl(p, tolerate_truncated_tail=False)


def test_malformed_middle_line_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(OPS[0]) + "\n{not json}\n" + json.dumps(OPS[2]) + "\n")
    with pytest.raises(HistoryFormatError) as exc:
        load(p)
    assert str(exc.value).startswith(f"{p}:2:")


def test_bad_type_and_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"type": "maybe", "process": 0}\n')
    with pytest.raises(HistoryFormatError, match=r":1: .*type 'maybe'"):
        load(p)
    with pytest.raises(HistoryFormatError, match="no such file"):
        load(tmp_path / "missing.jsonl")


def test_edn_reader_subset() -> None:
    text = '; c\n[{:a 1, :b [1 2.5 "x\\"y"], :c #{:k} :d nil :e true} (1 2) #_ 3 4]\n{1 -2N}'
    vals = edn.loads_all(text)
    assert vals == [[{"a": 1, "b": [1, 2.5, 'x"y'], "c": ["k"], "d": None, "e": True}, [1, 2], 4], {1: -2}]
    with pytest.raises(edn.EdnError, match="line 2"):
        edn.loads_all("[1\n 2}")
    with pytest.raises(edn.EdnError, match="never closed"):
        edn.loads_all("[1 2")


def test_edn_malformed_file_names_line(tmp_path: Path) -> None:
    p = tmp_path / "h.edn"
    p.write_text("[{:process 0, :type :invoke, :f :read}\n {:process 0, :type :ok, :f :read :value]\n")
    with pytest.raises(HistoryFormatError, match=r"h\.edn:2:"):
        load(p)


def test_to_edn_reads_back(tmp_path: Path) -> None:
    text = to_edn(OPS)
    assert ":type :invoke" in text and ":process :nemesis" in text and ":f :cas" in text
    p = tmp_path / "h.edn"
    p.write_text(text)
    lh = load(p)
    assert lh.format == "jepsen-edn"
    assert [(o["type"], o["process"], o["f"], o.get("value")) for o in lh.ops] == [
        (o["type"], o["process"], o["f"], o.get("value")) for o in OPS
    ]


def test_porcupine_etcd_lines(tmp_path: Path) -> None:
    p = tmp_path / "e.log"
    p.write_text(
        "INFO  jepsen.util - 0\t:invoke\t:cas\t[1 4]\n"
        "INFO  jepsen.util - 0 :fail :cas [1 4]\n"
        "INFO  jepsen.util - 1\t:invoke\t:read\tnil\n"
        "INFO  jepsen.util - 1\t:fail\t:read\t:timed-out\n"
    )
    lh = load(p)
    assert (lh.format, lh.semantics, lh.model, lh.init) == ("porcupine-etcd", "porcupine", "cas-register", None)
    assert lh.ops[0]["value"] == [1, 4] and lh.ops[3]["error"] == "timed-out"
    p.write_text("INFO  jepsen.util - 0\t:invoke\t:read\tnil\nsomething else\n")
    with pytest.raises(HistoryFormatError, match=r"e\.log:2:"):
        load(p)


def test_detection(tmp_path: Path) -> None:
    cases = {
        "a.jsonl": '{"type": "invoke", "process": 0, "f": "read"}\n',
        "a.json": '[{"type": "invoke", "process": 0, "f": "read"}]',
        "a.edn": "[{:type :invoke, :process 0, :f :read}]",
        "kv.txt": '{:process 0, :type :invoke, :f :get, :key "1", :value nil}\n',
    }
    want = {"a.jsonl": "jsonl", "a.json": "elle-json", "a.edn": "jepsen-edn", "kv.txt": "porcupine-kv"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        assert load(tmp_path / name).format == want[name], name
    assert history.detect_format("INFO  jepsen.util - 0\t:invoke\t:read\tnil") == "porcupine-etcd"
    with pytest.raises(ValueError, match="unknown history format"):
        load(tmp_path / "a.edn", "xml")
