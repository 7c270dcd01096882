"""Porcupine's etcd logs: Jepsen's `INFO jepsen.util - P :type :f value` lines, one op each. (Porcupine's
kv files are EDN: `jepsen`.)"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from faultline.history import edn
from faultline.history.reading import HistoryFormatError, _Collector, _norm_process

_ETCD_LINE = re.compile(r"^INFO\s+jepsen\.util\s+-\s+(\S+)\s+:(\w+)\s+:(\w+)\s+(.*?)\s*$")


def _parse_etcd(lines: Iterable[tuple[int, str]], col: _Collector) -> None:
    path = col.path
    for i, line in lines:
        if not line.strip():
            continue
        m = _ETCD_LINE.match(line)
        if m is None:
            raise HistoryFormatError(
                path, i, "not a Jepsen etcd log line (INFO jepsen.util - P :type :f value)"
            )
        proc, typ, f, raw = m.groups()
        if typ not in ("invoke", "ok", "fail", "info"):
            raise HistoryFormatError(path, i, f"unknown operation type :{typ}")
        op: dict[str, Any] = {"index": len(col.ops), "type": typ, "process": _norm_process(proc), "f": f}
        if raw == ":timed-out":
            op["value"] = None
            op["error"] = "timed-out"
        else:
            try:
                vals = edn.loads_all(raw)
            except edn.EdnError as exc:
                raise HistoryFormatError(path, i, f"bad value {raw!r}: {exc}") from None
            if len(vals) != 1:
                raise HistoryFormatError(path, i, f"bad value {raw!r}")
            op["value"] = vals[0]
        col.add(op, i)
