"""History readers and writers: formats, detection, crash-safe JSONL, clear errors."""

from __future__ import annotations

import json
import os
import random
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faultline import history
from faultline.history import (
    HistoryFormatError,
    JsonlWriter,
    edn,
    jsonl,
    load,
    pairing,
    read_jsonl,
    to_edn,
    write_jsonl,
)

OPS = [
    {"index": 0, "time": 10, "type": "invoke", "process": 0, "f": "write", "key": "k", "value": 3},
    {"index": 1, "time": 20, "type": "invoke", "process": "nemesis", "f": "start-partition", "value": None},
    {"index": 2, "time": 30, "type": "ok", "process": 0, "f": "write", "key": "k", "value": 3},
    {"index": 3, "time": 40, "type": "invoke", "process": 1, "f": "cas", "key": "k", "value": [3, 4]},
    {
        "index": 4,
        "time": 50,
        "type": "info",
        "process": 1,
        "f": "cas",
        "key": "k",
        "value": [3, 4],
        "error": "timeout",
    },
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
    assert (lh.format, lh.semantics, lh.model, lh.init) == (
        "porcupine-etcd",
        "porcupine",
        "cas-register",
        None,
    )
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


# ---------------------------------------------------------------- the fast codecs read as the stdlib did


def test_jsonl_values_beyond_strict_json_read_and_write_back(tmp_path: Path) -> None:
    """msgspec refuses NaN and the infinities and prints them as null; json reads and writes them, and so
    do the history files. Integers beyond 64 bits stay exact (orjson would turn them into floats)."""
    import math

    ops = [
        {"index": 0, "type": "invoke", "process": 0, "f": "write", "value": [math.nan, math.inf, -math.inf]},
        {"index": 1, "type": "ok", "process": 0, "f": "write", "value": 2**70, "error": {True: None}},
    ]
    p = write_jsonl(ops, tmp_path / "h.jsonl")
    text = p.read_text()
    assert "NaN" in text and "Infinity" in text and str(2**70) in text and '"true":null' in text
    back = read_jsonl(p)
    assert math.isnan(back[0]["value"][0]) and back[0]["value"][1:] == [math.inf, -math.inf]
    assert back[1]["value"] == 2**70 and back[1]["error"] == {"true": None}
    with JsonlWriter(tmp_path / "w.jsonl") as w:
        for op in ops:
            w.write(op)
    assert (tmp_path / "w.jsonl").read_text() == text


def test_jsonl_lines_end_as_the_text_readers_ended_them(tmp_path: Path) -> None:
    """\\r\\n and a lone \\r end a line (universal newlines), a blank line is skipped, and the line number
    of an error counts them so."""
    p = tmp_path / "h.jsonl"
    lines = [json.dumps(op) for op in OPS[:3]]
    p.write_bytes((lines[0] + "\r\n" + lines[1] + "\r" + "  \n" + lines[2] + "\r").encode())
    assert read_jsonl(p) == OPS[:3]
    p.write_bytes((lines[0] + "\r" + lines[1] + "\r\n{oops}\r\n").encode())
    with pytest.raises(HistoryFormatError, match=r"h\.jsonl:3: not valid JSON"):
        read_jsonl(p)


# ---------------------------------------------------------------- a crash leaves NUL bytes at the end


def _nul_padded(tmp_path: Path, tail: bytes) -> Path:
    p = tmp_path / "history.jsonl"
    p.write_bytes("".join(json.dumps(op) + "\n" for op in OPS[:3]).encode() + tail)
    return p


@pytest.mark.parametrize(
    ("tail", "kept"),
    [(b"\0" * 5000, 3), (b'{"index": 3, "ty' + b"\0" * 300, 3), (json.dumps(OPS[3]).encode() + b"\0" * 7, 4)],
)
def test_a_nul_padded_end_is_dropped_like_a_cut_last_line(tmp_path: Path, tail: bytes, kept: int) -> None:
    """A crash in the middle of a write can leave the file longer than what was written, the rest NUL
    bytes: after valid lines they are dropped with one warning, with a cut line before them (a whole op
    whose newline was lost is kept)."""
    p = _nul_padded(tmp_path, tail)
    with pytest.warns(
        UserWarning, match=r"history\.jsonl:4: ignoring .*NUL bytes that end the file"
    ) as caught:
        ops = read_jsonl(p)
    assert ops == OPS[:kept] and len(caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert load(p, strict=False).format == "jsonl"
    with pytest.raises(HistoryFormatError, match=r"history\.jsonl:4: binary data \(NUL bytes\)"):
        read_jsonl(p, tolerate_truncated_tail=False)


def test_nul_bytes_anywhere_else_are_still_refused(tmp_path: Path) -> None:
    p = _nul_padded(tmp_path, b"\0\0" + json.dumps(OPS[3]).encode() + b"\n")
    with pytest.raises(HistoryFormatError, match=r"history\.jsonl:4: binary data \(NUL bytes\)"):
        read_jsonl(p)
    p.write_bytes(b"\0" * 10_000)  # nothing valid before them: not a history at all
    with pytest.raises(HistoryFormatError, match=r"history\.jsonl:1: binary data \(NUL bytes\)"):
        load(p)
    p.write_bytes(b"garbage\0\0")
    with pytest.raises(HistoryFormatError, match=r"history\.jsonl:1: not valid JSON"):
        read_jsonl(p)


# ---------------------------------------------------------------- EDN tags


def test_edn_tags_jepsen_histories_use_are_read() -> None:
    text = (
        "#jepsen.history.Op{:index 0, :type :invoke, :process 0, :f :read, :value nil}\n"
        '#knossos.op.Op{:type :ok, :f :read, :value #{1 2}, :time #inst "2026-11-26T00:00:00.000-00:00",'
        ' :id #uuid "f81d4fae-7dec-11d0-a765-00a0c91e6bf6", :error #error {:cause "boom"},'
        ' :obj #object [java.lang.Object 0x1 "x"]}'
    )
    a, b = edn.loads_all(text)
    assert a == {"index": 0, "type": "invoke", "process": 0, "f": "read", "value": None}
    assert b["value"] == [1, 2] and b["time"] == "2026-11-26T00:00:00.000-00:00"
    assert b["id"] == "f81d4fae-7dec-11d0-a765-00a0c91e6bf6" and b["error"] == {"cause": "boom"}
    assert b["obj"] == ["java.lang.Object", "0x1", "x"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[1\n #foo/bar 1]", "line 2: unknown EDN tag #foo/bar"),
        ("#foo 1", "line 1: unknown EDN tag #foo"),
        ("#inst 5", "#inst must be followed by a string"),
        ("#jepsen.history.Op [1]", "#jepsen.history.Op must be followed by a map"),
        ('#"regex"', "unknown EDN dispatch '#'"),
        ("#:ns{:a 1}", "unknown EDN dispatch '#:ns'"),
        ("[#inst]", "#inst must be followed by a string"),
        ("#inst", "#inst with no value after it"),
    ],
)
def test_an_unknown_edn_tag_is_an_error_naming_it(text: str, needle: str) -> None:
    """A tag we cannot know the meaning of was once dropped without a word, its value kept."""
    with pytest.raises(edn.EdnError, match=needle):
        edn.loads_all(text)


def test_an_unknown_tag_in_a_history_names_its_line(tmp_path: Path) -> None:
    p = tmp_path / "h.edn"
    p.write_text(
        "[{:process 0, :type :invoke, :f :write, :value 1}\n"
        " {:process 0, :type :ok, :f :write, :value #foo/bar 1}]\n"
    )
    with pytest.raises(HistoryFormatError) as exc:
        load(p)
    assert str(exc.value).startswith(f"{p}:2: malformed EDN: unknown EDN tag #foo/bar")


def test_edn_strings_over_several_lines_keep_their_line_numbers() -> None:
    vals = list(
        edn.iter_values(['[{:a "one\n', 'two" :b 1}\n', ' {:a 2 ; c "\n', ' :b "x"}]\n'], spread=True)
    )
    assert vals == [(2, {"a": "one\ntwo", "b": 1}), (4, {"a": 2, "b": "x"})]
    with pytest.raises(edn.EdnError, match="line 2: unterminated string"):
        edn.loads_all('[1\n "abc\n def')


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80) | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=4) | st.integers() | st.booleans() | st.none(), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(_JSON)
def test_the_fast_codec_means_what_json_means(v: object) -> None:
    """msgspec where it can, json where it differs: every value reads and writes as with json alone."""
    from faultline.history import jsoncodec

    text = json.dumps(v, separators=(",", ":"))
    want = repr(json.loads(text))
    assert repr(jsoncodec.loads(text.encode())) == repr(jsoncodec.loads(text)) == want
    assert repr(json.loads(jsoncodec.dumps(v))) == want


