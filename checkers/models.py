"""Sequential specifications (models) for the linearizability checker.

A model is a small class with `init(init_value)` returning a hashable state and
`step(state, f, value, outcome)` returning the next state or `ILLEGAL`. States
must be hashable and compare by value, because the checker interns them and
memoises (linearized set, state) pairs: that is what makes the search fast.

`value` is the op's value as the history records it (a read's is what the
completion returned); `outcome` is "ok", "fail" (completed without effect, the
Porcupine convention) or "info" (unknown: any result is acceptable).
`ANY` as a read value means "the read's result is unknown".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


class _Illegal:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ILLEGAL"


class _Any:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ANY"


ILLEGAL: Any = _Illegal()
ANY: Any = _Any()


class Typed:
    """A boolean or a float that equals only its own type: JSON `true` is not `1` and `1.0` is not `1`
    (Python's `==` says they are; Clojure's `=` and Jepsen say they are not). NaN equals NaN, so a NaN
    written can be read back, and 0.0 equals -0.0."""

    __slots__ = ("v",)

    def __init__(self, v: bool | float) -> None:
        self.v = v

    def _key(self) -> tuple[str, Any]:
        v = self.v
        return (type(v).__name__, "nan" if v != v else v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Typed) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return repr(self.v)


def freeze(v: Any) -> Any:
    """A hashable twin of a JSON-ish value (lists -> tuples, dicts -> sorted item tuples, booleans and floats
    -> Typed) that compares by type and value."""
    if isinstance(v, bool | float):
        return Typed(v)
    if isinstance(v, list | tuple):
        return tuple(freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted(((k, freeze(x)) for k, x in v.items()), key=repr))
    if isinstance(v, set | frozenset):
        return frozenset(freeze(x) for x in v)
    return v


def thaw(v: Any) -> Any:
    """The JSON-ish value `freeze` came from (tuples -> lists; sets -> sorted lists), for reports."""
    if isinstance(v, Typed):
        return v.v
    if isinstance(v, tuple):
        return [thaw(x) for x in v]
    if isinstance(v, frozenset):
        return sorted((thaw(x) for x in v), key=repr)
    if isinstance(v, dict):
        return {str(thaw(k)): thaw(x) for k, x in v.items()}
    return v


def _pair(v: Any) -> bool:
    return isinstance(v, list | tuple) and len(v) == 2


class Model:
    """Base class: subclasses define `name`, `description`, `init` and `step`."""

    name: ClassVar[str] = "model"
    description: ClassVar[str] = ""
    default_init: ClassVar[Any] = None
    # f names that never change the state: an op of these with an unknown result can be dropped.
    read_only: ClassVar[frozenset[str]] = frozenset()

    def init(self, init_value: Any = None) -> Any:
        return freeze(self.default_init if init_value is None else init_value)

    # The fs the model knows; an op with another f is bad input, not a violation.
    fs: ClassVar[frozenset[str]] = frozenset()

    def step(self, state: Any, f: str, value: Any, outcome: str) -> Any:
        raise NotImplementedError

    def problem(self, f: Any, value: Any, completed: bool) -> str | None:
        """Why an op (its f, and its value: the completion's when `completed`) does not fit the model,
        or None. The search would call such an op illegal; it is bad input instead."""
        if f not in self.fs:
            known = ", ".join(sorted(self.fs))
            return (
                f"{self.name} has no operation {f!r} (it knows {known})"
                if f is not None
                else (f"an operation without f (the {self.name} model knows {known})")
            )
        return self.value_problem(f, value, completed)

    def value_problem(self, f: str, value: Any, completed: bool) -> str | None:
        return None

    def is_noop(self, f: str, value: Any, outcome: str) -> bool:
        """True if the op can neither change the state nor be refuted (so the search skips it)."""
        return f in self.read_only and (outcome == "info" or value is ANY)

    def is_observer(self, f: str, value: Any, outcome: str) -> bool:
        """True if the op leaves the state unchanged wherever it is legal.

        The search may then linearize it as soon as it is legal and never try
        alternatives at that point (moving an observer earlier keeps a valid
        linearization valid), which prunes most of the search for reads.
        """
        return outcome == "fail" or f in self.read_only

    def describe_state(self, state: Any) -> Any:
        return state


@dataclass
class Register(Model):
    """A read/write register."""

    name: ClassVar[str] = "register"
    description: ClassVar[str] = "read/write register: read returns the last written value"
    read_only: ClassVar[frozenset[str]] = frozenset({"read"})
    fs: ClassVar[frozenset[str]] = frozenset({"read", "write"})

    def step(self, state: Any, f: str, value: Any, outcome: str) -> Any:
        return _read_or_write(state, f, value, outcome)


def _read(state: Any, value: Any, outcome: str) -> Any:
    """A register read: legal when its value is unknown or the state."""
    if outcome == "info" or value is ANY or value == state:
        return state
    return ILLEGAL


def _read_or_write(state: Any, f: str, value: Any, outcome: str) -> Any:
    """A register's read or write; any other op is illegal."""
    if f == "read":
        return _read(state, value, outcome)
    if f == "write":
        return state if outcome == "fail" else value
    return ILLEGAL


@dataclass
class CasRegister(Model):
    """A register with compare-and-set; `value` of a cas is `[expected, new]`."""

    name: ClassVar[str] = "cas-register"
    description: ClassVar[str] = "register with read, write and cas [old new]; a failed cas saw another value"
    read_only: ClassVar[frozenset[str]] = frozenset({"read"})
    fs: ClassVar[frozenset[str]] = frozenset({"read", "write", "cas"})

    def value_problem(self, f: str, value: Any, completed: bool) -> str | None:
        if f == "cas" and not _pair(value):
            return f"a cas value must be [old new], got {value!r}"
        return None

    def step(self, state: Any, f: str, value: Any, outcome: str) -> Any:
        if f == "cas":
            old, new = value
            if outcome == "ok":
                return new if state == old else ILLEGAL
            if outcome == "fail":  # Porcupine's convention: it ran and found another value
                return state if state != old else ILLEGAL
            return new if state == old else state  # unknown outcome
        return _read_or_write(state, f, value, outcome)


@dataclass
class KV(Model):
    """One key of a string store with get/put/append (Porcupine's kv); partition by key."""

    name: ClassVar[str] = "kv"
    description: ClassVar[str] = 'string value per key: get, put, append (initial ""); checked per key'
    default_init: ClassVar[Any] = ""
    read_only: ClassVar[frozenset[str]] = frozenset({"get", "read"})
    fs: ClassVar[frozenset[str]] = frozenset({"get", "read", "put", "write", "append"})

    def value_problem(self, f: str, value: Any, completed: bool) -> str | None:
        reading = f in self.read_only
        if (value is None and (reading or not completed)) or isinstance(value, str):
            return None
        return f"a kv {f} value must be a string, got {value!r}"

    def step(self, state: Any, f: str, value: Any, outcome: str) -> Any:
        if f in ("get", "read"):
            return _read(state, value, outcome)
        if outcome == "fail":
            return state
        if f in ("put", "write"):
            return value
        if f == "append":
            return state + value
        return ILLEGAL


@dataclass
class SetModel(Model):
    """A grow-only set: add(v), read -> the whole set."""

    name: ClassVar[str] = "set"
    description: ClassVar[str] = "grow-only set: add v; read returns all elements"
    read_only: ClassVar[frozenset[str]] = frozenset({"read"})
    fs: ClassVar[frozenset[str]] = frozenset({"add", "read"})

    def value_problem(self, f: str, value: Any, completed: bool) -> str | None:
        if f == "read" and completed and value is not None and not isinstance(value, list | tuple):
            return f"a set read returns a list of elements, got {value!r}"
        return None

    def init(self, init_value: Any = None) -> Any:
        return frozenset(freeze(x) for x in (init_value or ()))

    def step(self, state: Any, f: str, value: Any, outcome: str) -> Any:
        if f == "add":
            if outcome == "fail":
                return state
            return state | {freeze(value)}
        if f == "read":
            if outcome == "info" or value is ANY:
                return state
            return state if frozenset(freeze(x) for x in value) == state else ILLEGAL
        return ILLEGAL

    def describe_state(self, state: Any) -> Any:
        return sorted(state, key=repr)


@dataclass
class MultiRegister(Model):
    """Several named registers changed by transactions `[[f, k, v], ...]` of read/write."""

    name: ClassVar[str] = "multi-register"
    description: ClassVar[str] = (
        "named registers; txn value [[read|write, key, value], ...]; missing keys read init"
    )
    read_only: ClassVar[frozenset[str]] = frozenset()
    fs: ClassVar[frozenset[str]] = frozenset({"txn"})
    default_value: Any = None

    def problem(self, f: Any, value: Any, completed: bool) -> str | None:
        if f not in (None, "txn"):
            return f"multi-register has no operation {f!r} (it knows txn)"
        if not isinstance(value, list | tuple) or not all(
            isinstance(m, list | tuple) and len(m) == 3 and m[0] in ("read", "r", "write", "w") for m in value
        ):
            return f"a multi-register txn is a list of [read|write key value], got {value!r}"
        return None

    def init(self, init_value: Any = None) -> Any:
        if isinstance(init_value, dict):
            return freeze(init_value)
        self.default_value = freeze(init_value)
        return ()

    def step(self, state: Any, f: str, value: Any, outcome: str) -> Any:
        if outcome == "fail":
            return state
        regs = dict(state)
        for mop in value:
            mf, k, v = mop[0], mop[1], mop[2]
            if mf in ("read", "r"):
                if outcome == "info" or v is None or v is ANY:
                    continue
                if regs.get(k, self.default_value) != v:
                    return ILLEGAL
            elif mf in ("write", "w"):
                regs[k] = freeze(v)
            else:
                return ILLEGAL
        return tuple(sorted(regs.items(), key=repr))

    def is_observer(self, f: str, value: Any, outcome: str) -> bool:
        return outcome == "fail" or all(m[0] in ("read", "r") for m in value)

    def is_noop(self, f: str, value: Any, outcome: str) -> bool:
        return all(m[0] in ("read", "r") for m in value) and (
            outcome == "info" or all(m[2] is None or m[2] is ANY for m in value)
        )

    def describe_state(self, state: Any) -> Any:
        return {str(k): v for k, v in state}


@dataclass
class Mutex(Model):
    """A lock (Knossos's mutex): acquire succeeds when it is free, release when it is held."""

    name: ClassVar[str] = "mutex"
    description: ClassVar[str] = "lock: acquire when free, release when held (initially free)"
    default_init: ClassVar[Any] = False
    fs: ClassVar[frozenset[str]] = frozenset({"acquire", "release"})

    def step(self, state: Any, f: str, value: Any, outcome: str) -> Any:
        held = state == Typed(True)
        if outcome == "fail":
            return state
        if f == "acquire":
            return ILLEGAL if held else Typed(True)
        if f == "release":
            return Typed(False) if held else ILLEGAL
        return ILLEGAL


MODELS: dict[str, type[Model]] = {
    m.name: m for m in (Register, CasRegister, KV, SetModel, MultiRegister, Mutex)
}


def get_model(name: str | Model) -> Model:
    """A fresh model instance by name (or the instance itself)."""
    if isinstance(name, Model):
        return name
    try:
        return MODELS[name]()
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(sorted(MODELS))}") from None
