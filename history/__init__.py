"""History readers and writers: our JSONL, Jepsen EDN, Porcupine logs, elle-cli JSON.

Every reader returns ops in the project's history format (docs/architecture.md):
`{"index", "time"?, "type", "process", "f", "key"?, "value"}` with `type` in
invoke/ok/fail/info and `process` an int or "nemesis". The reader also says which
*semantics* the source assumes (see docs/checkers.md), because Porcupine's and
Knossos's reference data disagree on what `fail` means, and which model and
initial value the format implies.

A leaf package: it imports nothing else of Faultline but core's `Op`, the type of what it reads, so the
recorder, the checkers' callers, the pages and the results all read and write histories the same way.
One module per format: `jsonl` (ours, with its compiled loop `_jsonl`), `jepsen` (EDN), `porcupine` (etcd
logs), `elle` (elle-cli JSON); `detect` tells a file's format and `load`s it; `pairing` checks that
completions follow their invocations; `reading` is what the readers share (the error, the line and nesting
bounds, normalisation). `edn` is the EDN codec; `jsoncodec` the JSON one (msgspec, with json's meaning);
`files` reads a Jepsen store directory and the test map beside a history; `parquet` the Parquet form.
This module only re-exports.
"""

from __future__ import annotations

from faultline.history import edn, jsoncodec
from faultline.history.detect import FORMATS, detect_format, load
from faultline.history.jepsen import to_edn
from faultline.history.jsonl import JSONL_ABI, JsonlWriter, iter_jsonl, read_jsonl, write_jsonl
from faultline.history.pairing import check_pairs, split_independent
from faultline.history.reading import MAX_DEPTH, MAX_LINE, HistoryFormatError, LoadedHistory, frozen_reads

__all__ = [
    "FORMATS",
    "JSONL_ABI",
    "MAX_DEPTH",
    "MAX_LINE",
    "HistoryFormatError",
    "JsonlWriter",
    "LoadedHistory",
    "check_pairs",
    "detect_format",
    "edn",
    "frozen_reads",
    "iter_jsonl",
    "jsoncodec",
    "load",
    "read_jsonl",
    "split_independent",
    "to_edn",
    "write_jsonl",
]