_LINES = [
    b'{"index":0,"time":1,"type":"invoke","process":0,"f":"txn","value":[["append",1,2],["r",1,null]]}',
    b'{"index":1,"type":"ok","process":0,"f":"read","value":[1,2,3]}',
    b'{"type":"ok","process":0,"f":"read","value":1}',
    b'{"index":2,"type":"ok","process":"0","f":"w","value":1}',
    b'{"index":3,"type":"ok","process":true,"f":"w","value":1}',
    b'{"index":4,"type":"done","process":0,"f":"w"}',
    b'{"index":5,"type":"info","process":"nemesis","f":null,"value":null}',
    b'{"index":6,"type":"ok","process":0}',
    b'{"index":7.5,"type":"ok","process":0,"f":"r","value":NaN}',
    b'{"index":8,"type":"fail","process":1,"f":3}',
    b"",
    b"   ",
    b"[1,2]",
    b'"op"',
    b'{"index":9,"type":"ok"',
    b'{"a":' + b"[" * 120 + b"]" * 120 + b"}",
    b'{"index":10,"type":"ok","process":0,"f":"r","value":' + b"[" * 60 + b"]" * 60 + b"}",
    b'{"index":13,"type":"ok","process":0,"f":"r","value":' + b"[" * 101 + b"]" * 101 + b"}",
    b'{"index":11,"type":"ok","process":0,"f":"r","value":"\\ud800"}',
    b"\xff\xfe",
    b'{"index":12,"type":"ok","process":0,"f":"r","value":[' + b"[[1]]," * 40 + b"null]}",
]


