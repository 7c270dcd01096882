"""Histories as Parquet: a fixed, typed schema that keeps every op losslessly.

A history op's `value` may be an int, a string, a list, a map or null, and `process` an int or
"nemesis", so no single Arrow type fits. Each such field is stored twice: `<field>_json` holds the JSON
text exactly (null when the op has no such field, the text `null` when it is present and null), and a
typed convenience column (`process`, `key`, `value_int`, ...) serves queries. Fields outside the format go
to `extra_json`. Reading rebuilds the original dicts from the JSON columns, so a round trip is exact.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from faultline.core import Op
from faultline.history import jsoncodec

SCHEMA_VERSION = "1"
PROBLEMS_KEY = "faultline.jsonl.problems"

SCHEMA = pa.schema(
    [
        pa.field("index", pa.int64()),
        pa.field("time", pa.int64()),  # ns since the run began
        pa.field("type", pa.string()),  # invoke | ok | fail | info
        pa.field("f", pa.string()),
        pa.field("process", pa.int64()),  # null for "nemesis" and other non-int processes
        pa.field("is_nemesis", pa.bool_()),
        pa.field("key", pa.string()),  # str(key) for str/int keys, else its JSON
        pa.field("value_int", pa.int64()),  # the value when it is an int
        pa.field("node", pa.string()),
        pa.field("error", pa.string()),  # the error when it is a string, else its JSON
        pa.field("process_json", pa.string()),
        pa.field("key_json", pa.string()),
        pa.field("value_json", pa.string()),
        pa.field("node_json", pa.string()),
        pa.field("error_json", pa.string()),
        pa.field("extra_json", pa.string()),  # any other fields, and index/time/type/f of an unusual type
    ],
    metadata={b"faultline.history.schema": SCHEMA_VERSION.encode()},
)
VARIANT_FIELDS = ("process", "key", "value", "node", "error")
CORE_FIELDS = {"index": int, "time": int, "type": str, "f": str}
KNOWN = set(CORE_FIELDS) | set(VARIANT_FIELDS)

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode


@dataclass
class JsonlRead:
    ops: list[Op]
    dropped_lines: int = 0  # malformed lines skipped (a truncated tail counts as one)
    problems: list[str] = field(default_factory=list)


def read_jsonl(path: Path | str, *, tolerate_truncated_tail: bool = True, strict: bool = False) -> JsonlRead:
    """Reads a history.jsonl. A truncated or malformed line is dropped with a warning (a crashed run
    leaves a torn last line); `strict` raises instead. Lines end as in a text reader (\\r\\n and a lone
    \\r end one too), and text that is not UTF-8 reads with replacement characters."""
    ops: list[Op] = []
    out = JsonlRead(ops)
    with open(path, "rb") as fh:
        data = fh.read()
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    lines = data.split(b"\n")
    if not lines[-1]:
        lines.pop()  # the file ends with a newline
    last = len(lines) - 1
    decode, fast_errors = jsoncodec.decode_fast, jsoncodec.FAST_ERRORS
    for n, raw in enumerate(lines):
        try:
            op = decode(raw)
            if type(op) is dict:
                ops.append(cast(Op, op))  # a line of our history format
                continue
        except fast_errors:
            pass
        line = raw.decode("utf-8", "replace") + ("\n" if n < last or data.endswith(b"\n") else "")
        if not line.strip():
            continue
        try:
            op = json.loads(line)
            if not isinstance(op, dict):
                raise ValueError("not a JSON object")
        except (ValueError, RecursionError) as exc:
            tail = n == last
            msg = f"{path}:{n + 1}: {'truncated last line' if tail else 'malformed line'} ({exc})"
            if strict or (tail and not tolerate_truncated_tail):
                raise ValueError(msg) from exc
            out.dropped_lines += 1
            out.problems.append(msg)
            warnings.warn(msg, stacklevel=2)
            continue
        ops.append(cast(Op, op))  # a line of our history format
    return out


_encode = msgspec.json.Encoder().encode
_ABSENT = object()


def _json_text(v: Any) -> str:
    """The text `_dumps` gives `v` (a string's through msgspec, which writes the same text faster)."""
    t = type(v)
    if t is int:
        return str(v)
    if t is str:
        try:
            return _encode(v).decode()
        except UnicodeEncodeError:  # a lone surrogate: json escapes it
            return _dumps(v)
    if v is None:
        return "null"
    return _dumps(v)


def _core_columns(ops: list[Mapping[str, Any]]) -> tuple[dict[str, list[Any]], list[dict[str, Any] | None]]:
    """index, time, type and f, and each op's fields outside the schema (or of an unusual type) for
    extra_json, in one pass over the ops."""
    index: list[int] = []
    typed: dict[str, list[Any]] = {"time": [], "type": [], "f": []}
    checks = [(typed[name].append, name, typ) for name, typ in CORE_FIELDS.items() if name != "index"]
    extras: list[dict[str, Any] | None] = []
    known = KNOWN
    for pos, op in enumerate(ops):
        ex = None if op.keys() <= known else {k: op[k] for k in op.keys() - known}
        i = op.get("index", _ABSENT)
        if type(i) is int:
            index.append(i)
        else:
            index.append(pos)
            ex = ex or {}
            if i is not _ABSENT:
                ex["index"] = i
        for append, name, typ in checks:
            v = op.get(name, _ABSENT)
            if type(v) is typ:
                append(v)
            else:
                append(None)
                if v is not _ABSENT:
                    ex = ex or {}
                    ex[name] = v
        if i is _ABSENT:
            ex = ex or {}
            ex["__no_index__"] = True
        extras.append(ex)
    return {"index": index, **typed}, extras


def ops_to_table(ops: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Arrow table in SCHEMA for a list of op dicts (column by column: this runs over millions of ops)."""
    ops = ops if isinstance(ops, list) else list(ops)
    cols, extras = _core_columns(ops)
    text = _json_text
    for name in VARIANT_FIELDS:
        values = [op.get(name, _ABSENT) for op in ops]
        cols[f"{name}_json"] = [None if v is _ABSENT else text(v) for v in values]
        if name == "process":
            cols["process"] = [v if type(v) is int else None for v in values]
            cols["is_nemesis"] = [v == "nemesis" for v in values]
        elif name == "key":
            cols["key"] = [
                v
                if type(v) is str
                else (str(v) if type(v) is int else (None if v is None or v is _ABSENT else _dumps(v)))
                for v in values
            ]
        elif name == "value":
            cols["value_int"] = [v if type(v) is int else None for v in values]
        else:
            cols[name] = [
                v if type(v) is str else (None if v is None or v is _ABSENT else _dumps(v)) for v in values
            ]
    cols["extra_json"] = [None if e is None else _dumps(e) for e in extras]
    return pa.Table.from_pydict({n: cols[n] for n in SCHEMA.names}, schema=SCHEMA)


@dataclass
class ParquetStats:
    rows: int
    duration_s: float | None
    dropped_lines: int


def write_table(table: pa.Table, parquet_path: Path | str, problems: list[str] | None = None) -> None:
    """Atomic write, so a reader never sees a half-written file. `problems` (lines dropped from the JSONL)
    are kept in the file's metadata, so later readers can still warn about them."""
    path = Path(parquet_path)
    if problems:
        meta = dict(table.schema.metadata or {})
        meta[PROBLEMS_KEY] = json.dumps(problems).encode()
        table = table.replace_schema_metadata(meta)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(path)


def write_history_parquet(jsonl_path: Path | str, parquet_path: Path | str) -> ParquetStats:
    """history.jsonl -> history.parquet (tolerating a truncated tail); returns rows and duration."""
    read = read_jsonl(jsonl_path)
    table = ops_to_table(read.ops)
    write_table(table, parquet_path, read.problems)
    return ParquetStats(len(read.ops), history_duration_s(read.ops), read.dropped_lines)


def history_duration_s(ops: Sequence[Mapping[str, Any]]) -> float | None:
    times = [op["time"] for op in ops if type(op.get("time")) is int]
    if not times:
        return None
    return (max(times) - min(times)) / 1e9


def read_problems(parquet_path: Path | str) -> list[str]:
    """The JSONL problems recorded when this Parquet file was written (empty if none)."""
    meta = pq.read_schema(parquet_path).metadata or {}
    raw = meta.get(PROBLEMS_KEY.encode())
    return jsoncodec.loads(raw) if raw else []


def read_history_frame(parquet_path: Path | str, columns: list[str] | None = None) -> Any:
    """The Parquet history as a pandas DataFrame (typed columns and JSON columns)."""
    return table_to_frame(pq.read_table(parquet_path, columns=columns))


def table_to_frame(table: pa.Table) -> Any:
    """A pandas frame whose integers stay exact: int64 columns become pandas' nullable Int64, because
    plain pandas turns an integer column holding a null into float64, which rounds above 2**53."""
    import pandas as pd

    return table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)


EXACT_FLOAT_LIMIT = 2**53  # every integer below it survives a trip through float64; none above is sure to


def _exact_columns(df: Any) -> Any:
    """The frame with nulls as None; refuses a float column that may already have rounded an integer
    (one read with plain `to_pandas()`), rather than hand back a silently different history."""
    for col in ("index", "time"):
        if col in df.columns and df[col].dtype.kind == "f":
            big = df[col].abs() >= EXACT_FLOAT_LIMIT
            if bool(big.any()):
                raise ValueError(
                    f"history column {col!r} went through float64 and may have lost precision "
                    "above 2**53; read it with parquet.table_to_frame (nullable Int64)"
                )
    return df.astype(object).where(df.notna(), None)


def _rows_to_ops(rows: Iterator[tuple[Any, ...]], names: list[str]) -> list[Op]:
    loads = jsoncodec.loads
    pos = {n: i for i, n in enumerate(names)}
    i_index, i_time, i_type, i_f, i_extra = (pos[n] for n in ("index", "time", "type", "f", "extra_json"))
    variants = [(n, pos[f"{n}_json"]) for n in VARIANT_FIELDS]
    out: list[Op] = []
    for r in rows:
        op: dict[str, Any] = {"index": int(r[i_index])}
        t = r[i_time]
        if t is not None:
            op["time"] = int(t)
        if r[i_type] is not None:
            op["type"] = r[i_type]
        if r[i_f] is not None:
            op["f"] = r[i_f]
        for name, i in variants:
            text = r[i]
            if text is not None:
                op[name] = int(text) if text.isdigit() else loads(text)
        if r[i_extra] is not None:
            extra = loads(r[i_extra])
            if extra.pop("__no_index__", False):
                del op["index"]
            op.update(extra)
        out.append(cast(Op, op))  # the op as it was written, its own extra keys included
    return out


def frame_to_ops(df: Any) -> list[Op]:
    """Rebuilds the original op dicts from a DataFrame in SCHEMA (e.g. one Spark group)."""
    names = list(df.columns)
    return _rows_to_ops(_exact_columns(df).itertuples(index=False, name=None), names)


def table_to_ops(table: pa.Table) -> list[Op]:
    names = table.column_names
    cols = [table.column(n).to_pylist() for n in names]
    return _rows_to_ops(zip(*cols, strict=True), names)


def read_history_parquet(parquet_path: Path | str) -> list[Op]:
    """history.parquet -> the exact list of op dicts that was written."""
    return table_to_ops(pq.read_table(parquet_path))
