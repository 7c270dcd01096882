"""Which checker (and model) fits a history, when the user names none.

A wrong model gives a wrong verdict (a list-append history checked as a register is "invalid"), so the
choice is made from evidence, in this order, and refused when the evidence does not settle it:

1. the test map beside the history (our `test.json`, a Jepsen store's `test.edn`): its `checker`, `model`
   or `workload`;
2. Elle-style transactions (micro-ops `append`/`r`/`w`);
3. the client ops' `f` names and value shapes (WHAT_FS below), with the model the format implies breaking a
   tie within the register family.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from faultline.checkers.elle.txns import detect_kind

# Our workloads (workloads/*.py) and the checker each names; `checkers` imports nothing else of faultline,
# so the table lives here.
WORKLOAD_CHECKERS: dict[str, tuple[str, str | None]] = {
    "register": ("linearizable", "cas-register"),
    "cas-register": ("linearizable", "cas-register"),
    "set": ("set", None),
    "bank": ("bank", None),
    "catalog": ("catalog", None),
    "queue": ("total-queue", None),
    "lock": ("linearizable", "mutex"),
    "counter": ("counter", None),
    "unique-ids": ("unique-ids", None),
    "long-fork": ("long-fork", None),
    "list-append": ("elle-list-append", None),
    "rw-register": ("elle-rw-register", None),
}


@dataclass(frozen=True)
class Choice:
    """A checker name from checkers.registry, the model when it is `linearizable`, and why."""

    checker: str
    model: str | None
    reason: str


class CannotInfer(ValueError):
    """The history does not say which checker fits; the message names the flags to pass."""


def _from_test(test: Mapping[str, Any]) -> Choice | None:
    from faultline.checkers.models import MODELS
    from faultline.checkers.registry import CHECKERS

    checker, model, workload = test.get("checker"), test.get("model"), test.get("workload")
    if isinstance(checker, str) and checker in CHECKERS and checker != "linearizable":
        return Choice(checker, None, f"the test map names checker {checker}")
    if isinstance(model, str) and model in MODELS:
        return Choice("linearizable", model, f"the test map names model {model}")
    if isinstance(workload, str) and workload in WORKLOAD_CHECKERS:
        c, m = WORKLOAD_CHECKERS[workload]
        return Choice(c, m, f"the test map names workload {workload}")
    return None


def _client(ops: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [op for op in ops if op.get("process") != "nemesis"]


def _read_values(ops: list[Mapping[str, Any]], f: str = "read") -> list[Any]:
    return [
        op.get("value")
        for op in ops
        if op.get("type") == "ok" and op.get("f") == f and op.get("value") is not None
    ]


def _repeated_amounts(ops: list[Mapping[str, Any]]) -> bool:
    """Every add invocation adds an integer and some integer is added twice: increments, not elements."""
    amounts = [op.get("value") for op in ops if op.get("f") == "add" and op.get("type") == "invoke"]
    return (
        bool(amounts)
        and all(isinstance(v, int) and not isinstance(v, bool) for v in amounts)
        and len(set(amounts)) < len(amounts)
    )


def _register_model(fmt_model: str | None) -> str:
    return fmt_model if fmt_model in ("register", "cas-register") else "cas-register"


def _from_ops(ops: list[Mapping[str, Any]], fmt_model: str | None) -> Choice | None:
    """The checker the client fs and value shapes imply, or None."""
    fs = {op.get("f") for op in ops}
    reads = _read_values(ops)
    why = f"client fs {', '.join(sorted(map(str, fs)))}"
    if fs <= {"read", "write", "cas"} and fs:
        if all(isinstance(v, dict) for v in reads) and reads and "write" not in fs and "cas" not in fs:
            return Choice("bank", None, f"{why}, reads of account maps")
        if any(isinstance(v, list | dict) for v in reads):
            return None  # reads of collections: not a register (Jepsen's long-fork reads look like this)
        return Choice("linearizable", _register_model(fmt_model), f"{why}, scalar reads")
    if fs <= {"read", "transfer"} and "transfer" in fs:
        return Choice("bank", None, why)
    if fs <= {"add", "read"} and "add" in fs:
        if reads and all(isinstance(v, list) for v in reads):
            return Choice("set", None, f"{why}, reads of element lists")
        if reads and all(isinstance(v, int) and not isinstance(v, bool) for v in reads):
            return Choice("counter", None, f"{why}, reads of numbers")
        if not reads and _repeated_amounts(ops):
            return Choice(
                "counter",
                None,
                f"{why}, no read, the same numbers added again: a counter's "
                "increments (a set's adds name distinct elements)",
            )
        return None
    if fs <= {"get", "put", "append"} and fs & {"get", "put"}:
        return Choice("linearizable", "kv", why)
    if fs <= {"acquire", "release"} and fs:
        return Choice("linearizable", "mutex", why)
    if fs <= {"enqueue", "dequeue", "drain"} and fs & {"enqueue", "dequeue"}:
        return Choice("total-queue", None, why)
    if fs == {"generate"}:
        return Choice("unique-ids", None, why)
    if (
        fs <= {"txn", None}
        and fs
        and all(
            isinstance(v, list)
            and all(isinstance(m, list) and len(m) == 3 and m[0] in ("read", "write") for m in v)
            for v in (op.get("value") for op in ops)
            if v is not None
        )
    ):
        return Choice("linearizable", "multi-register", f"{why}, read/write micro-ops")
    return None


def infer(
    ops: Sequence[Mapping[str, Any]], test: Mapping[str, Any] | None = None, fmt_model: str | None = None
) -> Choice:
    """The checker for `ops`: from the test map, Elle-style transactions, or the fs and value shapes.
    Raises CannotInfer naming --model / --checker when none of them settles it."""
    if test:
        chosen = _from_test(test)
        if chosen is not None:
            return chosen
    kind = detect_kind(ops)
    if kind is not None:
        return Choice(f"elle-{kind}", None, f"{kind} transactions")
    client = _client(ops)
    if not client and fmt_model is not None:  # nothing to judge: trivially valid under the format's model
        return Choice("linearizable", fmt_model, f"no client operations; the format implies {fmt_model}")
    chosen = _from_ops(client, fmt_model)
    if chosen is not None:
        return chosen
    from faultline.checkers.models import MODELS
    from faultline.checkers.registry import CHECKERS

    fs = sorted({str(op.get("f")) for op in client})
    what = f"client fs {', '.join(fs)}" if fs else "no client operations"
    raise CannotInfer(
        f"cannot tell which checker fits ({what}); pass --model ({', '.join(sorted(MODELS))}) "
        f"or --checker ({', '.join(c for c in CHECKERS if c != 'linearizable')})"
    )


# The fs each non-linearizability checker reads; any other client f is bad input for it.
CHECKER_FS: dict[str, frozenset[str]] = {
    "set": frozenset({"add", "read"}),
    "counter": frozenset({"add", "read"}),
    "bank": frozenset({"read", "transfer"}),
    "unique-ids": frozenset({"generate"}),
    "total-queue": frozenset({"enqueue", "dequeue", "drain"}),
    "catalog": frozenset(
        {
            "create-table",
            "delete-table",
            "alter-table",
            "describe-table",
            "list-tables",
            "locate-tables",
            "master-replicas",
        }
    ),
}


def check_fs(ops: Sequence[Mapping[str, Any]], choice: Choice) -> None:
    """Raises ops.BadOp at the first client op whose f the chosen checker does not know (linearizability's
    models check their own fs, with the value shapes, when the search prepares the history)."""
    from faultline.checkers.ops import BadOp

    known = CHECKER_FS.get(choice.checker)
    if known is None:
        return
    for pos, op in enumerate(ops):
        if op.get("process") != "nemesis" and op.get("f") not in known:
            raise BadOp(
                pos,
                f"the {choice.checker} checker has no operation {op.get('f')!r} "
                f"(it knows {', '.join(sorted(known))})",
            )