def test_the_compiled_jsonl_reader_reads_what_the_python_loop_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On files of the usual lines mixed with every kind of unusual one (ops to normalise, blank lines, lines
    msgspec refuses, deep nesting, errors), history/_jsonl.c and the Python loop give the same ops, line
    numbers and warnings, or the same error on the same line."""
    compiled = jsonl._jsonl
    if compiled is None:
        if os.environ.get("CI") == "true":
            pytest.fail("history/_jsonl.c is not built (make install builds it)")
        pytest.skip("history/_jsonl.c is not built")
    rng = random.Random(30)
    path = tmp_path / "h.jsonl"
    for trial in range(400):
        lines = [
            rng.choice(_LINES[:2]) if rng.random() < 0.7 else rng.choice(_LINES)
            for _ in range(rng.randint(0, 30))
        ]
        path.write_bytes(b"\n".join(lines) + (b"\n" if rng.random() < 0.8 else b""))
        outs = []
        for mod in (compiled, None):
            monkeypatch.setattr(jsonl, "_jsonl", mod)  # the reader looks it up in its own module
            try:
                with warnings.catch_warnings(record=True) as seen:
                    warnings.simplefilter("always")
                    h = history.load(path, "jsonl", strict=False)
                outs.append(repr((h.ops, list(h.lines), h.warnings, [str(w.message) for w in seen])))
            except history.HistoryFormatError as exc:
                outs.append(f"error {exc}")
        assert outs[0] == outs[1], (trial, lines)


def test_the_compiled_pairing_check_judges_as_the_python_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """history/_jsonl.c's pairs() and check_pairs's Python loop accept the same histories, and the error on a
    bad one is the Python loop's (processes that are ints, names and nemesis; f and key mismatches)."""
    compiled = pairing._jsonl
    if compiled is None:
        pytest.skip("history/_jsonl.c is not built")
    rng = random.Random(30)
    verdicts = set()
    for trial in range(3000):
        ops: list[dict] = []
        for i in range(rng.randint(0, 12)):
            op = {
                "index": i,
                "type": rng.choice(["invoke", "invoke", "ok", "info", "fail"]),
                "process": rng.choice([0, 1, 2, "nemesis", "p", None, True]),
                "f": rng.choice(["r", "w", None]),
                "value": None,
            }
            if rng.random() < 0.2:
                op["key"] = rng.choice([1, 2, None, [1]])
            ops.append(op)
        outs = []
        for mod in (compiled, None):
            monkeypatch.setattr(pairing, "_jsonl", mod)  # check_pairs looks it up in its own module
            try:
                history.check_pairs(ops, list(range(1, len(ops) + 1)), "h")
                outs.append("ok")
            except HistoryFormatError as exc:
                outs.append(str(exc))
        assert outs[0] == outs[1], (trial, ops)
        verdicts.add(outs[0][:20])
    assert len(verdicts) > 3
